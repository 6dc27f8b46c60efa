"""Binomial tail probabilities and the Clopper-Pearson beta quantile, without scipy.stats' per-call overhead.

`scipy.stats.binom.cdf/sf` evaluate Boost's binomial distribution (`scipy.special._ufuncs._binom_cdf`
/ `_binom_sf`, on k = floor(k) inside the support [0, n)) after generic argument handling that
costs ~20× the evaluation for one scalar. The one-run p-value (Steinke, Nasr, Jagielski 2023,
arXiv 2305.08846) and the trade-off-curve test call them tens of thousands of times per audit, so
here the same ufuncs are called directly, with the wrapper's rules for k outside the support
(cdf: 0 below it, 1 from n on; sf: 1 below it, 0 from n on) and its clip to [0, 1]. The values are
`scipy.stats.binom`'s, bit for bit (tests/test_statistics_fast_paths.py); should a SciPy release
rename the private ufuncs, the public distribution is used instead (slower, same values).

`beta_ppf` is `scipy.stats.beta.ppf` the same way (Boost's `_beta_ppf`): the Clopper-Pearson upper
bound (Clopper & Pearson 1934) of every threshold a Clopper-Pearson or GDP audit tries.

Pure functions, no I/O.
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.special import _ufuncs

__all__ = ["beta_ppf", "binom_cdf", "binom_cdf_scalar", "binom_sf"]

_BOOST_CDF = getattr(_ufuncs, "_binom_cdf", None)
_BOOST_SF = getattr(_ufuncs, "_binom_sf", None)
_BOOST_BETA_PPF = getattr(_ufuncs, "_beta_ppf", None)


def binom_cdf(k, n: int, p: float) -> np.ndarray:
    """P[Bin(n, p) ≤ k] at integer k (an array, any sign), as `scipy.stats.binom.cdf(k, n, p)`."""
    if _BOOST_CDF is None:
        return np.asarray(stats.binom.cdf(k, n, p), dtype=float)
    k = np.asarray(k, dtype=float)
    out = np.where(k >= n, 1.0, 0.0)
    inside = (k >= 0) & (k < n)
    if inside.any():
        out[inside] = np.clip(_BOOST_CDF(k[inside], n, p), 0.0, 1.0)
    return out


def _scalar(boost, fallback, k: int, n: int, p: float, below: float, above: float) -> float:
    """One Boost binomial tail value (outside the support: `below` for k < 0, `above` for k ≥ n), clipped
    to [0, 1] as scipy.stats does; `fallback` (the public scipy.stats call) where Boost is not found."""
    if boost is None:
        return float(fallback(k, n, p))
    if k < 0:
        return below
    if k >= n:
        return above
    return float(min(max(boost(float(k), n, p), 0.0), 1.0))


def binom_cdf_scalar(k: int, n: int, p: float) -> float:
    """P[Bin(n, p) ≤ k] for one integer k, as `float(scipy.stats.binom.cdf(k, n, p))`."""
    return _scalar(_BOOST_CDF, stats.binom.cdf, k, n, p, 0.0, 1.0)


def binom_sf(k: int, n: int, p: float) -> float:
    """P[Bin(n, p) > k] for one integer k (any sign), as `float(scipy.stats.binom.sf(k, n, p))`."""
    return _scalar(_BOOST_SF, stats.binom.sf, k, n, p, 1.0, 0.0)


def beta_ppf(q: float, a, b) -> np.ndarray:
    """The `q` quantile of Beta(a, b), elementwise over arrays a, b, as `scipy.stats.beta.ppf(q, a, b)`.

    The wrapper's own result inside its domain (0 < q < 1, a > 0, b > 0) is Boost's value · 1 + 0;
    anything else (an edge or an invalid argument) goes to the wrapper itself.
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if _BOOST_BETA_PPF is None or not 0.0 < q < 1.0 or not (np.all(a > 0) and np.all(b > 0)):
        return stats.beta.ppf(q, a, b)
    return _BOOST_BETA_PPF(q, a, b) * 1.0 + 0.0
