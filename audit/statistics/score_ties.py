"""Tied and saturated attack scores: exact TPR at a fixed FPR, and a note when ties flatten a metric.

TPR at FPR ≤ x is reported by this package under the CONSERVATIVE convention: the highest TPR of a
deterministic threshold whose FPR does not exceed x (`attack_metrics.tpr_at_fpr`). When many scores
tie, the achievable points jump over x — 1431 of 2400 RMIA scores tied at one value made TPR@10 %
equal TPR@1 % (issue 24). The exact Neyman-Pearson answer AT x uses a randomized threshold: take
every score above the tie group that straddles x and each tied score with the probability γ that
brings the FPR to exactly x (Neyman & Pearson 1933; the convex hull of the ROC points between
adjacent thresholds, Fawcett 2006, "An introduction to ROC analysis", Pattern Recogn. Lett. 27:861).
Both are reported; where they differ because a tie group spans the level, the attack carries a note.

Saturated scores (logits at ±7.7e4, infinities) are scores at a repeated extreme, non-finite, or
absurdly far from the bulk: they are ties in disguise and flatten the same metrics.

Pure functions, no I/O.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

from audit.statistics.attack_metrics import validate_scores_and_members

__all__ = ["MOSTLY_TIED", "MOSTLY_SATURATED", "score_ties", "tpr_at_fpr_randomized", "tie_notes"]

#: A note is written when one value holds at least this share of the scores ...
MOSTLY_TIED = 0.25
#: ... or at least this share is saturated.
MOSTLY_SATURATED = 0.05
# "Absurdly far": this many interquartile ranges from the median (a logit of 7.7e4 against a bulk
# spread of a few units); far beyond any tail a well-behaved score distribution shows at these sizes.
_FAR_IQRS = 100.0


class ScoreTies(TypedDict):
    """`score_ties`'s figures (JSON-ready: a non-finite tie value is its string, e.g. "inf")."""

    largest_tie_fraction: float
    largest_tie_value: float | str | None
    distinct_values: int
    saturated_fraction: float


def score_ties(scores) -> ScoreTies:
    """{"largest_tie_fraction", "largest_tie_value", "distinct_values", "saturated_fraction"} of a score vector.

    Saturated: non-finite, or equal to the minimum or maximum when that extreme is shared by ≥ 2
    scores, or more than 100 interquartile ranges from the median.
    """
    s = np.asarray(scores, dtype=float).ravel()
    if s.size == 0:
        return {"largest_tie_fraction": 0.0, "largest_tie_value": None, "distinct_values": 0, "saturated_fraction": 0.0}
    finite = np.isfinite(s)
    values, counts = np.unique(np.where(np.isnan(s), np.inf, s), return_counts=True)
    top = int(np.argmax(counts))
    saturated = ~finite
    if finite.any():
        f = s[finite]
        lo, hi = f.min(), f.max()
        saturated |= finite & (s == lo) & (np.sum(f == lo) >= 2)
        saturated |= finite & (s == hi) & (np.sum(f == hi) >= 2)
        q1, median, q3 = np.quantile(f, [0.25, 0.5, 0.75])
        if q3 > q1:
            saturated |= finite & (np.abs(s - median) > _FAR_IQRS * (q3 - q1))
    value = float(values[top])
    return {
        "largest_tie_fraction": float(counts[top] / s.size),
        "largest_tie_value": value if np.isfinite(value) else str(value),
        "distinct_values": int(values.size),
        "saturated_fraction": float(saturated.mean()),
    }


def _roc_steps(s: np.ndarray, m: np.ndarray):
    """FPR and TPR after taking every score ≥ each distinct value, from the highest down (with (0, 0))."""
    n1, n0 = int(m.sum()), int((~m).sum())
    order = np.argsort(-s, kind="stable")
    s_sorted, m_sorted = s[order], m[order]
    starts = np.r_[0, np.flatnonzero(s_sorted[1:] != s_sorted[:-1]) + 1]
    members_at = np.add.reduceat(m_sorted.astype(int), starts)
    nonmembers_at = np.diff(np.r_[starts, s.size]) - members_at
    tpr = np.r_[0.0, np.cumsum(members_at) / n1]
    fpr = np.r_[0.0, np.cumsum(nonmembers_at) / n0]
    return fpr, tpr, n0


def tpr_at_fpr_randomized(scores, members, fpr_levels=(0.001, 0.01, 0.1)) -> dict[float, float]:
    """`{level: TPR}` of the most powerful (randomized) threshold test whose FPR is EXACTLY `level`.

    Scores above the tie group that straddles the level are guessed "member"; each score of that
    group with probability γ = (level − FPR_above) / FPR_group, so TPR = TPR_above + γ · TPR_group.
    Without ties this is linear interpolation between adjacent ROC points; with a tie it is what the
    conservative `tpr_at_fpr` cannot reach without crossing the level. Neyman & Pearson 1933.
    """
    s, m = validate_scores_and_members(scores, members)
    s = np.where(np.isnan(s), -np.inf, s)
    fpr, tpr, _ = _roc_steps(s, m)
    out = {}
    for level in fpr_levels:
        x = float(level)
        i = int(np.searchsorted(fpr, x, side="right")) - 1  # last point with FPR ≤ x
        if i >= fpr.size - 1 or fpr[i] == x:
            out[x] = float(tpr[i])
            continue
        gamma = (x - fpr[i]) / (fpr[i + 1] - fpr[i])
        out[x] = float(tpr[i] + gamma * (tpr[i + 1] - tpr[i]))
    return out


def _flattened_levels(s: np.ndarray, m: np.ndarray, levels) -> list[float]:
    """Levels whose achievable points jump across them by a tie group of ≥ 2 non-members spanning ≥ the level."""
    fpr, _, n0 = _roc_steps(s, m)
    flat = []
    for level in levels:
        i = int(np.searchsorted(fpr, level, side="right")) - 1
        if i < fpr.size - 1 and fpr[i] < level:
            jump = fpr[i + 1] - fpr[i]
            if jump * n0 >= 2 and jump >= level:
                flat.append(float(level))
    return flat


def tie_notes(
    attack_name: str, scores, members, tpr_conservative: dict, tpr_randomized: dict, where: str | None = None
) -> list[str]:
    """Plain-words notes for an attack whose scores are mostly tied or saturated, or whose TPR at a
    reported FPR is flattened by a tie group."""
    s, m = validate_scores_and_members(scores, members)
    s = np.where(np.isnan(s), -np.inf, s)
    ties = score_ties(s)
    label = f"{where}, {attack_name}" if where else attack_name
    prefix = f"{label}: " if label else ""  # no label: the caller names target and attack itself
    notes = []
    if ties["largest_tie_fraction"] >= MOSTLY_TIED:
        count = int(round(ties["largest_tie_fraction"] * s.size))
        notes.append(
            f"{prefix}{count} of {s.size} scores tie at one value ({float(ties['largest_tie_value'] or 0.0):.4g}); "
            "metrics read off thresholds cannot separate them"
        )
    if ties["saturated_fraction"] >= MOSTLY_SATURATED:
        notes.append(
            f"{prefix}{ties['saturated_fraction']:.0%} of scores are saturated (non-finite, at a repeated "
            "extreme, or > 100 IQR from the median): the attack's output has run out of precision there"
        )
    for level in _flattened_levels(s, m, sorted(float(k) for k in tpr_randomized)):
        cons = next((v for k, v in tpr_conservative.items() if float(k) == level), None)
        rand = tpr_randomized.get(level)
        if cons is None or rand is None:
            continue
        notes.append(
            f"{prefix}a tie group spans FPR {level:g}; TPR there is {cons:.4f} with a deterministic "
            f"threshold (FPR ≤ {level:g}, reported) and {rand:.4f} with a randomized one (FPR = {level:g} exactly)"
        )
    return notes
