"""From one attack's scores to the numbers a target row reports: ROC metrics and ε lower bounds.

Pure: scores, coin-flip membership, labels and the accountant's ε in; a JSON-ready dict out.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from audit.statistics.attack_metrics import (
    advantage_bound,
    auc_with_ci,
    membership_advantage,
    per_class_tpr_at_fpr,
    roc_curve_points,
    tpr_at_fpr,
)
from audit.statistics.epsilon_bounds import (
    HeldOut,
    epsilon_estimate_gdp,
    epsilon_lower_bound_clopper_pearson,
    epsilon_lower_bound_one_run,
)

FPR_LEVELS = (0.001, 0.01, 0.1)
# Sound lower bounds that may decide a violation; the GDP estimate is reported but never used.
SOUND_BOUNDS = ("clopper_pearson", "one_run")


def evaluate_attack(
    name: str,
    scores: np.ndarray,
    members: np.ndarray,
    labels: np.ndarray,
    *,
    delta: float,
    confidence: float,
    threshold_seed: int,
    accountant_epsilon: float | None,
    membership_randomized: bool = True,
) -> dict[str, Any]:
    """Metrics of one attack on one target (see DESIGN.md, results.json `attacks[]`).

    The one-run bound is valid only when each candidate's membership was an independent fair coin
    flip; with `membership_randomized=False` (e.g. a user's own member/non-member split) it is not
    computed and reported as None.
    """
    auc, (auc_lo, auc_hi) = auc_with_ci(scores, members, confidence=confidence)
    cp = epsilon_lower_bound_clopper_pearson(
        scores, members, delta, confidence=confidence, strategy=HeldOut(fraction=0.5, seed=threshold_seed)
    )
    one_run = (
        epsilon_lower_bound_one_run(scores, members, delta, confidence=confidence) if membership_randomized else None
    )
    gdp = epsilon_estimate_gdp(
        scores, members, delta, confidence=confidence, strategy=HeldOut(fraction=0.5, seed=threshold_seed)
    )
    advantage = membership_advantage(scores, members)
    bound = None
    if accountant_epsilon is not None and math.isfinite(accountant_epsilon):
        bound = advantage_bound(accountant_epsilon, delta)
    return {
        "name": name,
        "auc": auc,
        "auc_ci": [auc_lo, auc_hi],
        "tpr_at_fpr": {str(level): value for level, value in tpr_at_fpr(scores, members, FPR_LEVELS).items()},
        "tpr_at_fpr_0.01_per_class": {
            str(label): value for label, value in per_class_tpr_at_fpr(scores, members, labels, fpr=0.01).items()
        },
        "advantage": advantage,
        "advantage_bound": bound,
        "epsilon_lb": {"clopper_pearson": cp.epsilon, "one_run": one_run.epsilon if one_run else None},
        "epsilon_lb_details": {
            "clopper_pearson": cp.details,
            "one_run": one_run.details if one_run else "not computed: membership was not declared a fair coin flip",
        },
        "epsilon_estimate_gdp": {
            "epsilon": gdp.epsilon if math.isfinite(gdp.epsilon) else None,  # JSON has no infinity
            "label": "estimate (assumes GDP); not a lower bound, never used for a violation",
            "details": gdp.details,
        },
        "confidence": confidence,
        "n_members": int(np.sum(members)),
        "n_nonmembers": int(np.size(members) - np.sum(members)),
    }


def best_sound_lower_bound(attacks: list[dict[str, Any]]) -> tuple[float, str | None]:
    """Largest sound ε lower bound over attacks and estimators, and which (attack/estimator) gave it."""
    best, where = 0.0, None
    for attack in attacks:
        for method in SOUND_BOUNDS:
            value = attack["epsilon_lb"][method]
            if value is not None and value > best:
                best, where = value, f"{attack['name']}/{method}"
    return best, where


def roc_points(scores: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    fpr, tpr, _ = roc_curve_points(scores, members)
    return fpr, tpr
