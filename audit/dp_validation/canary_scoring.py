"""Membership scores of canaries from a model's log class probabilities (pure functions): scaled
logits, gains over a base point, per-canary standardisation, AUC, and the one-run f-DP report."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

from audit.dp_validation.canary_workers import _log_probabilities
from audit.errors import AuditInputError

STATISTICS = ("scaled_logit", "loss")
# Multi-run statistics: the two above, and the gain of the scaled logit from the canary's base point
# to the canary (out-of-distribution canaries only; the default for them, see `multi_run_canary_audit`).
MULTI_RUN_STATISTICS = STATISTICS + ("scaled_logit_gain",)


def canary_scores(model, points: np.ndarray, labels: np.ndarray, statistic: str = "scaled_logit") -> np.ndarray:
    """Membership score of each canary under `model`; higher = more likely trained on.

    "loss": −(cross-entropy) = ln p_y. "scaled_logit": ln(p_y / (1 − p_y)) = z_y − logsumexp of
    the other logits (the logit scaling of Carlini et al. 2022, "Membership Inference Attacks From
    First Principles", arXiv 2112.03570). Both increase with p_y, so they order the models the
    same way and define the same threshold tests; the scaled logit just does not saturate: a
    model that fits the canary with margin 50 and one that fits it with margin 5000 both have
    loss 0 in floating point, but scaled logits 50 and 5000 — and that difference is exactly what
    an unclipped canary gradient produces.

    A model whose output at a canary is not finite (NaN logits) gets −inf there: a fixed rule, so
    the test stays valid.
    """
    if statistic not in STATISTICS:
        raise AuditInputError("statistic", f"expected one of {', '.join(STATISTICS)}, got {statistic!r}")
    return scores_from_log_probabilities(
        _log_probabilities(model, np.asarray(points, dtype=np.float32)), labels, statistic
    )


def scores_from_log_probabilities(log_probs: np.ndarray, labels, statistic: str = "scaled_logit") -> np.ndarray:
    """`canary_scores` from (n, C) log class probabilities already computed (in a worker)."""
    log_probs = np.asarray(log_probs, dtype=float)
    labels = np.asarray(labels, dtype=np.int64)
    if log_probs.shape[1] <= int(labels.max()):
        raise AuditInputError(
            "trainer",
            f"the model outputs {log_probs.shape[1]} classes but the canary's label is {int(labels.max())}",
        )
    rows = np.arange(labels.size)
    scores = log_probs[rows, labels]
    if statistic == "scaled_logit":
        others = log_probs.copy()
        others[rows, labels] = -np.inf
        with np.errstate(invalid="ignore"):
            scores = scores - special.logsumexp(others, axis=1)
    return np.where(np.isnan(scores), -np.inf, scores)


def _finite_for_json(values) -> list[float | None]:
    return [float(v) if math.isfinite(v) else None for v in np.asarray(values, dtype=float)]


def _gains(log_probs: np.ndarray, canary_labels: np.ndarray) -> np.ndarray:
    """Per canary: scaled logit of its label at the canary minus the same at the base point."""
    J = canary_labels.size
    at_canary = scores_from_log_probabilities(log_probs[:J], canary_labels)
    at_base = scores_from_log_probabilities(np.repeat(log_probs[J : J + 1], J, axis=0), canary_labels)
    with np.errstate(invalid="ignore"):
        gain = at_canary - at_base
    return np.where(np.isnan(gain), -np.inf, gain)


def _per_canary_standardised(scores: np.ndarray) -> np.ndarray:
    """(runs, J) scores → each canary's column minus its median over all runs, over its MAD.

    A canary's score has an offset of its own (its label, its base point's prediction) that is the
    same in every run; ranking slots of different canaries against each other without removing it
    mixes those offsets into the guesses. The median and MAD are functions of every run's output
    and none of the coins, so the one-run analysis stays valid (any coin-free function of the
    mechanism's output may score the slots).
    """
    finite = _below_every_finite(scores.ravel()).reshape(scores.shape)
    centre = np.median(finite, axis=0)
    spread = np.median(np.abs(finite - centre), axis=0)
    return (finite - centre) / np.where(spread > 0, spread, 1.0)


def _below_every_finite(scores: np.ndarray) -> np.ndarray:
    finite = scores[np.isfinite(scores)]
    floor = (finite.min() - 1.0) if finite.size else 0.0
    ceiling = (finite.max() + 1.0) if finite.size else 0.0
    return np.where(np.isposinf(scores), ceiling, np.where(np.isfinite(scores), scores, floor))


def _auc(scores: np.ndarray, members: np.ndarray) -> float:
    from scipy.stats import rankdata

    n1, n0 = int(members.sum()), int((~members).sum())
    if n1 == 0 or n0 == 0:
        return 0.5
    ranks = rankdata(_below_every_finite(scores))
    return float((ranks[members].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def _centred_logit(log_probs: np.ndarray, label: int) -> float:
    """(z_label − mean_c z_c) at the canary (row 0): its own column's weight contrast plus the bias
    contrast, both of which the canary's clipped gradient moves (see `one_class_canary`)."""
    with np.errstate(invalid="ignore"):
        centred = float(log_probs[0, label] - log_probs[0].mean())
    return centred if not math.isnan(centred) else -math.inf


def _centred_logit_gain(log_probs: np.ndarray, label: int) -> float:
    """(z_label − mean_c z_c) at the canary minus the same at the base point.

    Log-probabilities are the logits up to one constant per point, which the centring removes, so
    this is a difference of logits: for a linear model exactly `scale`·R times the canary column's
    weight contrast — the canary's clipped gradient plus the DP noise, not swamped by the canary's
    scale the way a probability or loss would be (they saturate)."""
    with np.errstate(invalid="ignore"):
        centred = log_probs[:, label] - log_probs.mean(axis=1)
        gain = float(centred[0] - centred[1])
    return gain if not math.isnan(gain) else -math.inf


def _fdp_one_run(scores: np.ndarray, coins: np.ndarray, profile, delta: float, confidence: float) -> dict[str, Any]:
    """The one-run f-DP test of the claim's curve over coin-flipped canary slots (reported, not the
    decision of the profile mode): Mahloujifar, Melis, Chaudhuri 2024, arXiv 2410.22235."""
    from audit.statistics.fdp_one_run import fdp_one_run_audit

    try:
        return fdp_one_run_audit(
            _below_every_finite(np.ravel(scores)), np.ravel(coins), profile, delta=delta, confidence=confidence
        )
    except ValueError as exc:
        return {"error": str(exc)}


def _fdp_ceiling(profile, fdp: dict[str, Any], confidence: float) -> dict[str, Any] | None:
    """Could an attack that guesses every evaluation canary right refute the claim's curve in the f-DP
    one-run test (`one_run_power.fdp_perfect_p_value`)? What the console's profile ceiling line reads."""
    from audit.statistics.one_run_power import fdp_perfect_p_value

    m = fdp.get("m_eval")
    if profile is None or not isinstance(m, int) or m < 2:
        return None
    p = fdp_perfect_p_value(profile, m)
    return {"refutable": bool(p <= 1.0 - confidence), "perfect_attack_p_value": p}
