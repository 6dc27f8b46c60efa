"""`tangent_test_p_value` with its memos (corners and curve values per call, false-positive pmfs across
calls) gives the p-value of the plain refinement — each computed afresh — bit for bit."""

import math

import numpy as np
import pytest

from audit.statistics import tradeoff_curves as tc


def _plain_p_value(fn, n1, fp, n0, s, profile, alpha=None, tolerance=0.01):
    """The refinement as it stood before the memos (wave 9), for the comparison only."""
    observed, scale = fn / n1 + s * fp / n0, 1.0 / n1 + s * s / n0

    def corner(a, b, attained=False):
        gap = b + s * a - observed
        if gap > 0 and math.exp(-2.0 * gap * gap / scale) < 1e-9:
            return 0.0 if attained else math.exp(-2.0 * gap * gap / scale)
        spread = 12.0 * math.sqrt(n0 * a * (1.0 - a)) + 2.0
        x = np.arange(max(0, math.floor(n0 * a - spread)), min(n0, math.ceil(n0 * a + spread)) + 1)
        pmf = tc._binomial_pmf(x, n0, a)  # afresh, as before the cache
        k = np.minimum(fn + np.floor(n1 * s * (fp - x) / n0 + 1e-9), n1).astype(np.int64)
        cdf, inside = np.zeros(k.size), k >= 0
        if inside.any():
            lo, hi = int(k[inside].min()), int(k[inside].max())
            cdf[inside] = tc._binomial_cdf_range(lo, hi, n1, b)[k[inside] - lo]
        return float(min(1.0, np.sum(pmf * cdf) + max(0.0, 1.0 - float(pmf.sum()))))

    edges = np.linspace(0.0, 1.0, 33)
    cells, attained, upper = list(zip(edges[:-1], edges[1:])), 0.0, 1.0
    for _ in range(40):
        floors = tc.tradeoff_from_profile(profile, np.array([c for cell in cells for c in cell])).reshape(-1, 2)
        bounds = [corner(lo, f_hi) for (lo, _), (_, f_hi) in zip(cells, floors)]
        upper = max(bounds)
        reached = [corner(lo, f[0], True) if u > attained else 0.0 for (lo, _), f, u in zip(cells, floors, bounds)]
        attained = max([attained, *reached])
        if alpha is not None and (upper <= alpha or attained > alpha):
            break
        floor = max(attained * (1.0 + tolerance) + 1e-12, 0.0 if alpha is None else alpha)
        open_cells = [cell for cell, u in zip(cells, bounds) if u > floor]
        if not open_cells or len(open_cells) > tc.MAX_OPEN_CELLS:
            break
        cells = [half for lo, hi in open_cells for half in ((lo, (lo + hi) / 2), ((lo + hi) / 2, hi))]
    return float(min(1.0, max(upper, tc.P_VALUE_FLOOR)))


@pytest.mark.parametrize("which", ["dpsgd", "pair"])
def test_the_memoised_p_value_equals_the_plain_refinement_bit_for_bit(which):
    profile = tc.dpsgd_privacy_profile(5.0390625, 0.2, 40) if which == "dpsgd" else tc.pair_privacy_profile(1.0, 1e-5)
    rng = np.random.default_rng(7)
    tc._false_positive_pmf.cache_clear()
    for i in range(8):
        n1, n0 = int(rng.integers(20, 1500)), int(rng.integers(20, 1500))
        fpr = float(rng.uniform(0.01, 0.9))
        fnr = min(1.0, float(tc.tradeoff_from_profile(profile, fpr)) * float(rng.uniform(0.6, 1.2)))
        slope = float(tc.curve_slope(profile, fpr)) or 1.0
        fp, fn = int(rng.binomial(n0, fpr)), int(rng.binomial(n1, fnr))
        alpha = None if i % 2 else 0.05
        plain = _plain_p_value(fn, n1, fp, n0, slope, profile, alpha=alpha).hex()
        for _ in range(2):  # the second call reads the false-positive pmfs the first one cached
            assert tc.tangent_test_p_value(fn, n1, fp, n0, slope, profile, alpha=alpha).hex() == plain, (fn, fp)
