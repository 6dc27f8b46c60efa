"""Tight audits against a Gaussian-DP claim: refute the claimed trade-off curve, bound μ.

Full-batch DP-SGD (q = 1) with noise multiplier σ run for T steps is exactly μ-GDP with
μ = √T/σ (Dong, Roth, Su 2019, "Gaussian Differential Privacy", arXiv 1905.02383, Cor. 3.3 with
the Gaussian mechanism of sensitivity C and noise σC composed T times). Its trade-off curve is
G_μ(x) = Φ(Φ⁻¹(1 − x) − μ): no test telling "with the record" from "without" can have a type-II
error below G_μ(its type-I error). A white-box audit with a Dirac gradient canary observes every
iterate; the canary's coordinate is then exactly a Gaussian shift (Nasr et al. 2023, "Tight
Auditing of Differentially Private Machine Learning", arXiv 2302.07956), so the audit can reach
the claim.

The test (`gaussian_dp_audit`), on independent runs "in" (positive) and "out" (negative):

1. a *pilot* part of each side picks the threshold and direction; the evaluation part is never
   looked at before the rule is fixed. Default rule: the pilot's equal-error-rate point
   (`equal_error_rule_on_pilot`). Picking the threshold that maximises the pilot's own bound
   rewards the extreme tail, where the evaluation interval is widest, and made the estimate fall
   as runs grew (issue 11: 0.95 → 0.67 of the claim from 10k to 50k runs); the alternative rule
   `choose_rule_on_pilot` scores thresholds with the evaluation part's width instead (measured
   here on Gaussian shifts: lower and noisier than the equal-error point, e.g. 0.84 vs 0.90 of
   the claim at μ = 0.27 with 50k runs per side);
2. one-sided Clopper-Pearson upper bounds FPR̄, FNR̄ on the evaluation part, α/2 each;
3. (a) refutation, assumption-free given independent runs: if FNR̄ < G_μ(FPR̄) the claimed curve is
   refuted (with probability ≥ 1 − α both bounds hold, and a μ-GDP mechanism has
   FNR ≥ G_μ(FPR) ≥ G_μ(FPR̄)); the pair (ε', δ_μ(ε')) of the claim's privacy profile that the
   point violates most is reported;
   (b) the GDP-family bound μ_LB = Φ⁻¹(1 − FPR̄) − Φ⁻¹(FNR̄) and its ε at the claimed δ. It is a
   lower bound on μ only if the mechanism's trade-off curve is Gaussian (true for q = 1 DP-SGD
   with a Dirac canary); FNR̄ < G_μ(FPR̄) ⇔ μ_LB > μ, so (a) and (b) agree at the claimed μ.
   Also the Clopper-Pearson (ε, δ) bound of the same point (Jagielski, Ullman, Oprea 2020,
   arXiv 2006.07709), sound for any mechanism and far below the claim at feasible run counts;
   (c) the Clopper-Pearson (ε, δ) bound of a SECOND rule chosen on the same pilot for that bound
   (`choose_clopper_pearson_rule`: the tail, where a likelihood ratio above e^ε shows): 1.6-2.9×
   the equal-error point's with 2000-50000 runs a side at q = 1 (benchmarks/bench_dirac_tightness.py),
   but it can be lower when the pilot is too small to see the tail. Each of (a)-(c) holds at
   `confidence` on its own; a caller that decides on two of them splits its α (`whitebox_audit` does).

Pure functions, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

from audit.statistics.audit_ceilings import smallest_sufficient
from audit.statistics.binomial import beta_ppf
from audit.statistics.epsilon_bounds import (
    choose_clopper_pearson_rule,
    clopper_pearson_upper,
    epsilon_from_error_rates,
    epsilon_from_gdp_mu,
)

__all__ = [
    "GAUSSIAN_ASSUMPTION",
    "GaussianDPAudit",
    "choose_rule_on_pilot",
    "equal_error_rule_on_pilot",
    "gaussian_dp_audit",
    "gaussian_dp_ceiling_mu",
    "gaussian_tradeoff",
    "gdp_delta_profile",
    "mu_full_batch_dpsgd",
    "most_refuted_profile_pair",
    "runs_needed_gaussian_dp",
]

GAUSSIAN_ASSUMPTION = (
    "the mechanism's trade-off curve is Gaussian (true for q = 1 DP-SGD with a Dirac gradient "
    "canary: the canary coordinate is a Gaussian shift)"
)
HIGHER_IN = "in if score >= threshold"
LOWER_IN = "in if score < threshold"
# Candidate thresholds: this many quantiles of the pooled pilot scores (plus the pilot scores'
# midpoints when there are fewer), enough to put the rule within a fraction of a pilot gap of the best.
_CANDIDATES = 512


def gaussian_tradeoff(fpr, mu: float) -> np.ndarray:
    """G_μ(x) = Φ(Φ⁻¹(1 − x) − μ), the smallest type-II error of a μ-GDP mechanism at type-I error x
    (Dong, Roth, Su 2019, arXiv 1905.02383, Def. 2.7)."""
    return stats.norm.cdf(stats.norm.isf(np.asarray(fpr, dtype=float)) - float(mu))


def gdp_delta_profile(epsilon, mu: float) -> np.ndarray:
    """δ_μ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2): μ-GDP is (ε, δ_μ(ε))-DP for every ε ≥ 0 and no
    smaller δ (Dong, Roth, Su 2019, arXiv 1905.02383, Cor. 2.13). Computed in log space."""
    eps = np.asarray(epsilon, dtype=float)
    if mu <= 0:
        return np.zeros_like(eps)
    a = stats.norm.logcdf(-eps / mu + mu / 2)
    b = eps + stats.norm.logcdf(-eps / mu - mu / 2)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(b < a, np.exp(a) * -np.expm1(np.minimum(b - a, 0.0)), 0.0)


def mu_full_batch_dpsgd(history) -> float:
    """μ of full-batch (q = 1) DP-SGD from its steps [(σ, T), ...]: √(Σ T_i/σ_i²).

    T Gaussian mechanisms of sensitivity C and std σC compose to √T/σ-GDP (Dong, Roth, Su 2019,
    arXiv 1905.02383, Cor. 3.3); stages with different σ add their μ² terms.
    """
    total = 0.0
    for sigma, steps in history:
        sigma, steps = float(sigma), float(steps)
        if not (math.isfinite(sigma) and sigma > 0) or steps < 0:
            raise ValueError(f"history: expected (σ > 0, T ≥ 0) pairs, got {(sigma, steps)!r}")
        total += steps / sigma**2
    return math.sqrt(total)


def most_refuted_profile_pair(
    fpr_upper: float, fnr_upper: float, mu: float, epsilon_max: float = 60.0
) -> dict[str, float] | None:
    """The strongest pair (ε', δ_μ(ε')) of the claim's privacy profile that the point (FPR̄, FNR̄)
    refutes — the largest ε' (hence smallest δ') on a fine grid — or None if it refutes none.

    (ε', δ')-DP requires FPR + e^ε'·FNR ≥ 1 − δ' and the mirror image (Kairouz, Oh, Viswanath 2015,
    arXiv 1311.0776). `margin` = ln((1 − δ' − FPR̄)/FNR̄) − ε' (or mirrored) at that ε', > 0.
    """
    grid = np.linspace(0.0, float(epsilon_max), 6001)
    delta = gdp_delta_profile(grid, mu)
    margin = np.full(grid.shape, -np.inf)
    for fp, fn in ((fpr_upper, fnr_upper), (fnr_upper, fpr_upper)):
        with np.errstate(divide="ignore", invalid="ignore"):
            m = (
                np.where(
                    1 - delta - fp > 0, np.log(np.maximum(1 - delta - fp, 1e-300)) - math.log(max(fn, 1e-300)), -np.inf
                )
                - grid
            )
        margin = np.maximum(margin, m)
    refuted = np.flatnonzero(margin > 0)
    if refuted.size == 0:
        return None
    i = int(refuted[-1])
    return {"epsilon": float(grid[i]), "delta": float(delta[i]), "margin": float(margin[i])}


def _cp_upper_smooth(k: np.ndarray, n_pilot: int, n_eval: int, alpha: float) -> np.ndarray:
    # What the evaluation part's Clopper-Pearson upper bound would be if its error rate were the
    # pilot's, smoothed by Laplace's rule ((k + 1)/(n + 2): never 0 in a tail the pilot is too small to see).
    k_eval = (np.asarray(k, dtype=float) + 1.0) / (n_pilot + 2.0) * n_eval
    return np.where(k_eval < n_eval, beta_ppf(1.0 - alpha, k_eval + 1.0, np.maximum(n_eval - k_eval, 1e-9)), 1.0)


def choose_rule_on_pilot(
    positive_pilot, negative_pilot, n_eval_positive: int, n_eval_negative: int, alpha_per_rate: float
) -> tuple[float, str]:
    """(threshold, direction) maximising the μ_LB the evaluation part is expected to give.

    Candidates are quantiles of the pooled pilot scores; each is scored by
    Φ⁻¹(1 − FPR̃) − Φ⁻¹(FNR̃) where FPR̃, FNR̃ are the Clopper-Pearson upper bounds that
    `n_eval_*` runs would give at the pilot's (Laplace-smoothed) error rates. Only pilot scores and
    the evaluation *sizes* are used, so the evaluation test stays valid; and as the evaluation part
    grows its width shrinks and the chosen rule moves no further into the tail than the data
    support: the estimate does not fall as runs grow.
    """
    pos = np.asarray(positive_pilot, dtype=float)
    neg = np.asarray(negative_pilot, dtype=float)
    if pos.size == 0 or neg.size == 0:
        raise ValueError("pilot: need at least one run on each side")
    pooled = np.sort(np.concatenate([pos, neg]))
    levels = np.linspace(0.0, 1.0, min(_CANDIDATES, pooled.size) + 1)[1:-1]
    values = np.unique(np.quantile(pooled, levels)) if levels.size else np.unique(pooled)
    if values.size == 0:
        return float(pooled[0]), HIGHER_IN
    pos_sorted, neg_sorted = np.sort(pos), np.sort(neg)
    # Rule "in if score >= t": false positives = negatives ≥ t, false negatives = positives < t.
    fp_hi = neg.size - np.searchsorted(neg_sorted, values, side="left")
    fn_hi = np.searchsorted(pos_sorted, values, side="left")
    best_value, best = -np.inf, (float(values[0]), HIGHER_IN)
    for direction, fp, fn in ((HIGHER_IN, fp_hi, fn_hi), (LOWER_IN, neg.size - fp_hi, pos.size - fn_hi)):
        fpr_u = _cp_upper_smooth(fp, neg.size, n_eval_negative, alpha_per_rate)
        fnr_u = _cp_upper_smooth(fn, pos.size, n_eval_positive, alpha_per_rate)
        mu = stats.norm.isf(fpr_u) - stats.norm.ppf(fnr_u)
        i = int(np.argmax(mu))
        if mu[i] > best_value:
            best_value, best = float(mu[i]), (float(values[i]), direction)
    return best


def equal_error_rule_on_pilot(positive_pilot, negative_pilot) -> tuple[float, str]:
    """(threshold, direction) where the pilot's two error rates are equal (the pilot's "equal error
    rate" point), direction by which side's pilot median is higher.

    For a Gaussian shift every threshold has the same true μ, so chasing the pilot's best-looking
    threshold only chases noise into a tail where the evaluation interval is wider; the
    equal-error point is where the variance of Φ⁻¹(FPR̂) − Φ⁻¹(FNR̂) is smallest for small μ and
    stays central for large μ. It depends on the pilot only (never on the evaluation scores), so
    the estimate converges to μ from below as runs grow instead of falling.
    """
    pos = np.sort(np.asarray(positive_pilot, dtype=float))
    neg = np.sort(np.asarray(negative_pilot, dtype=float))
    if pos.size == 0 or neg.size == 0:
        raise ValueError("pilot: need at least one run on each side")
    direction = HIGHER_IN if np.median(pos) >= np.median(neg) else LOWER_IN
    sign = 1.0 if direction == HIGHER_IN else -1.0
    p, n = sign * pos, np.sort(sign * neg)
    p = np.sort(p)
    # FPR(t) = share of negatives ≥ t falls in t, FNR(t) = share of positives < t rises: bisect
    # on the pooled values for the crossing.
    values = np.unique(np.concatenate([p, n]))
    fpr = 1.0 - np.searchsorted(n, values, side="left") / n.size
    fnr = np.searchsorted(p, values, side="left") / p.size
    i = int(np.argmin(np.abs(fpr - fnr)))
    return float(sign * values[i]), direction


def _errors(threshold: float, direction: str, positive: np.ndarray, negative: np.ndarray) -> tuple[int, int]:
    if direction == HIGHER_IN:
        return int(np.sum(negative >= threshold)), int(np.sum(positive < threshold))
    return int(np.sum(negative < threshold)), int(np.sum(positive >= threshold))


def gaussian_dp_ceiling_mu(n_eval_positive: int, n_eval_negative: int, confidence: float = 0.95) -> float:
    """Largest μ_LB any attack can show with these evaluation runs: no error at all, so
    FPR̄ = 1 − (α/2)^{1/n₀}, FNR̄ = 1 − (α/2)^{1/n₁} (one-sided Clopper-Pearson at 0 errors)."""
    alpha = 1.0 - float(confidence)
    fpr_u = clopper_pearson_upper(0, int(n_eval_negative), alpha / 2)
    fnr_u = clopper_pearson_upper(0, int(n_eval_positive), alpha / 2)
    return float(stats.norm.isf(fpr_u) - stats.norm.ppf(fnr_u))


def _split_sizes(n: int, pilot_fraction: float) -> tuple[int, int]:
    n_pilot = min(max(int(round(pilot_fraction * n)), 1), n - 1)
    return n_pilot, n - n_pilot


def runs_needed_gaussian_dp(
    claimed_mu: float, confidence: float = 0.95, pilot_fraction: float = 0.2, limit: int = 10**8
) -> int | None:
    """Smallest runs per side whose `gaussian_dp_ceiling_mu` exceeds `claimed_mu` (None: > `limit`)."""

    def enough(n: int) -> bool:
        m = _split_sizes(n, pilot_fraction)[1]
        return gaussian_dp_ceiling_mu(m, m, confidence) > claimed_mu

    return smallest_sufficient(enough, start=3, limit=limit)


@dataclass(frozen=True)
class GaussianDPAudit:
    """What `gaussian_dp_audit` found (every field plain data; `as_dict` for JSON)."""

    claimed_mu: float
    delta: float
    confidence: float
    threshold: float
    direction: str
    n_pilot_positive: int
    n_pilot_negative: int
    n_eval_positive: int
    n_eval_negative: int
    false_positives: int
    false_negatives: int
    fpr_upper: float
    fnr_upper: float
    refutes_claim: bool
    refuted_pair: dict[str, float] | None
    mu_lower_bound: float
    epsilon_gdp: float
    claimed_epsilon_gdp: float
    epsilon_lower_bound_clopper_pearson: float
    tail_threshold: float
    tail_direction: str
    tail_false_positives: int
    tail_false_negatives: int
    tail_fpr_upper: float
    tail_fnr_upper: float
    epsilon_lower_bound_tail: float
    ceiling_mu: float
    ceiling_epsilon_gdp: float
    assumption: str = GAUSSIAN_ASSUMPTION

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def gaussian_dp_audit(
    positive,
    negative,
    *,
    claimed_mu: float,
    delta: float,
    confidence: float = 0.95,
    pilot_fraction: float = 0.2,
    seed: int = 0,
    rule: str = "equal_error",
) -> GaussianDPAudit:
    """Audit a μ-GDP claim from independent runs' scores (see the module docstring for the test).

    `positive`: one score per run with the canary ("in"), `negative`: per run without. A random
    `pilot_fraction` of each side (seeded by `seed`) picks the rule (`choose_rule_on_pilot`); the
    rest is evaluated once, one-sided Clopper-Pearson at α/2 = (1 − confidence)/2 per rate.
    Returns (a) `refutes_claim` and `refuted_pair`, (b) `mu_lower_bound` (floored at 0) and
    `epsilon_gdp` = its ε at `delta` (`epsilon_from_gdp_mu`; valid under `assumption`), the
    Clopper-Pearson (ε, δ) bound of the same point (sound for any mechanism), and the ceiling (what
    an attack without a single error would show with these evaluation runs).
    Nasr et al. 2023, arXiv 2302.07956; Dong, Roth, Su 2019, arXiv 1905.02383.
    """
    pos = np.asarray(positive, dtype=float).ravel()
    neg = np.asarray(negative, dtype=float).ravel()
    if pos.size < 2 or neg.size < 2:
        raise ValueError(f"positive, negative: need ≥ 2 runs on each side, got {pos.size} and {neg.size}")
    if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(neg))):
        raise ValueError("positive, negative: scores must be finite")
    mu_claim = float(claimed_mu)
    if not (math.isfinite(mu_claim) and mu_claim >= 0):
        raise ValueError(f"claimed_mu: must be a finite number ≥ 0, got {claimed_mu!r}")
    d = float(delta)
    if not (0 < d < 1):
        raise ValueError(f"delta: must be in (0, 1), got {delta!r}")
    conf = float(confidence)
    if not (0 < conf < 1):
        raise ValueError(f"confidence: must be in (0, 1), got {confidence!r}")
    if not (0 < pilot_fraction < 1):
        raise ValueError(f"pilot_fraction: must be in (0, 1), got {pilot_fraction!r}")
    alpha_rate = (1.0 - conf) / 2
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 11]))
    pos, neg = rng.permutation(pos), rng.permutation(neg)
    p_pilot, _ = _split_sizes(pos.size, pilot_fraction)
    n_pilot, _ = _split_sizes(neg.size, pilot_fraction)
    pos_pilot, pos_eval = pos[:p_pilot], pos[p_pilot:]
    neg_pilot, neg_eval = neg[:n_pilot], neg[n_pilot:]
    if rule == "equal_error":
        threshold, direction = equal_error_rule_on_pilot(pos_pilot, neg_pilot)
    elif rule == "anticipated_width":
        threshold, direction = choose_rule_on_pilot(pos_pilot, neg_pilot, pos_eval.size, neg_eval.size, alpha_rate)
    else:
        raise ValueError(f"rule: expected 'equal_error' or 'anticipated_width', got {rule!r}")
    fp, fn = _errors(threshold, direction, pos_eval, neg_eval)
    fpr_u = clopper_pearson_upper(fp, neg_eval.size, alpha_rate)
    fnr_u = clopper_pearson_upper(fn, pos_eval.size, alpha_rate)
    # The (ε, δ) bound's own rule, from the same pilot: the equal-error point suits the curve, not
    # the tail where a likelihood ratio above e^ε shows.
    tail_t, higher = choose_clopper_pearson_rule(
        np.concatenate([pos_pilot, neg_pilot]),
        np.r_[np.ones(pos_pilot.size, bool), np.zeros(neg_pilot.size, bool)],
        neg_eval.size,
        pos_eval.size,
        alpha_rate,
        d,
    )
    tail_direction = HIGHER_IN if higher else LOWER_IN
    tail_fp, tail_fn = _errors(tail_t, tail_direction, pos_eval, neg_eval)
    tail_fpr_u = clopper_pearson_upper(tail_fp, neg_eval.size, alpha_rate)
    tail_fnr_u = clopper_pearson_upper(tail_fn, pos_eval.size, alpha_rate)
    mu_raw = float(stats.norm.isf(fpr_u) - stats.norm.ppf(fnr_u))
    mu_lb = max(mu_raw, 0.0)
    refutes = bool(fnr_u < gaussian_tradeoff(fpr_u, mu_claim)) and mu_raw > mu_claim
    ceiling_mu = gaussian_dp_ceiling_mu(pos_eval.size, neg_eval.size, conf)
    return GaussianDPAudit(
        claimed_mu=mu_claim,
        delta=d,
        confidence=conf,
        threshold=threshold,
        direction=direction,
        n_pilot_positive=int(pos_pilot.size),
        n_pilot_negative=int(neg_pilot.size),
        n_eval_positive=int(pos_eval.size),
        n_eval_negative=int(neg_eval.size),
        false_positives=fp,
        false_negatives=fn,
        fpr_upper=float(fpr_u),
        fnr_upper=float(fnr_u),
        refutes_claim=refutes,
        refuted_pair=most_refuted_profile_pair(fpr_u, fnr_u, mu_claim) if refutes else None,
        mu_lower_bound=mu_lb,
        epsilon_gdp=epsilon_from_gdp_mu(mu_lb, d),
        claimed_epsilon_gdp=epsilon_from_gdp_mu(mu_claim, d),
        epsilon_lower_bound_clopper_pearson=float(epsilon_from_error_rates(fpr_u, fnr_u, d)),
        tail_threshold=float(tail_t),
        tail_direction=tail_direction,
        tail_false_positives=tail_fp,
        tail_false_negatives=tail_fn,
        tail_fpr_upper=float(tail_fpr_u),
        tail_fnr_upper=float(tail_fnr_u),
        epsilon_lower_bound_tail=float(epsilon_from_error_rates(tail_fpr_u, tail_fnr_u, d)),
        ceiling_mu=ceiling_mu,
        ceiling_epsilon_gdp=epsilon_from_gdp_mu(max(ceiling_mu, 0.0), d),
    )
