"""The Gaussian-DP audit statistics (audit/statistics/gaussian_dp_audit.py): reference values, null
data, power on Gaussian shifts, and an estimate that does not fall as runs grow."""

import math

import numpy as np
import pytest
from scipy import stats

from audit.statistics.epsilon_bounds import epsilon_from_gdp_mu
from audit.statistics.gaussian_dp_audit import (
    gaussian_dp_audit,
    gaussian_dp_ceiling_mu,
    gaussian_tradeoff,
    gdp_delta_profile,
    most_refuted_profile_pair,
    mu_full_batch_dpsgd,
    runs_needed_gaussian_dp,
)


def test_gdp_conversion_matches_the_hand_computed_reference_values():
    # docs/statistics.md: μ = 1, δ = 1e-5 → ε = 4.38; μ = 2 → 10.0 (Dong, Roth, Su 2019, Cor. 2.13).
    assert epsilon_from_gdp_mu(1.0, 1e-5) == pytest.approx(4.377, abs=2e-3)
    assert epsilon_from_gdp_mu(2.0, 1e-5) == pytest.approx(9.997, abs=2e-3)
    # δ_μ(ε) by hand at μ = 1, ε = 1: Φ(−0.5) − e·Φ(−1.5).
    assert gdp_delta_profile(1.0, 1.0) == pytest.approx(stats.norm.cdf(-0.5) - math.e * stats.norm.cdf(-1.5), rel=1e-9)
    assert gdp_delta_profile(epsilon_from_gdp_mu(1.0, 1e-5), 1.0) == pytest.approx(1e-5, rel=1e-6)


def test_tradeoff_curve_and_full_batch_mu_by_hand():
    # G_1(0.05) = Φ(Φ⁻¹(0.95) − 1) = Φ(0.6449) = 0.7405.
    assert gaussian_tradeoff(0.05, 1.0) == pytest.approx(0.74049, abs=1e-4)
    assert gaussian_tradeoff(0.3, 0.0) == pytest.approx(0.7)  # μ = 0: perfect privacy, FNR = 1 − FPR
    assert mu_full_batch_dpsgd([(2.0, 4)]) == pytest.approx(1.0)
    assert mu_full_batch_dpsgd([(1.0, 1), (2.0, 4)]) == pytest.approx(math.sqrt(2.0))


def test_ceiling_is_a_perfect_attack_and_grows_with_runs():
    u = 1 - 0.025 ** (1 / 80)  # Clopper-Pearson upper bound at 0 errors in 80 runs, α/2 = 0.025
    assert gaussian_dp_ceiling_mu(80, 80, 0.95) == pytest.approx(2 * stats.norm.isf(u), rel=1e-9)
    assert gaussian_dp_ceiling_mu(8000, 8000) > gaussian_dp_ceiling_mu(800, 800)
    n = runs_needed_gaussian_dp(3.0)
    m = n - round(0.2 * n)
    assert gaussian_dp_ceiling_mu(m, m) > 3.0 >= gaussian_dp_ceiling_mu(m - 1, m - 1)


def test_null_data_gives_bound_zero_in_at_least_95_percent_of_200_repeats():
    zero = 0
    for i in range(200):
        rng = np.random.default_rng(1000 + i)
        same = rng.normal(size=400)
        audit = gaussian_dp_audit(same[:200], same[200:], claimed_mu=0.5, delta=1e-5, seed=i)
        zero += audit.mu_lower_bound == 0 and audit.epsilon_gdp == 0 and not audit.refutes_claim
    assert zero >= 190


def test_null_data_gives_a_zero_tail_bound_in_at_least_95_percent_of_200_repeats():
    # The tail rule is chosen on the pilot, bounded on the rest: no leakage → (ε, δ) bound 0.
    zero = 0
    for i in range(200):
        same = np.random.default_rng(2000 + i).normal(size=1000)
        result = gaussian_dp_audit(same[:500], same[500:], claimed_mu=0.5, delta=1e-5, seed=i)
        zero += result.epsilon_lower_bound_tail == 0
    assert zero >= 190


def test_the_tail_rule_bounds_epsilon_well_above_the_equal_error_point_and_below_the_truth():
    # μ = √20/2.688 (q = 1 DP-SGD at ε 8): the (ε, δ) bound lives where FPR is ~1e-4, not at the
    # equal-error point the curve test uses.
    mu = math.sqrt(20) / 2.688
    truth = epsilon_from_gdp_mu(mu, 1e-5)
    for s in range(3):
        rng = np.random.default_rng(s)
        a = gaussian_dp_audit(rng.normal(mu, 1, 20000), rng.normal(0, 1, 20000), claimed_mu=mu, delta=1e-5, seed=s)
        assert a.epsilon_lower_bound_tail > 2 * a.epsilon_lower_bound_clopper_pearson
        assert 0.4 * truth < a.epsilon_lower_bound_tail < truth
        # One of its error rates is in the far tail (either orientation of the (ε, δ) inequality).
        assert min(a.tail_fpr_upper, a.tail_fnr_upper) < 0.01 < min(a.fpr_upper, a.fnr_upper)


def test_a_correct_claim_is_not_refuted_and_a_false_one_is():
    rng = np.random.default_rng(0)
    honest = gaussian_dp_audit(rng.normal(1.0, 1, 4000), rng.normal(0, 1, 4000), claimed_mu=1.0, delta=1e-5)
    assert not honest.refutes_claim and honest.refuted_pair is None
    assert 0.8 < honest.mu_lower_bound <= 1.0
    lying = gaussian_dp_audit(rng.normal(2.0, 1, 4000), rng.normal(0, 1, 4000), claimed_mu=1.0, delta=1e-5)
    assert lying.refutes_claim and lying.mu_lower_bound > 1.0
    pair = lying.refuted_pair
    # The reported pair of the claim's profile is really violated by the point (Kairouz et al. 2015).
    assert pair["delta"] == pytest.approx(gdp_delta_profile(pair["epsilon"], 1.0), rel=1e-6)
    assert (
        min(
            lying.fpr_upper + math.exp(pair["epsilon"]) * lying.fnr_upper,
            lying.fnr_upper + math.exp(pair["epsilon"]) * lying.fpr_upper,
        )
        < 1 - pair["delta"]
    )


def test_refuted_pair_is_none_on_or_above_the_curve():
    assert most_refuted_profile_pair(0.05, float(gaussian_tradeoff(0.05, 1.0)) + 1e-3, 1.0) is None


def test_the_estimate_does_not_fall_as_runs_grow():
    # Issue 11: the old GDP estimate fell from 0.95 to 0.67 of the claim between 10k and 50k runs.
    def mean_ratio(n):
        ratios = []
        for s in range(4):
            rng = np.random.default_rng(s)
            a = gaussian_dp_audit(rng.normal(0.5, 1, n), rng.normal(0, 1, n), claimed_mu=0.5, delta=1e-5, seed=s)
            ratios.append(a.mu_lower_bound / 0.5)
        return np.mean(ratios)

    small, medium, large = mean_ratio(2000), mean_ratio(10000), mean_ratio(50000)
    assert small < medium < large <= 1.0
    assert large > 0.85
