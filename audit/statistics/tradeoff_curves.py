"""Trade-off curves (f-DP) of a privacy claim, and the test "does this attack beat the claim's curve".

A mechanism is f-DP (Dong, Roth, Su 2019, "Gaussian Differential Privacy", arXiv 1905.02383) when
every test of "record in" against "record out" with false-positive rate α has false-negative
rate ≥ f(α). A claim (ε, δ) is ONE point of a mechanism's privacy profile; DP-SGD's accountant
states the whole profile δ(ε') for every ε' (the Poisson-subsampled Gaussian composed T times),
and (Dong, Roth, Su 2019, Proposition 2.12) the mechanism is then f-DP with

    f(α) = sup_{ε'} max(0, 1 − δ(ε') − e^{ε'} α, e^{−ε'} (1 − δ(ε') − α)).

Testing an attack against this whole curve at moderate FPR is what gives black-box audits power:
a single (ε, δ = 1e-5) point can only be refuted by likelihood ratios above e^ε, far in the tail.

Conservative by construction: δ(ε') comes from `dp_accounting`'s PLD with the *pessimistic*
discretisation (an upper bound on the true δ(ε')), and the supremum runs over a finite grid of ε';
both make `tradeoff_from_profile` a LOWER envelope of the claim's true curve, so a point found below
it is below the true curve too (a refutation is sound; at worst some refutable points are missed).

Pure functions, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from scipy import special, stats

from audit.statistics.binomial import binom_cdf_scalar
from audit.statistics.epsilon_bounds import clopper_pearson_upper
from audit.statistics.pld_deltas import pld_deltas

__all__ = [
    "PrivacyProfile",
    "dpsgd_privacy_profile",
    "gdp_tradeoff",
    "pair_privacy_profile",
    "best_profile_rule",
    "claim_profile",
    "curve_slope",
    "ProfileRule",
    "profile_ceiling",
    "profile_test",
    "refute_point",
    "tangent_test_ceiling",
    "tangent_test_p_value",
    "tradeoff_from_profile",
]

# Discretisation of the privacy-loss values (dp_accounting's value_discretization_interval).
PROFILE_DISCRETIZATION = 1e-3
# ε' grid of a DP-SGD profile: 0 .. EPSILON_GRID_MAX in EPSILON_GRID_POINTS steps (δ(ε') below
# 1e-12 beyond the last useful point adds nothing to the curve).
EPSILON_GRID_MAX = 30.0
EPSILON_GRID_POINTS = 1201


@dataclass(frozen=True)
class PrivacyProfile:
    """Pairs (ε'_i, δ_i): the mechanism is (ε'_i, δ_i)-DP for every i (a claim's privacy profile)."""

    epsilons: tuple[float, ...]
    deltas: tuple[float, ...]
    source: str

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self.epsilons, dtype=float), np.asarray(self.deltas, dtype=float)


@lru_cache(maxsize=64)
def dpsgd_privacy_profile(
    noise_multiplier: float, sample_rate: float, steps: int, discretization: float = PROFILE_DISCRETIZATION
) -> PrivacyProfile:
    """The privacy profile of T = `steps` compositions of the Poisson-subsampled (rate q) Gaussian
    mechanism with noise multiplier σ (DP-SGD as its accountant sees it), from `dp_accounting`'s
    privacy-loss distribution (Koskela et al. 2020; Doroshenko et al. 2022, arXiv 2207.04380),
    pessimistic estimate: each δ(ε') is an upper bound on the true one (for both add and remove
    neighbours), so the curve built from it is a lower envelope of the true trade-off curve.
    """
    from dp_accounting.pld import privacy_loss_distribution as pld

    sigma, q, t = float(noise_multiplier), float(sample_rate), int(steps)
    if not (math.isfinite(sigma) and sigma > 0) or not (0 < q <= 1) or t < 1:
        raise ValueError(f"need σ > 0, q in (0, 1], T ≥ 1; got σ={noise_multiplier!r}, q={sample_rate!r}, T={steps!r}")
    distribution = pld.from_gaussian_mechanism(
        sigma,
        sampling_prob=q,
        pessimistic_estimate=True,
        value_discretization_interval=float(discretization),
        use_connect_dots=True,
    ).self_compose(t)
    grid = np.linspace(0.0, EPSILON_GRID_MAX, EPSILON_GRID_POINTS)
    # The library's get_delta_for_epsilon(grid), bit for bit, without its Python loop (audit.statistics.pld_deltas).
    deltas = np.clip(pld_deltas(distribution, grid), 0.0, 1.0)
    return PrivacyProfile(
        tuple(float(v) for v in grid),
        tuple(float(v) for v in deltas),
        f"PLD (pessimistic): Poisson-subsampled Gaussian σ={sigma:g}, q={q:g}, T={t}",
    )


def pair_privacy_profile(epsilon: float, delta: float) -> PrivacyProfile:
    """The profile of a bare (ε, δ) claim: the one pair (its curve is f_{ε,δ}, Dong, Roth, Su 2019)."""
    eps, d = float(epsilon), float(delta)
    if not (math.isfinite(eps) and eps >= 0) or not (0 <= d < 1):
        raise ValueError(f"need ε ≥ 0 finite and δ in [0, 1); got ε={epsilon!r}, δ={delta!r}")
    return PrivacyProfile((eps,), (d,), f"({eps:g}, {d:g})-DP")


def claim_profile(
    epsilon: float | None, delta: float, dpsgd: tuple[float, float, int] | None = None
) -> PrivacyProfile | None:
    """The privacy profile a claim states: DP-SGD's whole profile when the accountant's (σ, q, T) is
    known (`dpsgd`), else the bare (`epsilon`, `delta`) pair's, else None. A caller whose user
    overrode ε passes `dpsgd=None`, so that the stated pair, not the accountant, is tested."""
    if dpsgd is not None:
        sigma, q, steps = dpsgd
        return dpsgd_privacy_profile(float(sigma), float(q), int(steps))
    if epsilon is not None:
        return pair_privacy_profile(epsilon, delta)
    return None


@lru_cache(maxsize=64)
def _profile_lines(profile: PrivacyProfile) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(1 − δ, e^ε, e^{−ε}) per pair: the lines of the curve, computed once per profile."""
    eps, deltas = profile.arrays()
    return 1.0 - deltas, np.exp(eps), np.exp(-eps)


# Rows of (α × pairs) terms formed at once: the temporaries stay a few MiB (a 100 001-point α grid
# against 1201 pairs would otherwise allocate ~1 GB per temporary).
_TERM_CHUNK_VALUES = 1 << 18


def _curve_terms(profile: PrivacyProfile, alpha: np.ndarray) -> np.ndarray:
    """(len(alpha), pairs) values of max(1 − δ − e^ε α, e^{−ε}(1 − δ − α)) per profile pair."""
    one_minus_delta, scale_up, scale_down = _profile_lines(profile)
    a = np.asarray(alpha, dtype=float)[..., None]
    first = scale_up * a
    np.subtract(one_minus_delta, first, out=first)  # 1 − δ − e^ε α
    second = one_minus_delta - a
    second *= scale_down  # e^{−ε}(1 − δ − α)
    return np.maximum(first, second, out=first)


def tradeoff_from_profile(profile: PrivacyProfile, alpha) -> np.ndarray:
    """f(α) = sup over the profile's pairs of max(0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α)).

    Dong, Roth, Su 2019 (arXiv 1905.02383), Proposition 2.12: a mechanism that is (ε, δ)-DP for
    every pair is f-DP with this f. A lower envelope of the mechanism's true curve (see the module
    docstring): the supremum runs over finitely many pairs.
    """
    a = np.atleast_1d(np.asarray(alpha, dtype=float))
    rows = max(1, _TERM_CHUNK_VALUES // max(1, len(profile.epsilons)))
    if a.ndim == 1 and a.size > rows:
        best = np.concatenate([_curve_terms(profile, a[i : i + rows]).max(axis=-1) for i in range(0, a.size, rows)])
    else:
        best = _curve_terms(profile, a).max(axis=-1)
    out = np.clip(best, 0.0, 1.0)
    return out if np.ndim(alpha) else out.reshape(())


def gdp_tradeoff(mu: float, alpha) -> np.ndarray:
    """G_μ(α) = Φ(Φ⁻¹(1 − α) − μ): the trade-off curve of μ-GDP (Dong, Roth, Su 2019, Def. 2.7),
    i.e. of telling N(0, 1) from N(μ, 1)."""
    a = np.asarray(alpha, dtype=float)
    return stats.norm.cdf(stats.norm.isf(a) - float(mu))


def refute_point(profile: PrivacyProfile, fpr_upper: float, fnr_upper: float) -> dict | None:
    """Is the point (FPR, FNR) = (`fpr_upper`, `fnr_upper`) strictly below the claim's curve?

    If an attack's error rates are at most these (e.g. Clopper-Pearson upper bounds that hold
    jointly with probability ≥ 1 − α), and FNR̄ < f_claim(FPR̄), then the mechanism is NOT f_claim-DP
    (f is non-increasing, so its true FNR ≥ f(true FPR) ≥ f(FPR̄) > FNR̄ would contradict the
    bounds). Returns None when the point is on or above the curve; else the profile pair
    (ε', δ(ε')) the point violates most (largest gap), with `margin` = f_claim(FPR̄) − FNR̄.
    """
    fpr, fnr = float(fpr_upper), float(fnr_upper)
    if not (0 <= fpr <= 1 and 0 <= fnr <= 1):
        raise ValueError(f"error rates must lie in [0, 1], got FPR {fpr_upper!r}, FNR {fnr_upper!r}")
    terms = _curve_terms(profile, np.array([fpr]))[0]
    best = int(np.argmax(terms))
    margin = float(terms[best]) - fnr
    if margin <= 0:
        return None
    eps, deltas = profile.arrays()
    return {
        "epsilon": float(eps[best]),
        "delta": float(deltas[best]),
        "margin": margin,
        "fpr_upper": fpr,
        "fnr_upper": fnr,
        "claimed_fnr_floor": float(terms[best]),
    }


# --------------------------------------------------------------------------------------------------
# The profile test: one threshold rule and one slope, chosen on selection data, judged on
# independent trials by one exact test of the weighted error FNR + s·FPR
# --------------------------------------------------------------------------------------------------

HIGH, LOW = "member if score >= threshold", "member if score < threshold"


class ProfileRule(NamedTuple):
    """A rule of the profile test: "member" by `threshold` in `direction`, and the weight `slope`
    of the false-positive rate in the test statistic FNR + slope·FPR (the claim's curve's slope
    where the rule is expected to lie, so the statistic measures the distance below the curve)."""

    threshold: float
    direction: str
    slope: float


def _errors(rule, scores_in: np.ndarray, scores_out: np.ndarray) -> tuple[int, int]:
    threshold, direction = rule[0], rule[1]
    if direction == HIGH:
        return int(np.sum(scores_out >= threshold)), int(np.sum(scores_in < threshold))
    return int(np.sum(scores_out < threshold)), int(np.sum(scores_in >= threshold))


def curve_slope(profile: PrivacyProfile, alpha) -> np.ndarray:
    """−f'(α) of the claim's curve (`tradeoff_from_profile`): e^{ε'} or e^{−ε'} of the profile pair
    whose line attains f at α (0 where f(α) = 0). Vectorised over `alpha`."""
    a = np.atleast_1d(np.asarray(alpha, dtype=float))
    terms = _curve_terms(profile, a)
    best = np.argmax(terms, axis=-1)
    eps, deltas = profile.arrays()
    e = eps[best]
    first = 1.0 - deltas[best] - np.exp(e) * a >= np.exp(-e) * (1.0 - deltas[best] - a)
    slope = np.where(first, np.exp(e), np.exp(-e))
    out = np.where(np.take_along_axis(terms, best[:, None], axis=-1)[:, 0] > 0, slope, 0.0)
    return out if np.ndim(alpha) else out.reshape(())


def _binomial_cdf_range(lo: int, hi: int, n: int, p: float) -> np.ndarray:
    """P(Bin(n, p) ≤ k) for k = lo .. hi (0 ≤ lo ≤ hi ≤ n): one scipy cdf at lo (Boost's, called
    directly: `audit.statistics.binomial`), then the pmf (log-gamma form, vectorised) summed upward
    — thousands of values for the price of one."""
    if p <= 0.0:
        return np.ones(hi - lo + 1)
    if p >= 1.0:
        return (np.arange(lo, hi + 1) >= n).astype(float)
    return np.minimum(
        1.0,
        binom_cdf_scalar(lo, n, p) + np.concatenate([[0.0], np.cumsum(_binomial_pmf(np.arange(lo + 1, hi + 1), n, p))]),
    )


def _binomial_pmf(k: np.ndarray, n: int, p: float) -> np.ndarray:
    """Bin(n, p) pmf at integer k in [0, n], in log-gamma form: scipy's pmf spent ~0.16 ms a call on
    argument checks (6555 calls, 1.06 s, of a 2.1 s p-value at n = 24 000, under cProfile)."""
    if p <= 0.0 or p >= 1.0:
        return (k == (0 if p <= 0.0 else n)).astype(float)
    log_factorial = _log_factorials(n)  # ln j! = gammaln(j + 1), the same values looked up
    return np.exp(
        log_factorial[n] - log_factorial[k] - log_factorial[n - k] + k * math.log(p) + (n - k) * math.log1p(-p)
    )


@lru_cache(maxsize=16)
def _log_factorials(n: int) -> np.ndarray:
    """ln j! for j = 0 .. n (`special.gammaln(j + 1)`), once per n: the p-value's refinement asks for
    the same n's pmf hundreds of times."""
    return special.gammaln(np.arange(n + 1) + 1)


@lru_cache(maxsize=512)
def _false_positive_pmf(n_out: int, p_fpr: float) -> tuple[np.ndarray, np.ndarray]:
    """(x, Bin(n_out, p_fpr) pmf at x) over FP' within 12 standard deviations of its mean: the same
    arrays for the same (n_out, p_fpr), which the p-value's cells share (a cell's two corners, a halved
    cell's left half, the 33 first edges in every call at one n_out): computed once. Read-only."""
    spread = 12.0 * math.sqrt(n_out * p_fpr * (1.0 - p_fpr)) + 2.0
    x = np.arange(max(0, math.floor(n_out * p_fpr - spread)), min(n_out, math.ceil(n_out * p_fpr + spread)) + 1)
    pmf = _binomial_pmf(x, n_out, p_fpr)
    x.flags.writeable = pmf.flags.writeable = False
    return x, pmf


def _prob_weighted_at_most(
    fn: int,
    fp: int,
    n_in: int,
    n_out: int,
    slope: float,
    p_fpr: float,
    p_fnr: float,
) -> float:
    """Upper bound on P(FN'/n_in + slope·FP'/n_out ≤ fn/n_in + slope·fp/n_out) for FP' ~ Bin(n_out,
    p_fpr), FN' ~ Bin(n_in, p_fnr) independent: the exact sum over FP' within 12 standard deviations
    of its mean, the omitted mass counted in full (so leaving it out can only raise the bound)."""
    x, pmf = _false_positive_pmf(n_out, p_fpr)
    # Largest FN' with the statistic ≤ the observed one; integer-exact at x = fp (the observed point counts).
    k = np.minimum(fn + np.floor(n_in * slope * (fp - x) / n_out + 1e-9), n_in).astype(np.int64)
    cdf = np.zeros(k.size)
    inside = k >= 0
    if inside.any():
        lo, hi = int(k[inside].min()), int(k[inside].max())
        cdf[inside] = _binomial_cdf_range(lo, hi, n_in, p_fnr)[k[inside] - lo]
    return float(min(1.0, np.sum(pmf * cdf) + max(0.0, 1.0 - float(pmf.sum()))))


# Smallest p-value reported: the sums are exact only to double precision, so below this a
# p-value would claim more than the arithmetic can show.
P_VALUE_FLOOR = 1e-16

# Cells refined at once: beyond this the p-value is flat over a wide range of FPRs and the bound
# is returned as it stands (valid, at most a little conservative).
MAX_OPEN_CELLS = 512


def tangent_test_p_value(
    false_negatives: int,
    n_with: int,
    false_positives: int,
    n_without: int,
    slope: float,
    profile: PrivacyProfile,
    alpha: float | None = None,
    tolerance: float = 0.01,
) -> float:
    """p-value of "the mechanism is f_claim-DP" from one rule's error counts on independent trials,
    by the weighted error W = FNR + s·FPR (s = `slope` > 0, fixed before the counts were seen).

    Null: the rule's true rates (a, b) satisfy b ≥ f_claim(a) (every test of an f_claim-DP mechanism
    does; Dong, Roth, Su 2019, arXiv 1905.02383). The p-value is the supremum over that set of
    P(W' ≤ W_observed) for FP' ~ Bin(n_without, a), FN' ~ Bin(n_with, b) — an exact unconditional
    test (the supremum over the nuisance parameter, as in Berger & Boos 1994, JASA 89:1012). W' is
    stochastically larger when a or b grows, so the supremum lies on the curve; it is bounded
    rigorously by cells [a_i, a_{i+1}] of FPR, each bounded by its corner (a_i, f(a_{i+1})) (f does
    not increase) — by Hoeffding's inequality where the corner's mean of W' is far above the
    observed W, else by the exact sum — and cells that could hold the supremum are halved until
    the bound is within `tolerance` (relative) of a value attained on the curve — or, given
    `alpha`, until the bound is ≤ alpha or a value attained on the curve is above it (the decision
    is then settled). The returned number is that bound: the test that rejects when it is ≤ α has
    level ≤ α.

    Why one weighted statistic and not two Clopper-Pearson bounds: with s the curve's slope at the
    rule's FPR, the distance of (FPR, FNR) below the curve is measured once, with the standard
    error of W, instead of paying two one-sided bounds at α/2 each — about half the margin a
    violation must have (measured in the planted-bug bench).
    """
    fn, n1, fp, n0, s = int(false_negatives), int(n_with), int(false_positives), int(n_without), float(slope)
    if n1 < 1 or n0 < 1 or not (0 <= fn <= n1 and 0 <= fp <= n0):
        raise ValueError(f"need 0 ≤ FN ≤ n_with, 0 ≤ FP ≤ n_without, both n ≥ 1; got {fn}/{n1}, {fp}/{n0}")
    if not (math.isfinite(s) and s > 0):
        raise ValueError(f"slope must be positive and finite, got {slope!r}")
    observed = fn / n1 + s * fp / n0
    hoeffding_scale = 1.0 / n1 + s * s / n0  # Σ of squared ranges of the 0/1 terms of W'

    # A halved cell's left half keeps its parent's left corner and curve value: each is computed once
    # (the same pure function on the same arguments; memoised within this call only; the false-positive
    # pmfs across calls, `_false_positive_pmf`).
    corners: dict[tuple[float, float, bool], float] = {}
    curve: dict[float, float] = {}

    def corner_bound(a: float, b: float, attained: bool = False) -> float:
        key = (a, b, attained)
        if key not in corners:
            corners[key] = _corner_bound(a, b, attained)
        return corners[key]

    def _corner_bound(a: float, b: float, attained: bool) -> float:
        # Far above the observed W, Hoeffding's bound settles the cell without the exact sum; as a
        # value "attained on the curve" it would overstate, so there the lower value 0 is used.
        gap = b + s * a - observed
        if gap > 0:
            cheap = math.exp(-2.0 * gap * gap / hoeffding_scale)
            if cheap < 1e-9:
                return 0.0 if attained else cheap
        return _prob_weighted_at_most(fn, fp, n1, n0, s, a, b)

    def floors_of(cells: list[tuple[float, float]]) -> list[tuple[float, float]]:
        # f at the cells' ends; each α's value is computed once (row by row: the same value in any batch).
        new = sorted({a for cell in cells for a in cell if a not in curve})
        if new:
            curve.update(zip(new, (float(v) for v in tradeoff_from_profile(profile, np.array(new)))))
        return [(curve[lo], curve[hi]) for lo, hi in cells]

    edges = [float(e) for e in np.linspace(0.0, 1.0, 33)]
    cells = list(zip(edges[:-1], edges[1:]))
    attained, upper = 0.0, 1.0
    for _ in range(40):
        floors = floors_of(cells)
        bounds = [corner_bound(lo, f_hi) for (lo, _), (_, f_hi) in zip(cells, floors)]
        upper = max(bounds)
        # Values attained on the curve, in the cells that could still hold the supremum.
        attained = max(
            [attained]
            + [
                corner_bound(lo, f_lo, attained=True) if u > attained else 0.0
                for (lo, _), (f_lo, _), u in zip(cells, floors, bounds)
            ]
        )
        if alpha is not None and (upper <= alpha or attained > alpha):
            break  # the decision at alpha is settled
        # Refine the cells that could still hold the supremum (and, given alpha, could decide).
        floor = max(attained * (1.0 + tolerance) + 1e-12, 0.0 if alpha is None else alpha)
        open_cells = [cell for cell, u in zip(cells, bounds) if u > floor]
        if not open_cells or len(open_cells) > MAX_OPEN_CELLS:
            break  # precise enough, or flat over a wide range: `upper` is still a valid bound
        cells = [half for lo, hi in open_cells for half in ((lo, (lo + hi) / 2), ((lo + hi) / 2, hi))]
    return float(min(1.0, max(upper, P_VALUE_FLOOR)))


# Selection FPRs a rule may have: the weighted statistic's spread is smallest in the tails, where
# some violations live (a batch reused at every step lies below the claim's curve only at FPR
# ≲ 0.25); beyond these the few selection scores make the anticipated margin noise.
SELECTION_FPR_RANGE = (0.02, 0.98)


def best_profile_rule(
    scores_in,
    scores_out,
    profile: PrivacyProfile,
    n_eval_in: int,
    n_eval_out: int,
    confidence: float = 0.95,
    fpr_range: tuple[float, float] = SELECTION_FPR_RANGE,
) -> tuple[ProfileRule, float]:
    """(rule, anticipated margin): the threshold rule and slope (`ProfileRule`) to evaluate on
    fresh trials, chosen on SELECTION scores only, and by how much its anticipated point would
    clear the test: f_claim(FPR) − FNR − z_{1−α}·sd(W) with the selection rates, the slope s of the
    claim's curve at that FPR and sd(W) = √(FNR(1−FNR)/n_in + s²·FPR(1−FPR)/n_out) over `n_eval_*`
    trials (> 0 when the rule would likely refute the claim; a normal approximation used only to
    choose, never to decide). The selection rates are smoothed by half a count ((k + ½)/(n + 1)),
    so that a handful of selection scores cannot promise an error-free rule; thresholds lie midway
    between consecutive selection scores; only rules whose smoothed selection FPR lies in
    `fpr_range` compete. Using these scores again for the evaluation would make the test invalid.
    """
    s_in = np.asarray(scores_in, dtype=float)
    s_out = np.asarray(scores_out, dtype=float)
    if s_in.size < 1 or s_out.size < 1:
        raise ValueError("need selection scores on both sides")
    z = float(stats.norm.isf(1.0 - float(confidence)))
    values = np.unique(np.concatenate([s_in, s_out]))
    candidates = (
        np.concatenate([[values[0] - 1.0], (values[:-1] + values[1:]) / 2, [values[-1] + 1.0]])
        if values.size > 1
        else np.array([values[0]])
    )
    sorted_in, sorted_out = np.sort(s_in), np.sort(s_out)
    # Counts of "member if score >= t" at every candidate t, by binary search (no n × m matrix).
    high_fp = s_out.size - np.searchsorted(sorted_out, candidates, side="left")
    high_fn = np.searchsorted(sorted_in, candidates, side="left")
    best = ProfileRule(float(np.median(np.concatenate([s_in, s_out]))), HIGH, 1.0)
    best_margin = -np.inf
    for direction, fp, fn in ((HIGH, high_fp, high_fn), (LOW, s_out.size - high_fp, s_in.size - high_fn)):
        fpr, fnr = (fp + 0.5) / (s_out.size + 1), (fn + 0.5) / (s_in.size + 1)
        slope = curve_slope(profile, fpr)
        sd = np.sqrt(fnr * (1 - fnr) / int(n_eval_in) + slope**2 * fpr * (1 - fpr) / int(n_eval_out))
        margin = tradeoff_from_profile(profile, fpr) - fnr - z * sd
        margin = np.where((fpr >= fpr_range[0]) & (fpr <= fpr_range[1]) & (slope > 0), margin, -np.inf)
        i = int(np.argmax(margin))
        if margin[i] > best_margin:
            best, best_margin = ProfileRule(float(candidates[i]), direction, float(slope[i])), float(margin[i])
    return best, best_margin


def profile_test(scores_in, scores_out, rule: ProfileRule, profile: PrivacyProfile, confidence: float = 0.95) -> dict:
    """Refute the claim's whole privacy profile with ONE pre-chosen rule on independent trials
    (Dong, Roth, Su 2019, arXiv 1905.02383, for the curve; cf. Nasr et al. 2023, arXiv 2302.07956,
    who audit against the f-DP curve; canaries and counts as in Jagielski, Ullman, Oprea 2020,
    arXiv 2006.07709).

    `scores_in` / `scores_out`: one score per independent trial with / without the canary; `rule`
    (threshold, direction, slope) must not depend on them. The claim is refuted when the exact
    p-value of its curve (`tangent_test_p_value`, the weighted error FNR + slope·FPR) is ≤ α =
    1 − confidence. Sound: a mechanism that satisfies the claim is refuted with probability ≤ α.
    What is refuted is the curve as a whole (the mechanism is not f_claim-DP); `supporting_pair` is
    the profile pair (ε', δ(ε')) whose line sets the curve at the observed FPR — where the output
    falls short of the claim, not a pair refuted on its own.
    """
    s_in = np.asarray(scores_in, dtype=float)
    s_out = np.asarray(scores_out, dtype=float)
    if s_in.size < 1 or s_out.size < 1:
        raise ValueError("need evaluation scores on both sides")
    threshold, direction, slope = float(rule[0]), str(rule[1]), float(rule[2])
    alpha = 1.0 - float(confidence)
    fp, fn = _errors(rule, s_in, s_out)
    p_value = tangent_test_p_value(fn, s_in.size, fp, s_out.size, slope, profile)
    fpr, fnr = fp / s_out.size, fn / s_in.size
    terms = _curve_terms(profile, np.array([fpr]))[0]
    best = int(np.argmax(terms))
    floor = float(np.clip(terms[best], 0.0, 1.0))  # = tradeoff_from_profile(profile, fpr)
    eps, deltas = profile.arrays()
    return {
        "threshold": threshold,
        "direction": direction,
        "slope": slope,
        "statistic": f"FNR + {slope:.4g}·FPR",
        "false_positives": fp,
        "n_without": int(s_out.size),
        "false_negatives": fn,
        "n_with": int(s_in.size),
        "fpr": fpr,
        "fnr": fnr,
        "claimed_fnr_floor": floor,
        "gap_below_curve": floor - fnr,
        "p_value": p_value,
        "confidence": float(confidence),
        "refuted": p_value <= alpha,
        "supporting_pair": {"epsilon": float(eps[best]), "delta": float(deltas[best])},
        "profile": profile.source,
    }


def tangent_test_ceiling(profile: PrivacyProfile, n_in: int, n_out: int, confidence: float = 0.95) -> dict:
    """What a PERFECT attack (no error on any of these trials) could show with `profile_test`: its
    p-value sup_a (1 − a)^{n_out}·(1 − f(a))^{n_in} (the chance that a mechanism on the claim's curve
    makes no error at all, whatever the slope). When it is above α no attack with this many trials
    can refute the claim: the audit is inconclusive, whatever the code does."""
    alpha = 1.0 - float(confidence)
    p_value = tangent_test_p_value(0, int(n_in), 0, int(n_out), 1.0, profile)
    return {
        "perfect_attack_p_value": p_value,
        "refutable": p_value <= alpha,
        "n_with": int(n_in),
        "n_without": int(n_out),
    }


def profile_ceiling(profile: PrivacyProfile, n_in: int, n_out: int, confidence: float = 0.95) -> dict:
    """What a PERFECT attack (no error on any of these trials) could show: its Clopper-Pearson
    point and whether that point refutes the profile. When it does not, no attack with this many
    trials can refute the claim: the audit is inconclusive, whatever the code does."""
    alpha = 1.0 - float(confidence)
    fpr_u = clopper_pearson_upper(0, int(n_out), alpha / 2)
    fnr_u = clopper_pearson_upper(0, int(n_in), alpha / 2)
    refuted = refute_point(profile, fpr_u, fnr_u)
    return {
        "fpr_upper": fpr_u,
        "fnr_upper": fnr_u,
        "refutable": refuted is not None,
        "strongest_refutable_pair": refuted,
    }
