"""Gaussian DP conversions: μ from error rates, ε(μ, δ) and μ(ε, δ) (Dong, Roth, Su 2019, arXiv 1905.02383)."""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special, stats

from audit.statistics.bound_types import _check_delta, _check_rate

__all__ = ["gdp_mu_lower_bound", "epsilon_from_gdp_mu", "gdp_mu_from_epsilon"]


def _gdp_mu_array(fpr_u, fnr_u) -> np.ndarray:
    # isf(x) = Φ⁻¹(1 − x), accurate for tiny x where 1 − x would round to 1.
    return stats.norm.isf(np.asarray(fpr_u, dtype=float)) - stats.norm.ppf(np.asarray(fnr_u, dtype=float))


def gdp_mu_lower_bound(fpr_upper: float, fnr_upper: float) -> float:
    """μ-GDP parameter implied by error-rate upper bounds: Φ⁻¹(1 − FPR̄) − Φ⁻¹(FNR̄), floored at 0.

    A μ-GDP mechanism's trade-off curve is G_μ(x) = Φ(Φ⁻¹(1 − x) − μ) (Dong, Roth, Su 2019,
    "Gaussian Differential Privacy", arXiv 1905.02383); solving FNR = G_μ(FPR) for μ.

    Args:
        fpr_upper: an upper confidence bound on the false-positive rate.
        fnr_upper: an upper confidence bound on the false-negative rate.

    Returns:
        The μ lower bound (≥ 0; inf at a zero rate bound).
    """
    f = _check_rate("fpr_upper", fpr_upper)
    g = _check_rate("fnr_upper", fnr_upper)
    return max(float(_gdp_mu_array(f, g)), 0.0)


def _gdp_delta_gap(eps: float, mu: float, log_delta: float) -> float:
    # ln(Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)) − ln δ, in log space so large ε cannot overflow.
    # special.log_ndtr is what stats.norm.logcdf evaluates, without the distribution wrapper's
    # per-call argument handling (the root searches below call this thousands of times).
    a = special.log_ndtr(-eps / mu + mu / 2)
    b = eps + special.log_ndtr(-eps / mu - mu / 2)
    if b >= a:
        return -np.inf
    return float(a + np.log1p(-np.exp(b - a)) - log_delta)


def epsilon_from_gdp_mu(mu: float, delta: float) -> float:
    """The ε at which a μ-GDP mechanism is (ε, δ)-DP: the root of
    δ = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)  (Dong, Roth, Su 2019, arXiv 1905.02383, Cor. 2.13).

    Found with `scipy.optimize.brentq`. 0 for μ = 0 or when δ already exceeds the ε = 0 value
    2Φ(μ/2) − 1; inf for δ = 0 and μ > 0, or μ = inf.

    Args:
        mu: the GDP parameter μ ≥ 0.
        delta: the δ at which ε is read.

    Returns:
        ε ≥ 0 (inf for δ = 0 and μ > 0, or μ = inf).
    """
    try:
        mu_ = float(mu)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"mu: expected a number, got {mu!r}") from exc
    if math.isnan(mu_) or mu_ < 0:
        raise ValueError(f"mu: must be ≥ 0, got {mu!r}")
    d = _check_delta(delta)
    if mu_ == 0:
        return 0.0
    if math.isinf(mu_) or d == 0:
        return math.inf
    log_delta = math.log(d)
    if _gdp_delta_gap(0.0, mu_, log_delta) <= 0:
        return 0.0
    hi = max(1.0, mu_)
    while _gdp_delta_gap(hi, mu_, log_delta) > 0:
        hi *= 2
    return float(optimize.brentq(_gdp_delta_gap, 0.0, hi, args=(mu_, log_delta), xtol=1e-10))


def gdp_mu_from_epsilon(epsilon: float, delta: float) -> float:
    """The μ whose μ-GDP mechanism has exactly this ε at δ (inverse of `epsilon_from_gdp_mu`)."""
    hi = 1.0
    while epsilon_from_gdp_mu(hi, delta) < epsilon:
        hi *= 2
    return float(optimize.brentq(lambda m: epsilon_from_gdp_mu(m, delta) - epsilon, 1e-9, hi, xtol=1e-12))
