"""The two-sample threshold audit: two samples of a statistic in, a held-out (ε, δ) lower bound out.

A mechanism is (ε, δ)-DP only if every test telling M(D) from M(D') has FPR + e^ε·FNR ≥ 1 − δ
(and the mirror image). Given i.i.d. draws of a statistic under both datasets, a threshold rule is
chosen on one part of the draws and its error counts on the rest give Clopper-Pearson bounds on
both error rates, hence an ε lower bound (Jagielski, Ullman, Oprea 2020, arXiv 2006.07709; Nasr
et al. 2021, arXiv 2101.04535). Pure functions; the mechanism and canary audits share them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from audit.errors import AuditInputError
from audit.statistics.audit_ceilings import ceiling_threshold_audit
from audit.statistics.binomial import beta_ppf
from audit.statistics.epsilon_bounds import epsilon_lower_bound_from_counts

__all__ = ["HIGHER_MEANS_POSITIVE", "LOWER_MEANS_POSITIVE", "threshold_audit", "validate_confidence"]

HIGHER_MEANS_POSITIVE = "positive if score >= threshold"
LOWER_MEANS_POSITIVE = "positive if score < threshold"


def validate_confidence(confidence) -> float:
    try:
        c = float(confidence)
    except (TypeError, ValueError):
        raise AuditInputError("confidence", f"expected a number in (0, 1), got {confidence!r}") from None
    if not (0 < c < 1):
        raise AuditInputError("confidence", f"must be in (0, 1), got {confidence!r}")
    return c


def _cp_upper(k: np.ndarray, n: int, alpha: float) -> np.ndarray:
    # One-sided Clopper-Pearson upper bound, vectorised (same formula as
    # audit.statistics.epsilon_bounds.clopper_pearson_upper): Beta(k + 1, n − k) quantile, 1 when k = n.
    k = np.asarray(k)
    return np.where(k < n, beta_ppf(1.0 - alpha, k + 1, np.maximum(n - k, 1)), 1.0)


def _unfloored_epsilon(fpr_u: np.ndarray, fnr_u: np.ndarray, delta: float) -> np.ndarray:
    # max{ln((1−δ−FNR̄)/FPR̄), ln((1−δ−FPR̄)/FNR̄)}, without the floor at 0 so that argmax still
    # ranks rules when none is significant; a non-positive numerator counts as −inf.
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(1 - delta - fnr_u > 0, np.log(np.maximum(1 - delta - fnr_u, 1e-300)) - np.log(fpr_u), -np.inf)
        b = np.where(1 - delta - fpr_u > 0, np.log(np.maximum(1 - delta - fpr_u, 1e-300)) - np.log(fnr_u), -np.inf)
    return np.maximum(a, b)


def _between(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """A point strictly between consecutive sorted distinct values, ±inf handled."""
    with np.errstate(invalid="ignore"):
        mid = lo / 2 + hi / 2
    lo_inf, hi_inf = np.isneginf(lo), np.isposinf(hi)
    mid = np.where(lo_inf & ~hi_inf, hi - np.maximum(1.0, np.abs(hi)), mid)
    mid = np.where(hi_inf & ~lo_inf, lo + np.maximum(1.0, np.abs(lo)), mid)
    return np.where(lo_inf & hi_inf, 0.0, mid)


def _error_counts(threshold, direction: str, positive: np.ndarray, negative: np.ndarray):
    """(false positives among negatives, false negatives among positives) of one rule."""
    if direction == HIGHER_MEANS_POSITIVE:
        return int(np.sum(negative >= threshold)), int(np.sum(positive < threshold))
    return int(np.sum(negative < threshold)), int(np.sum(positive >= threshold))


def _choose_rule(positive: np.ndarray, negative: np.ndarray, delta: float, alpha_per_rate: float):
    """The (threshold, direction) maximising the Clopper-Pearson ε on these (selection) scores.

    Thresholds are midpoints between consecutive distinct pooled scores, so a rule never sits on
    a score and does not depend on how ties are broken.
    """
    values = np.unique(np.concatenate([positive, negative]))
    if values.size < 2:
        return (float(values[0]) if values.size else 0.0), HIGHER_MEANS_POSITIVE
    thresholds = _between(values[:-1], values[1:])
    pos_sorted, neg_sorted = np.sort(positive), np.sort(negative)
    n_pos, n_neg = pos_sorted.size, neg_sorted.size
    fn_high = np.searchsorted(pos_sorted, thresholds, side="left")  # positives below t
    fp_high = n_neg - np.searchsorted(neg_sorted, thresholds, side="left")  # negatives ≥ t
    best = None
    for direction, fp, fn in (
        (HIGHER_MEANS_POSITIVE, fp_high, fn_high),
        (LOWER_MEANS_POSITIVE, n_neg - fp_high, n_pos - fn_high),
    ):
        value = _unfloored_epsilon(_cp_upper(fp, n_neg, alpha_per_rate), _cp_upper(fn, n_pos, alpha_per_rate), delta)
        i = int(np.argmax(value))
        if best is None or value[i] > best[0]:
            best = (value[i], float(thresholds[i]), direction)
    if best is None:  # the loop above runs for both directions: never reached
        raise ValueError("no threshold rule was evaluated")
    return best[1], best[2]


def _as_scores(name: str, values) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise AuditInputError(name, "expected numbers") from None
    if np.isnan(arr).any():
        raise AuditInputError(name, f"{int(np.isnan(arr).sum())} score(s) are NaN")
    return arr


def threshold_audit(
    scores_positive,
    scores_negative,
    *,
    delta: float,
    confidence: float = 0.95,
    selection_fraction: float = 0.5,
) -> dict[str, Any]:
    """Held-out threshold test between two samples of a statistic → (ε, δ) lower bound.

    `scores_positive` are i.i.d. draws of the statistic under D' (canary inserted / dataset_b),
    `scores_negative` under D. The first ⌊`selection_fraction`·n⌋ of each side (they are i.i.d.,
    so a fixed split is a random one) choose the threshold t and the direction (positive iff
    score ≥ t, or iff score < t) maximising the Clopper-Pearson ε on them; the remaining draws
    give the error counts of that fixed rule and `epsilon_lower_bound_from_counts` turns them into
    ε_LB = max{ln((1 − δ − FNR̄)/FPR̄), ln((1 − δ − FPR̄)/FNR̄)}, floored at 0, each one-sided
    Clopper-Pearson bound at level (1 − confidence)/2 (Jagielski, Ullman, Oprea 2020, arXiv
    2006.07709; Nasr et al. 2021, arXiv 2101.04535). ±inf scores are allowed; NaN is refused.
    "ceiling" is the bound a perfect rule would get on the same evaluation counts.
    """
    pos = _as_scores("scores_positive", scores_positive)
    neg = _as_scores("scores_negative", scores_negative)
    conf = validate_confidence(confidence)
    if not (0 < selection_fraction < 1):
        raise AuditInputError("selection_fraction", f"must be in (0, 1), got {selection_fraction!r}")
    for name, arr in (("scores_positive", pos), ("scores_negative", neg)):
        if arr.size < 2:
            raise AuditInputError(
                name, f"need at least 2 draws (one to choose the threshold, one to test it), got {arr.size}"
            )
    n_sel_pos = min(max(int(selection_fraction * pos.size), 1), pos.size - 1)
    n_sel_neg = min(max(int(selection_fraction * neg.size), 1), neg.size - 1)
    alpha_per_rate = (1.0 - conf) / 2
    threshold, direction = _choose_rule(pos[:n_sel_pos], neg[:n_sel_neg], delta, alpha_per_rate)
    sel_fp, sel_fn = _error_counts(threshold, direction, pos[:n_sel_pos], neg[:n_sel_neg])
    ev_pos, ev_neg = pos[n_sel_pos:], neg[n_sel_neg:]
    fp, fn = _error_counts(threshold, direction, ev_pos, ev_neg)
    bound = epsilon_lower_bound_from_counts(fp, ev_neg.size, fn, ev_pos.size, delta, conf)
    return {
        "threshold": threshold,
        "direction": direction,
        "selection": {
            "false_positives": sel_fp,
            "n_negative": n_sel_neg,
            "false_negatives": sel_fn,
            "n_positive": n_sel_pos,
        },
        "evaluation": {
            "false_positives": fp,
            "n_negative": int(ev_neg.size),
            "false_negatives": fn,
            "n_positive": int(ev_pos.size),
        },
        "fpr_upper": float(_cp_upper(fp, ev_neg.size, alpha_per_rate)),
        "fnr_upper": float(_cp_upper(fn, ev_pos.size, alpha_per_rate)),
        "epsilon_lower_bound": float(bound),
        # The best a perfect attack could do with these evaluation counts (no error at all).
        "ceiling": ceiling_threshold_audit(ev_pos.size, ev_neg.size, delta, conf),
        "confidence": conf,
        "delta": float(delta),
        "method": "clopper_pearson, threshold chosen on a held-out part",
    }
