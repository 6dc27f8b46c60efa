"""Trade-off curves of a claim (f-DP) and the profile test: reference values, soundness on null data."""

import math

import numpy as np
import pytest
from scipy import stats

from audit.statistics.epsilon_bounds import clopper_pearson_upper
from audit.statistics.tradeoff_curves import (
    HIGH,
    ProfileRule,
    best_profile_rule,
    curve_slope,
    dpsgd_privacy_profile,
    gdp_tradeoff,
    pair_privacy_profile,
    profile_ceiling,
    profile_test,
    refute_point,
    tangent_test_ceiling,
    tangent_test_p_value,
    tradeoff_from_profile,
)

ALPHAS = np.array([0.001, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9])


@pytest.mark.parametrize("sigma, steps", [(1.0, 4), (2.0, 1), (4.5, 20)])
def test_without_subsampling_the_claimed_curve_is_the_gaussian_curve_of_mu_sqrt_t_over_sigma(sigma, steps):
    # q = 1: T Gaussian mechanisms of sensitivity 1 compose to μ-GDP with μ = √T/σ (Dong, Roth, Su
    # 2019, Corollary 3.3), whose profile is exact; the PLD grid is a lower envelope within 1e-3.
    curve = tradeoff_from_profile(dpsgd_privacy_profile(sigma, 1.0, steps), ALPHAS)
    exact = gdp_tradeoff(math.sqrt(steps) / sigma, ALPHAS)
    assert np.all(curve <= exact + 1e-9)
    assert np.max(exact - curve) < 1e-3


def test_gdp_curve_reference_values():
    # G_1(0.05) = Φ(Φ⁻¹(0.95) − 1) = Φ(0.6449) = 0.7405; G_0 is the identity line 1 − α.
    assert gdp_tradeoff(1.0, 0.05) == pytest.approx(0.740489, abs=1e-6)
    assert np.allclose(gdp_tradeoff(0.0, ALPHAS), 1 - ALPHAS)


def test_a_bare_epsilon_delta_pair_gives_its_two_lines():
    # f_{ε,δ}(α) = max(0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α)) (Dong, Roth, Su 2019, Eq. 2.3).
    eps, delta = 1.0, 1e-5
    f = tradeoff_from_profile(pair_privacy_profile(eps, delta), ALPHAS)
    expected = np.maximum.reduce([np.zeros_like(ALPHAS), 1 - delta - math.e * ALPHAS, (1 - delta - ALPHAS) / math.e])
    assert np.allclose(f, expected)


def test_the_subsampled_claim_of_the_planted_bugs_is_close_to_gdp_in_the_middle():
    # σ 4.5, q 0.25, T 20: the CLT limit μ = q√(T(e^{1/σ²} − 1)) = 0.250; at moderate α the curve
    # matches G_0.25 to 2e-3 (the tails differ, which is why a single (ε, δ = 1e-5) point is hard).
    f = tradeoff_from_profile(dpsgd_privacy_profile(4.5, 0.25, 20), np.array([0.2, 0.3, 0.5]))
    assert np.allclose(f, gdp_tradeoff(0.25, np.array([0.2, 0.3, 0.5])), atol=2e-3)


def test_refute_point_names_a_pair_the_point_violates():
    profile = dpsgd_privacy_profile(4.5, 0.25, 20)
    assert refute_point(profile, 0.3, 0.62) is None  # above the curve (f(0.3) ≈ 0.608)
    refuted = refute_point(profile, 0.3, 0.55)
    eps, delta = refuted["epsilon"], refuted["delta"]
    # The violated pair: 1 − δ − e^ε·FPR > FNR or e^{−ε}(1 − δ − FPR) > FNR.
    assert max(1 - delta - math.exp(eps) * 0.3, math.exp(-eps) * (1 - delta - 0.3)) > 0.55
    assert refuted["margin"] == pytest.approx(float(tradeoff_from_profile(profile, 0.3)) - 0.55)


def _dirac_world(rng, n, sigma, q, steps, inserted):
    """Final observation of the worst-case pair of the subsampled Gaussian: Σ_t (b_t + σ z_t)."""
    b = rng.random((n, steps)) < q if inserted else np.zeros((n, steps))
    return (b + sigma * rng.normal(size=(n, steps))).sum(axis=1)


@pytest.mark.slow  # ~13 s of CPU: 200 repeats of the trade-off-curve audit
def test_a_mechanism_exactly_at_its_claim_is_refuted_in_at_most_5_percent_of_200_repeats():
    # q = 1 makes the Gaussian shift the exact worst case of the claim (μ = √T/σ): the curve is
    # met with equality, so this is the hardest null there is for the test.
    sigma, steps, n = 2.0, 4, 300
    profile = dpsgd_privacy_profile(sigma, 1.0, steps)
    rng = np.random.default_rng(0)
    refuted = 0
    for _ in range(200):
        sel_in, sel_out = (_dirac_world(rng, 200, sigma, 1.0, steps, v) for v in (True, False))
        rule = best_profile_rule(sel_in, sel_out, profile, n, n)[0]
        ev_in, ev_out = (_dirac_world(rng, n, sigma, 1.0, steps, v) for v in (True, False))
        refuted += profile_test(ev_in, ev_out, rule, profile)["refuted"]
    assert refuted <= 10


def test_a_subsampled_mechanism_at_its_claim_is_not_refuted_and_one_at_4x_steps_is():
    sigma, q, steps, n = 4.5, 0.25, 20, 5000
    profile = dpsgd_privacy_profile(sigma, q, steps)
    rng = np.random.default_rng(1)
    # A fixed, pre-chosen rule (threshold at the out-world's median, the curve's slope there): no
    # selection data needed.
    rule = ProfileRule(0.0, HIGH, float(curve_slope(profile, 0.5)))
    honest = profile_test(
        _dirac_world(rng, n, sigma, q, steps, True), _dirac_world(rng, n, sigma, q, steps, False), rule, profile
    )
    assert not honest["refuted"]
    leaky = profile_test(
        _dirac_world(rng, n, sigma, q, 4 * steps, True), _dirac_world(rng, n, sigma, q, 4 * steps, False), rule, profile
    )
    assert (
        leaky["refuted"] and leaky["supporting_pair"]["epsilon"] < 1.0
    )  # below the curve at moderate ε', not the corner


def test_the_ceiling_says_whether_a_perfect_attack_could_refute_the_profile():
    profile = dpsgd_privacy_profile(4.5, 0.25, 20)
    assert not profile_ceiling(profile, 2, 2)["refutable"]  # CP bounds of 2 trials are ≈ 0.84
    assert profile_ceiling(profile, 50, 50)["refutable"]
    assert not tangent_test_ceiling(profile, 2, 2)["refutable"]
    assert tangent_test_ceiling(profile, 50, 50)["refutable"]


def test_the_perfect_attacks_p_value_is_the_largest_chance_of_no_error_on_the_curve():
    # No error at all has probability (1 − a)^n0 · (1 − f(a))^n1 at true rates (a, f(a)); the
    # p-value is its supremum, here checked on a grid of 100 001 FPRs (an independent maximisation).
    profile = dpsgd_privacy_profile(4.5, 0.25, 20)
    a = np.linspace(0.0, 1.0, 100001)
    for n in (3, 20):
        brute = float(np.max((1 - a) ** n * (1 - tradeoff_from_profile(profile, a)) ** n))
        p = tangent_test_ceiling(profile, n, n)["perfect_attack_p_value"]
        assert brute <= p <= brute * 1.011 + 1e-12  # within the 1 % (or 1e-12) tolerance


def _brute_force_p_value(fn, n1, fp, n0, slope, profile, grid):
    """sup over a grid of FPRs a of P(FN'/n1 + s·FP'/n0 ≤ observed) at (a, f(a)), by summing the
    full table of both binomials (an independent implementation, for small n)."""
    observed = fn / n1 + slope * fp / n0
    fn_grid, fp_grid = np.meshgrid(np.arange(n1 + 1), np.arange(n0 + 1), indexing="ij")
    below = fn_grid / n1 + slope * fp_grid / n0 <= observed + 1e-12
    best = 0.0
    for a, b in zip(grid, tradeoff_from_profile(profile, grid)):
        table = np.outer(stats.binom.pmf(np.arange(n1 + 1), n1, b), stats.binom.pmf(np.arange(n0 + 1), n0, a))
        best = max(best, float(table[below].sum()))
    return best


@pytest.mark.parametrize("fn, fp", [(9, 2), (6, 3), (12, 7), (3, 0)])
def test_the_curve_tests_p_value_matches_a_brute_force_supremum(fn, fp):
    profile = dpsgd_privacy_profile(2.0, 1.0, 4)  # exactly G_1: a curved null
    n1, n0, slope = 20, 25, float(curve_slope(profile, 0.2))
    brute = _brute_force_p_value(fn, n1, fp, n0, slope, profile, np.linspace(0.0, 1.0, 4001))
    p = tangent_test_p_value(fn, n1, fp, n0, slope, profile)
    assert brute - 1e-9 <= p <= brute * 1.011 + 1e-9  # a bound, within its 1 % tolerance


@pytest.mark.parametrize(
    "profile", [dpsgd_privacy_profile(4.5, 0.25, 20), pair_privacy_profile(1.0, 1e-5)], ids=["dpsgd", "pair"]
)
def test_counts_drawn_on_the_claims_curve_are_refuted_in_at_most_5_percent_of_400_repeats(profile):
    # True rates exactly on the curve (the hardest null), at four FPRs, with the slope there.
    rng = np.random.default_rng(7)
    n = 2000
    for a in (0.05, 0.2, 0.5, 0.8):
        b, slope = float(tradeoff_from_profile(profile, a)), float(curve_slope(profile, a))
        refuted = sum(
            tangent_test_p_value(rng.binomial(n, b), n, rng.binomial(n, a), n, slope, profile, alpha=0.05) <= 0.05
            for _ in range(400)
        )
        assert refuted <= 20 + 2 * math.sqrt(400 * 0.05 * 0.95), (a, refuted)  # α = 5 % plus two SEs


def test_the_weighted_test_refutes_a_gap_that_two_clopper_pearson_bounds_miss():
    # 24 000 trials a side, errors 0.007 below the claim's curve at FPR 0.1: the two one-sided
    # Clopper-Pearson bounds at α/2 each need a gap of ≈ 0.010 there; the exact test of
    # FNR + s·FPR measures the distance once (the gap a batch reused at every step leaves is ≈ 0.01).
    profile = dpsgd_privacy_profile(4.5, 0.25, 20)
    n, fpr = 24000, 0.1
    fp, fn = round(n * fpr), round(n * (float(tradeoff_from_profile(profile, fpr)) - 0.007))
    assert refute_point(profile, clopper_pearson_upper(fp, n, 0.025), clopper_pearson_upper(fn, n, 0.025)) is None
    assert tangent_test_p_value(fn, n, fp, n, float(curve_slope(profile, fpr)), profile) < 0.05


def test_the_curves_slope_is_the_derivative():
    profile = dpsgd_privacy_profile(4.5, 0.25, 20)
    for a in (0.05, 0.3, 0.7):
        numeric = (
            -(float(tradeoff_from_profile(profile, a + 1e-6)) - float(tradeoff_from_profile(profile, a - 1e-6))) / 2e-6
        )
        assert float(curve_slope(profile, a)) == pytest.approx(numeric, rel=2e-2)
    assert float(curve_slope(pair_privacy_profile(1.0, 1e-5), 0.1)) == pytest.approx(math.e)


def test_rule_choice_uses_moderate_fprs_and_the_right_direction():
    rng = np.random.default_rng(2)
    s_in, s_out = rng.normal(1.0, 1, 500), rng.normal(0.0, 1, 500)
    profile = dpsgd_privacy_profile(4.5, 0.25, 20)
    threshold, direction, slope = best_profile_rule(s_in, s_out, profile, 2000, 2000)[0]
    assert direction == "member if score >= threshold"
    fpr = np.mean(s_out >= threshold)
    assert 0.02 <= fpr <= 0.98 and slope == pytest.approx(float(curve_slope(profile, fpr)))
    threshold, direction, _ = best_profile_rule(-s_in, -s_out, profile, 2000, 2000)[0]
    assert direction == "member if score < threshold"


def test_bad_rates_are_refused():
    with pytest.raises(ValueError):
        refute_point(pair_privacy_profile(1.0, 1e-5), 1.2, 0.1)
    with pytest.raises(ValueError):
        dpsgd_privacy_profile(0.0, 0.5, 3)


def test_the_claims_profile_is_the_accountants_when_known_else_the_stated_pair():
    from audit.statistics.tradeoff_curves import claim_profile, pair_privacy_profile

    assert claim_profile(1.0, 1e-5, (4.5, 0.25, 20)) == dpsgd_privacy_profile(4.5, 0.25, 20)
    assert claim_profile(1.0, 1e-5) == pair_privacy_profile(1.0, 1e-5)
    assert claim_profile(None, 1e-5) is None
