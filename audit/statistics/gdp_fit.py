"""Does a Gaussian trade-off curve describe these scores? The check behind every GDP ε estimate.

The GDP estimate (Nasr et al. 2023, arXiv 2302.07956) reads ε off the Gaussian trade-off curve
G_μ(x) = Φ(Φ⁻¹(1 − x) − μ) (Dong, Roth, Su 2019, arXiv 1905.02383) through one point of the
empirical curve. That is only meaningful when the empirical curve looks Gaussian. On discrete
scores (randomized response: two values) it is not, and the estimate was above the true ε in 200
of 200 repeats (issue 27). Two checks, both reported, either withholds the estimate:

1. Discreteness: fewer than `MIN_DISTINCT` distinct scores, or one value holding more than half of
   them: the empirical curve is a few straight segments, which no G_μ follows.
2. Goodness of fit: μ̂ = √2 Φ⁻¹(AUC) (the μ whose G_μ has the observed AUC), and the statistic
   D = max over thresholds of |FNR̂(t) − G_μ̂(FPR̂(t))| (the largest vertical gap between the
   empirical and the fitted curve). Its sampling error is a parametric bootstrap: B data sets of
   the same sizes drawn from N(0, 1) vs N(μ̂, 1), μ̂ refitted on each, D recomputed. p-value =
   (1 + #{D* ≥ D}) / (B + 1); the fit is rejected when p < `alpha`.

`gaussian_family_figure` is the one rule every Gaussian-family figure passes through where it is
computed — the f-DP one-run GDP-family ε (`fdp_one_run.fdp_one_run_audit`), the GDP estimate
(`attack_evaluation.evaluate_attack`) and the Gaussian normalized-sum and Andrew et al. estimates
(`one_run_audit.one_run_claim_audit`): withheld (None, with the reason) wherever either check
above rejects, so no output (console, results.json, report.html, summary.md, MLflow) can show it.

Pure functions of scores and membership (seeded), no I/O.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

__all__ = ["MIN_DISTINCT", "gaussian_family_figure", "gaussian_tradeoff_fit"]

MIN_DISTINCT = 20
# Bootstrap draws: 200 puts the p-value's standard error near 0.015 at p = 0.05; fewer above 20 000
# scores, where each draw costs a sort of the whole sample.
_DRAWS_SMALL, _DRAWS_LARGE, _LARGE = 200, 50, 20_000


def _sorted_rows(scores: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The membership of each row of `scores` (2-d) in score order, and where a tie group ends.

    One unstable sort per row serves the AUC and the gaps: both read the data only at the end of a
    tie group (a cut between tied scores is no threshold), where the order inside the group does
    not matter, so they equal what a stable sort gives.
    """
    order = np.argsort(scores, axis=1)
    s_sorted = np.sort(scores, axis=1)  # the same values as scores[order], and faster to get
    group_end = np.ones_like(s_sorted, dtype=bool)
    group_end[:, :-1] = s_sorted[:, 1:] > s_sorted[:, :-1]
    return members[order], group_end


def _auc_rows(sorted_members: np.ndarray, group_end: np.ndarray, scores: np.ndarray, members: np.ndarray) -> np.ndarray:
    """AUC (ties counted half) of each row, the Mann-Whitney U from the members' rank sum.

    A row without ties (every bootstrap row, almost surely) sums the 1-based positions of its
    members; a row with ties takes `scipy.stats.rankdata`'s average ranks. The rank sums are
    integers or halves below 2⁵³, so both are exact and equal to `rankdata` on every row.
    """
    n1 = int(members.sum())
    n0 = members.size - n1
    positions = np.arange(1, sorted_members.shape[1] + 1, dtype=np.int64)
    rank_sums = (sorted_members @ positions).astype(float)
    tied = ~group_end.all(axis=1)
    if tied.any():
        rank_sums[tied] = stats.rankdata(scores[tied], axis=1)[:, members].sum(axis=1)
    return (rank_sums - n1 * (n1 + 1) / 2) / (n1 * n0)


def _mu_from_auc(auc: np.ndarray) -> np.ndarray:
    return math.sqrt(2.0) * special.ndtri(np.clip(auc, 1e-12, 1 - 1e-12))


def _max_gaps(sorted_members: np.ndarray, group_end: np.ndarray, members: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """D per row: the largest |FNR̂ − G_μ(FPR̂)| over the rule "member iff score ≥ t", t every score."""
    n1 = int(members.sum())
    n0 = members.size - n1
    # Members and non-members strictly below each cut (a cut between tied scores is no threshold).
    below_members = np.cumsum(sorted_members, axis=1)
    below_nonmembers = np.arange(1, sorted_members.shape[1] + 1) - below_members
    fnr = below_members / n1
    # Φ⁻¹(1 − FPR̂) takes n0 + 1 values (FPR̂ = 1 − k/n0): computed once each, then looked up.
    k = np.arange(n0 + 1)
    quantile = special.ndtri(np.clip(1.0 - (1.0 - k / n0), 0.0, 1.0))
    fitted = special.ndtr(quantile[below_nonmembers] - mu[:, None])
    gaps = np.where(group_end, np.abs(fnr - fitted), 0.0)
    return gaps.max(axis=1)


def gaussian_tradeoff_fit(scores, members, *, alpha: float = 0.05, seed: int = 0) -> dict:
    """Whether a μ-GDP trade-off curve fits the scores; `withheld` (with a `reason`) when it does not.

    Returns {"withheld", "reason", "distinct_scores", "largest_tie_fraction", "mu_fit",
    "max_vertical_gap", "gap_95th_if_gaussian", "p_value", "draws", "method"}; the fit figures are
    None when the scores are discrete (no fit attempted).
    """
    s = np.asarray(scores, dtype=float)
    m = np.asarray(members, dtype=bool)
    s = np.where(np.isnan(s), -np.inf, s)
    values, counts = np.unique(s, return_counts=True)
    tie = float(counts.max() / s.size)
    out = {
        "distinct_scores": int(values.size),
        "largest_tie_fraction": tie,
        "mu_fit": None,
        "max_vertical_gap": None,
        "gap_95th_if_gaussian": None,
        "p_value": None,
        "draws": 0,
        "method": "largest vertical gap between the empirical and the fitted Gaussian trade-off curve, "
        "parametric bootstrap (Dong, Roth, Su 2019, arXiv 1905.02383)",
    }
    if values.size < MIN_DISTINCT or tie > 0.5:
        out.update(
            withheld=True,
            reason=(
                f"scores are discrete ({values.size} distinct values, the most common holding {tie:.0%}): "
                "a Gaussian trade-off curve cannot describe them, so no GDP estimate is given"
            ),
        )
        return out
    finite = np.isfinite(s)
    s = np.where(
        finite, s, np.where(s > 0, values[np.isfinite(values)].max() + 1, values[np.isfinite(values)].min() - 1)
    )
    sorted_members, group_end = _sorted_rows(s[None, :], m)
    mu = _mu_from_auc(_auc_rows(sorted_members, group_end, s[None, :], m))
    observed = float(_max_gaps(sorted_members, group_end, m, mu)[0])
    draws = _DRAWS_SMALL if s.size <= _LARGE else _DRAWS_LARGE
    rng = np.random.default_rng(seed)
    simulated = rng.standard_normal((draws, s.size)) + float(mu[0]) * m[None, :]
    sorted_members, group_end = _sorted_rows(simulated, m)
    null_mu = _mu_from_auc(_auc_rows(sorted_members, group_end, simulated, m))
    null = _max_gaps(sorted_members, group_end, m, null_mu)
    p = float((1 + np.sum(null >= observed)) / (draws + 1))
    out.update(
        mu_fit=float(mu[0]),
        max_vertical_gap=observed,
        gap_95th_if_gaussian=float(np.quantile(null, 0.95)),
        p_value=p,
        draws=draws,
    )
    if p < alpha:
        out.update(
            withheld=True,
            reason=(
                f"the Gaussian trade-off curve does not fit (largest vertical gap {observed:.3f}, above the "
                f"{out['gap_95th_if_gaussian']:.3f} a Gaussian curve gives 95 % of the time; p = {p:.3f}): "
                "no GDP estimate is given"
            ),
        )
    else:
        out.update(withheld=False, reason=None)
    return out


def gaussian_family_figure(value, fit: dict):
    """A Gaussian-family ε as it may be shown: `value`, or None when `fit` (`gaussian_tradeoff_fit`
    of the same scores) rejected a Gaussian trade-off curve — the discreteness test or the
    goodness-of-fit test above. Every such figure assumes the mechanism's trade-off curve is
    G_μ (Dong, Roth, Su 2019, arXiv 1905.02383); on scores that visibly contradict that
    assumption (randomized response: two values) it overstates ε (issue 27), so it is withheld."""
    return None if fit.get("withheld") else value
