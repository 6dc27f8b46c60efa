"""The binomial cdf and survival function of `scipy.stats.binom`, without its per-call overhead.

`scipy.stats.binom.cdf/sf` evaluate Boost's binomial distribution (`scipy.special._ufuncs._binom_cdf`
/ `_binom_sf`, on k = floor(k) inside the support [0, n)) after generic argument handling that
costs ~20× the evaluation for one scalar. The one-run p-value (Steinke, Nasr, Jagielski 2023,
arXiv 2305.08846) and the trade-off-curve test call them tens of thousands of times per audit, so
here the same ufuncs are called directly, with the wrapper's rules for k outside the support
(cdf: 0 below it, 1 from n on; sf: 1 below it, 0 from n on) and its clip to [0, 1]. The values are
`scipy.stats.binom`'s, bit for bit (tests/test_statistics_fast_paths.py); should a SciPy release
rename the private ufuncs, the public distribution is used instead (slower, same values).

Pure functions, no I/O.
"""
from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.special import _ufuncs

__all__ = ["binom_cdf", "binom_cdf_scalar", "binom_sf"]

_BOOST_CDF = getattr(_ufuncs, "_binom_cdf", None)
_BOOST_SF = getattr(_ufuncs, "_binom_sf", None)


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


def binom_cdf_scalar(k: int, n: int, p: float) -> float:
    """P[Bin(n, p) ≤ k] for one integer k, as `float(scipy.stats.binom.cdf(k, n, p))`."""
    if _BOOST_CDF is None:
        return float(stats.binom.cdf(k, n, p))
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return float(min(max(_BOOST_CDF(float(k), n, p), 0.0), 1.0))


def binom_sf(k: int, n: int, p: float) -> float:
    """P[Bin(n, p) > k] for one integer k (any sign), as `float(scipy.stats.binom.sf(k, n, p))`."""
    if _BOOST_SF is None:
        return float(stats.binom.sf(k, n, p))
    if k < 0:
        return 1.0
    if k >= n:
        return 0.0
    return float(min(max(_BOOST_SF(float(k), n, p), 0.0), 1.0))
