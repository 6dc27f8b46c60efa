"""Tests of "the attack does no better than chance", for a model or release with no DP claim.

Without a claimed ε there is nothing to refute; what a reader needs is whether membership leaks at
all, by a test valid for the setting, with its p-value. Each function recomputes a p-value from the
numbers results.json already holds, so `report` and `gate` reach the same statement as the run.

Pure functions, no I/O.
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

from scipy import stats

from audit.statistics.epsilon_bounds import one_run_claim_p_value

__all__ = ["delong_p_value_from_interval", "held_out_threshold_p_value", "one_run_chance_p_value", "plain_tpr_sentence"]


def delong_p_value_from_interval(auc: float | None, interval: Any, confidence: float) -> float | None:
    """One-sided p-value of "AUC ≤ ½" from the two-sided DeLong interval `auc ± z·sd` results.json holds.

    DeLong, DeLong & Clarke-Pearson 1988 (Biometrics 44:837-845), the normal test of
    `attack_metrics.auc_p_value_above_chance`: p = 1 − Φ((AUC − ½)/sd), with sd recovered as
    (AUC − low)/z_{(1+confidence)/2}. The interval was clipped to [0, 1]: a lower end clipped at 0
    hides the width, and the test then answers p = 1 (it cannot be significant: the interval reaches
    below ½ anyway). A zero-width interval is DeLong's degenerate case of perfect separation:
    p = 0 when AUC > ½. None when the numbers are missing.

    Assumption: members and non-members are independent draws from one population (the model is the
    only thing that tells them apart; see the blind baseline, Das et al. 2024, arXiv 2406.16201).
    """
    if not _number(auc) or not isinstance(interval, (list, tuple)) or len(interval) != 2:
        return None
    low = interval[0]
    if not _number(low) or not 0 < confidence < 1:
        return None
    if auc <= 0.5:
        return 1.0
    if low <= 0.0:
        return 1.0
    z = stats.norm.ppf(0.5 + confidence / 2.0)
    sd = (auc - low) / z
    if sd <= 0:
        return 0.0
    return float(stats.norm.sf((auc - 0.5) / sd))


def held_out_threshold_p_value(details: Any) -> float | None:
    """One-sided p-value of "the held-out threshold flags members no more often than non-members".

    The Clopper-Pearson audit (Jagielski, Ullman, Oprea 2020, arXiv 2006.07709) chooses one
    threshold on a selection half and counts its errors on the other half; on that evaluation half
    the rule is fixed, so Fisher's exact test of the 2 × 2 table (flagged × member) is exact:
    its alternative is that the rule's TPR exceeds its FPR. `details` is
    `attack["epsilon_lb_details"]["clopper_pearson"]`. None when the counts are missing.

    Assumption: the evaluation records are independent draws (one model, many records: valid for
    "does it leak", not for an ε bound, which needs independent training runs).
    """
    if not isinstance(details, dict):
        return None
    try:
        fp, n0 = int(details["false_positives"]), int(details["n_nonmembers"])
        fn, n1 = int(details["false_negatives"]), int(details["n_members"])
    except (KeyError, TypeError, ValueError):
        return None
    if min(n0, n1) <= 0 or not (0 <= fp <= n0 and 0 <= fn <= n1):
        return None
    table = [[n1 - fn, fn], [fp, n0 - fp]]
    return float(stats.fisher_exact(table, alternative="greater").pvalue)


def one_run_chance_p_value(details: Any) -> float | None:
    """p-value of "guessing membership is at chance" (ε = 0, δ = 0) from a one-run audit's guesses.

    Steinke, Nasr, Jagielski 2023, arXiv 2305.08846 (`one_run_claim_p_value` at ε = 0): proven when
    each candidate's membership was an independent fair coin flip. None without recorded guesses.
    """
    if not isinstance(details, dict) or not details.get("per_fraction"):
        return None
    try:
        return one_run_claim_p_value(details, 0.0, 0.0)
    except (KeyError, TypeError, ValueError):
        return None


def plain_tpr_sentence(tpr: Any, fpr: float, what: str = "training records") -> str | None:
    """ "an attacker who accepts 1 false accusation in 100 identifies 9.4 % of the training records"."""
    if not _number(tpr) or not 0 < fpr < 1:
        return None
    return (
        f"an attacker who accepts 1 false accusation in {round(1 / fpr):,} identifies "
        f"{100 * float(tpr):.1f} % of the {what}"
    )


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
