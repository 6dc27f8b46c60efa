"""The fast paths of the statistics equal what they replace (issue 25: faster, same results).

Each check compares a sped-up estimator part with the computation it replaced (the public scipy or
dp_accounting call, or the formula as it was written before), bit for bit, on random and edge-case
arguments: the binomial cdf/sf (`audit.statistics.binomial`) and the one-run p-value on it, the
trade-off test's cdf range and curve, the Gaussian fit's AUC and gaps, the GDP conversion's
log Φ, and the cached PLDs of `audit.statistics.accountants`. (`_full_roc`: tests/test_attack_metrics.py;
the mixed-type distances: tests/test_synthetic_risks.py.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from audit.statistics.binomial import beta_ppf, binom_cdf, binom_cdf_scalar, binom_sf


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


def test_the_clopper_pearson_beta_quantile_is_scipys_bit_for_bit():
    rng = np.random.default_rng(4)
    for _ in range(200):
        n = int(rng.integers(1, 30_000))
        k = rng.integers(0, n + 1, size=int(rng.integers(1, 50)))
        q = float(rng.choice([0.95, 0.975, 0.999, rng.random()]))
        b = np.maximum(n - k, 1)
        np.testing.assert_array_equal(beta_ppf(q, k + 1, b), stats.beta.ppf(q, k + 1, b))
        smooth = (k + 1.0) / (n + 2.0) * 700  # the anticipated evaluation counts: non-integer shapes
        np.testing.assert_array_equal(
            beta_ppf(q, smooth + 1.0, np.maximum(700 - smooth, 1e-9)),
            stats.beta.ppf(q, smooth + 1.0, np.maximum(700 - smooth, 1e-9)),
        )
    for q in (0.0, 1.0):  # the edges go to the wrapper itself
        np.testing.assert_array_equal(beta_ppf(q, [1.0, 3.0], [2.0, 1.0]), stats.beta.ppf(q, [1.0, 3.0], [2.0, 1.0]))


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


@pytest.mark.parametrize(
    ("lo", "hi", "n", "p"),
    [(0, 40, 40, 0.3), (17, 900, 24_000, 0.02), (0, 0, 5, 0.0), (3, 9, 9, 1.0), (1200, 1800, 2000, 0.75)],
)
def test_the_tradeoff_tests_cdf_range_starts_from_scipys_cdf(lo, hi, n, p):
    from audit.statistics.tradeoff_curves import _binomial_cdf_range, _binomial_pmf

    got = _binomial_cdf_range(lo, hi, n, p)
    if 0.0 < p < 1.0:
        start = float(stats.binom.cdf(lo, n, p))
        want = np.minimum(
            1.0, start + np.concatenate([[0.0], np.cumsum(_binomial_pmf(np.arange(lo + 1, hi + 1), n, p))])
        )
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, stats.binom.cdf(np.arange(lo, hi + 1), n, p), rtol=1e-9, atol=1e-12)


def test_the_trade_off_curve_is_the_direct_formula_bit_for_bit_also_in_chunks():
    # tradeoff_from_profile precomputes each profile's lines and forms long α grids in chunks.
    from audit.statistics.tradeoff_curves import dpsgd_privacy_profile, pair_privacy_profile, tradeoff_from_profile

    alpha = np.r_[np.linspace(0.0, 1.0, 5001), 1e-12, 0.999999]
    for profile in (dpsgd_privacy_profile(2.0, 1.0, 4), pair_privacy_profile(1.0, 1e-5)):
        eps, deltas = profile.arrays()
        a = alpha[:, None]
        direct = np.clip(
            np.maximum(1.0 - deltas - np.exp(eps) * a, np.exp(-eps) * (1.0 - deltas - a)).max(axis=-1), 0.0, 1.0
        )
        np.testing.assert_array_equal(tradeoff_from_profile(profile, alpha), direct)
        assert all(float(tradeoff_from_profile(profile, x)) == value for x, value in zip(alpha[::500], direct[::500]))


def _auc_and_gaps_as_before(scores, members, mu=None):
    # gdp_fit's statistics as written before the fast path: rankdata for the AUC, a stable argsort
    # and Φ⁻¹ at every cut for the largest vertical gap (Dong, Roth, Su 2019, arXiv 1905.02383).
    from audit.statistics.gdp_fit import _mu_from_auc

    n1 = int(members.sum())
    n0 = members.size - n1
    ranks = stats.rankdata(scores, axis=1)
    auc = (ranks[:, members].sum(axis=1) - n1 * (n1 + 1) / 2) / (n1 * n0)
    mu = _mu_from_auc(auc) if mu is None else mu
    order = np.argsort(scores, axis=1, kind="stable")
    sorted_members = members[order]
    s_sorted = np.take_along_axis(scores, order, axis=1)
    valid = np.ones_like(s_sorted, dtype=bool)
    valid[:, :-1] = s_sorted[:, 1:] > s_sorted[:, :-1]
    fnr = np.cumsum(sorted_members, axis=1) / n1
    fpr = 1.0 - np.cumsum(~sorted_members, axis=1) / n0
    fitted = special.ndtr(special.ndtri(np.clip(1.0 - fpr, 0.0, 1.0)) - mu[:, None])
    return auc, mu, np.where(valid, np.abs(fnr - fitted), 0.0).max(axis=1)


@pytest.mark.parametrize("decimals", [None, 1])
def test_the_gaussian_fits_auc_and_gaps_are_the_rankdata_and_stable_sort_values_exactly(decimals):
    from audit.statistics.gdp_fit import _auc_rows, _max_gaps, _mu_from_auc, _sorted_rows

    rng = np.random.default_rng(3)
    for n in (25, 400, 1001):
        members = rng.random(n) < 0.4
        members[:2] = (True, False)
        scores = rng.standard_normal((30, n)) + 0.8 * members
        if decimals is not None:  # ties inside and across the classes
            scores[::2] = np.round(scores[::2], decimals)
        sorted_members, group_end = _sorted_rows(scores, members)
        auc = _auc_rows(sorted_members, group_end, scores, members)
        mu = _mu_from_auc(auc)
        want_auc, want_mu, want_gaps = _auc_and_gaps_as_before(scores, members)
        np.testing.assert_array_equal(auc, want_auc)
        np.testing.assert_array_equal(mu, want_mu)
        np.testing.assert_array_equal(_max_gaps(sorted_members, group_end, members, mu), want_gaps)


def test_the_gdp_conversions_log_ndtr_is_stats_norm_logcdf():
    # _gdp_delta_gap calls special.log_ndtr, the function stats.norm.logcdf evaluates; ε(μ, δ) and
    # μ(ε, δ) (Dong, Roth, Su 2019, Cor. 2.13) are root searches over it.
    from audit.statistics.gdp_conversions import _gdp_delta_gap

    for eps in (0.0, 0.3, 2.0, 9.0, 80.0):
        for mu in (0.01, 0.5, 1.0, 4.0, 30.0):
            for log_delta in (math.log(1e-5), math.log(0.1)):
                a = stats.norm.logcdf(-eps / mu + mu / 2)
                b = eps + stats.norm.logcdf(-eps / mu - mu / 2)
                want = -np.inf if b >= a else float(a + np.log1p(-np.exp(b - a)) - log_delta)
                assert _gdp_delta_gap(eps, mu, log_delta) == want


def test_cached_single_step_plds_give_the_fresh_computations_epsilon():
    # accountants reuses one step's PLD across T (and _pld_bounds_at per (event, δ, h)); the ε must be
    # the one a fresh dp_accounting PLD gives (Doroshenko et al. 2022, arXiv 2207.04380).
    from dp_accounting.pld import privacy_loss_distribution as pld

    from audit.statistics.accountants import DPSGDEvent, _pld_bounds_at

    for sigma, q, steps in ((1.0, 0.01, 100), (1.0, 0.01, 300), (2.0, 0.05, 50)):
        fresh = tuple(
            float(
                pld.from_gaussian_mechanism(
                    sigma,
                    sampling_prob=q,
                    pessimistic_estimate=pessimistic,
                    value_discretization_interval=1e-3,
                    use_connect_dots=pessimistic,
                )
                .self_compose(steps)
                .get_epsilon_for_delta(1e-5)
            )
            for pessimistic in (False, True)
        )
        assert _pld_bounds_at(DPSGDEvent(sigma, q, steps), 1e-5, 1e-3) == fresh
        assert _pld_bounds_at(DPSGDEvent(sigma, q, steps), 1e-5, 1e-3) == fresh  # from the cache
