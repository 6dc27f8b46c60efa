"""The fast paths of the statistics equal what they replace (issue 25: faster, same results).

`audit.statistics.binomial` calls the Boost ufuncs behind `scipy.stats.binom` directly; the one-run
p-value and the trade-off-curve test use it. Each check here compares against the public scipy
call, bit for bit, on random and edge-case arguments.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from audit.statistics.binomial import binom_cdf, binom_cdf_scalar, binom_sf


def _arguments(seed: int, count: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.choice([0, 1, 2, 7, int(rng.integers(1, 100)), int(rng.integers(100, 30_000))]))
        p = float(rng.choice([0.0, 1.0, 0.5, rng.random(), special.expit(rng.uniform(0, 12)), 1e-9]))
        yield n, p, rng.integers(-3, n + 4, size=int(rng.integers(1, 40)))


def test_the_binomial_cdf_and_sf_are_scipys_bit_for_bit_inside_and_outside_the_support():
    for n, p, ks in _arguments(0, 600):
        np.testing.assert_array_equal(binom_cdf(ks, n, p), stats.binom.cdf(ks, n, p))
        for k in ks[:5].tolist():
            assert binom_cdf_scalar(k, n, p) == float(stats.binom.cdf(k, n, p))
            assert binom_sf(k, n, p) == float(stats.binom.sf(k, n, p))


def _one_run_p_value_with_scipy_stats(epsilon, m, r, v, delta):
    # The formula as it was written before the fast path (Steinke, Nasr, Jagielski 2023, arXiv 2305.08846).
    q = special.expit(epsilon)
    tail = stats.binom.sf(v - 1, r, q)
    if delta == 0 or v == 0:
        return float(min(tail, 1.0))
    i = np.arange(1, v + 1)
    window = stats.binom.cdf(v - 1, r, q) - stats.binom.cdf(v - 1 - i, r, q)
    return float(min(tail + 2 * m * delta * np.max(window / i), 1.0))


def test_the_one_run_p_value_is_the_scipy_stats_formula_exactly():
    from audit.statistics.one_run_bounds import one_run_p_value

    rng = np.random.default_rng(1)
    for _ in range(400):
        m = int(rng.integers(1, 5000))
        r = int(rng.integers(0, m + 1))
        v = int(rng.integers(0, r + 1)) if rng.random() < 0.5 else r  # all right: the ceiling's case
        eps = float(rng.choice([0.0, rng.uniform(0, 10)]))
        delta = float(rng.choice([0.0, 1e-5, 1e-3]))
        assert one_run_p_value(eps, m, r, v, delta) == _one_run_p_value_with_scipy_stats(eps, m, r, v, delta)


@pytest.mark.parametrize(("lo", "hi", "n", "p"), [(0, 40, 40, 0.3), (17, 900, 24_000, 0.02), (0, 0, 5, 0.0),
                                                   (3, 9, 9, 1.0), (1200, 1800, 2000, 0.75)])
def test_the_tradeoff_tests_cdf_range_starts_from_scipys_cdf(lo, hi, n, p):
    from audit.statistics.tradeoff_curves import _binomial_cdf_range, _binomial_pmf

    got = _binomial_cdf_range(lo, hi, n, p)
    if 0.0 < p < 1.0:
        start = float(stats.binom.cdf(lo, n, p))
        want = np.minimum(1.0, start + np.concatenate([[0.0], np.cumsum(_binomial_pmf(np.arange(lo + 1, hi + 1), n, p))]))
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, stats.binom.cdf(np.arange(lo, hi + 1), n, p), rtol=1e-9, atol=1e-12)


def test_the_trade_off_curve_is_the_direct_formula_bit_for_bit_also_in_chunks():
    # tradeoff_from_profile precomputes each profile's lines and forms long α grids in chunks.
    from audit.statistics.tradeoff_curves import dpsgd_privacy_profile, pair_privacy_profile, tradeoff_from_profile

    alpha = np.r_[np.linspace(0.0, 1.0, 5001), 1e-12, 0.999999]
    for profile in (dpsgd_privacy_profile(2.0, 1.0, 4), pair_privacy_profile(1.0, 1e-5)):
        eps, deltas = profile.arrays()
        a = alpha[:, None]
        direct = np.clip(np.maximum(1.0 - deltas - np.exp(eps) * a, np.exp(-eps) * (1.0 - deltas - a)).max(axis=-1),
                         0.0, 1.0)
        np.testing.assert_array_equal(tradeoff_from_profile(profile, alpha), direct)
        assert all(float(tradeoff_from_profile(profile, x)) == value for x, value in zip(alpha[::500], direct[::500]))
