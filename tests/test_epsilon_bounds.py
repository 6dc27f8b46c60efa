"""Claims about the ε lower bounds in audit/statistics/epsilon_bounds.py (reference values: docs/statistics.md)."""

from __future__ import annotations

import inspect
import json
import math

import numpy as np
import pytest
from scipy import stats

from audit.statistics.epsilon_bounds import (
    Bonferroni,
    EpsilonLowerBound,
    HeldOut,
    _held_out_split,
    clopper_pearson_upper,
    epsilon_estimate_gdp,
    epsilon_from_error_rates,
    epsilon_from_gdp_mu,
    epsilon_lower_bound_clopper_pearson,
    epsilon_lower_bound_from_counts,
    epsilon_lower_bound_one_run,
    gdp_mu_lower_bound,
    one_run_epsilon_from_counts,
    one_run_p_value,
)
from audit.statistics.estimators import ESTIMATORS

DELTA = 1e-5


def _coin_flip_candidates(rng, m: int, shift: float):
    """m candidates, each a member by a fair coin flip; member scores shifted up by `shift`."""
    members = rng.random(m) < 0.5
    return rng.normal(size=m) + shift * members, members


# --------------------------------------------------------------------------------------------------
# Clopper-Pearson building blocks and docs/statistics.md ceilings
# --------------------------------------------------------------------------------------------------


def test_clopper_pearson_upper_has_the_closed_form_at_zero_successes_and_is_one_at_n():
    # P[Bin(n, p) = 0] = (1 − p)^n = α  ⇒  p̄ = 1 − α^(1/n).
    assert clopper_pearson_upper(0, 100, 0.025) == pytest.approx(1 - 0.025 ** (1 / 100), rel=1e-12)
    assert clopper_pearson_upper(100, 100, 0.025) == 1.0
    # Coverage definition: P[Bin(n, p̄) ≤ k] = α.
    p_bar = clopper_pearson_upper(7, 50, 0.05)
    assert stats.binom.cdf(7, 50, p_bar) == pytest.approx(0.05, rel=1e-9)


@pytest.mark.parametrize("delta", [0.0, DELTA])
def test_perfect_attack_with_100_per_side_caps_at_3_28(delta):
    assert round(epsilon_lower_bound_from_counts(0, 100, 0, 100, delta, 0.95), 2) == 3.28


@pytest.mark.parametrize("delta", [0.0, DELTA])
def test_perfect_attack_with_1000_per_side_caps_at_5_60(delta):
    assert round(epsilon_lower_bound_from_counts(0, 1000, 0, 1000, delta, 0.95), 2) == 5.60


def test_epsilon_from_error_rates_takes_the_better_of_both_ratios():
    assert epsilon_from_error_rates(0.05, 0.1, 0.0) == pytest.approx(math.log(0.9 / 0.05))
    assert epsilon_from_error_rates(0.1, 0.05, 0.0) == pytest.approx(math.log(0.9 / 0.05))
    assert epsilon_from_error_rates(0.05, 0.1, 0.01) == pytest.approx(math.log(0.89 / 0.05))


def test_epsilon_from_error_rates_is_zero_without_evidence_and_inf_for_zero_error():
    assert epsilon_from_error_rates(0.5, 0.5, 0.0) == 0.0  # coin flipping
    assert epsilon_from_error_rates(0.6, 0.7, 0.0) == 0.0  # ratios below 1 floor at 0
    assert epsilon_from_error_rates(1.0, 1.0, 0.0) == 0.0  # numerators ≤ 0
    assert epsilon_from_error_rates(0.0, 0.5, 0.0) == math.inf  # only as a pure function


# --------------------------------------------------------------------------------------------------
# One run (Steinke, Nasr, Jagielski 2023): docs/statistics.md reference values, m = 1000, α = 0.05
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "r, v, delta, expected",
    [
        (100, 100, 0.0, 3.49),
        (100, 100, DELTA, 3.47),
        (100, 90, DELTA, 1.63),
        (600, 600, 0.0, 5.30),  # at δ = 1e-5 this is 5.27; docs/statistics.md's 5.30 is the δ = 0 value
        (1000, 700, DELTA, 0.73),
    ],
)
def test_one_run_bound_matches_stats_md_reference(r, v, delta, expected):
    assert round(one_run_epsilon_from_counts(1000, r, v, delta, alpha=0.05), 2) == expected


def test_one_run_bound_is_where_the_p_value_crosses_alpha():
    eps = one_run_epsilon_from_counts(1000, 100, 90, DELTA, alpha=0.05)
    assert one_run_p_value(eps, 1000, 100, 90, DELTA) == pytest.approx(0.05, abs=1e-6)
    assert one_run_p_value(eps - 0.01, 1000, 100, 90, DELTA) < 0.05 < one_run_p_value(eps + 0.01, 1000, 100, 90, DELTA)


def test_one_run_p_value_at_zero_epsilon_and_delta_is_a_fair_coin_binomial_tail():
    assert one_run_p_value(0.0, 1000, 100, 60, 0.0) == pytest.approx(stats.binom.sf(59, 100, 0.5))


def test_one_run_bound_is_zero_when_guesses_are_no_better_than_coin_flips():
    assert one_run_epsilon_from_counts(1000, 100, 50, DELTA) == 0.0
    assert one_run_epsilon_from_counts(1000, 0, 0, DELTA) == 0.0


# --------------------------------------------------------------------------------------------------
# Gaussian DP
# --------------------------------------------------------------------------------------------------


def test_gdp_mu_1_at_delta_1e_5_is_epsilon_4_38():
    assert round(epsilon_from_gdp_mu(1.0, DELTA), 2) == 4.38


def test_gdp_mu_2_at_delta_1e_5_is_epsilon_10_0():
    assert round(epsilon_from_gdp_mu(2.0, DELTA), 1) == 10.0
    assert epsilon_from_gdp_mu(2.0, DELTA) == pytest.approx(10.0, abs=0.005)


def test_gdp_epsilon_solves_the_dong_roth_su_conversion():
    mu = 1.5
    eps = epsilon_from_gdp_mu(mu, DELTA)
    delta = stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
    assert delta == pytest.approx(DELTA, rel=1e-6)


def test_gdp_mu_zero_gives_epsilon_zero_and_mu_is_floored_at_zero():
    assert epsilon_from_gdp_mu(0.0, DELTA) == 0.0
    assert gdp_mu_lower_bound(0.5, 0.5) == 0.0
    assert gdp_mu_lower_bound(0.7, 0.6) == 0.0
    assert gdp_mu_lower_bound(0.05, 0.1) == pytest.approx(stats.norm.ppf(0.95) - stats.norm.ppf(0.1))


# --------------------------------------------------------------------------------------------------
# Score-based estimators: calibration on null data, power on a strong attack
# --------------------------------------------------------------------------------------------------

NULL_REPEATS = 200


def _null_positive_rate(estimator, **kwargs) -> float:
    rng = np.random.default_rng(12345)
    positives = 0
    for _ in range(NULL_REPEATS):
        scores, members = _coin_flip_candidates(rng, 1000, shift=0.0)
        positives += estimator(scores, members, DELTA, 0.95, **kwargs).epsilon > 0
    return positives / NULL_REPEATS


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_null_scores_give_zero_bound_in_at_least_95_percent_of_repeats(name):
    assert _null_positive_rate(ESTIMATORS[name]) <= 0.05


@pytest.mark.parametrize("estimator", [epsilon_lower_bound_clopper_pearson, epsilon_estimate_gdp])
def test_null_scores_give_zero_bound_in_at_least_95_percent_of_repeats_under_bonferroni(estimator):
    assert _null_positive_rate(estimator, strategy=Bonferroni()) <= 0.05


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_well_separated_scores_give_a_clearly_positive_bound(name):
    rng = np.random.default_rng(7)
    scores, members = _coin_flip_candidates(rng, 1000, shift=5.0)
    result = ESTIMATORS[name](scores, members, DELTA, 0.95)
    assert isinstance(result, EpsilonLowerBound)
    assert result.method == name
    assert result.confidence == 0.95
    assert result.epsilon > 3.0


def test_an_attack_with_backwards_scores_is_caught_by_the_mirrored_rule():
    rng = np.random.default_rng(8)
    scores, members = _coin_flip_candidates(rng, 1000, shift=-5.0)
    result = epsilon_lower_bound_clopper_pearson(scores, members, DELTA)
    assert result.epsilon > 3.0
    assert result.details["direction"] == "member if score < threshold"


def test_only_gdp_is_marked_unsound_and_labelled_an_estimate():
    rng = np.random.default_rng(9)
    scores, members = _coin_flip_candidates(rng, 400, shift=1.0)
    results = {name: f(scores, members, DELTA, 0.95) for name, f in ESTIMATORS.items()}
    assert {name: r.sound for name, r in results.items()} == {
        "clopper_pearson": True,
        "one_run": True,
        "gdp": False,
    }
    assert results["gdp"].details["quantity"] == "estimate (assumes GDP)"
    assert "estimate (assumes GDP)" in epsilon_estimate_gdp.__doc__


def test_details_are_json_serialisable():
    rng = np.random.default_rng(10)
    scores, members = _coin_flip_candidates(rng, 400, shift=1.0)
    for f in ESTIMATORS.values():
        json.dumps(f(scores, members, DELTA, 0.95).details, allow_nan=False)
    for f in (epsilon_lower_bound_clopper_pearson, epsilon_estimate_gdp):
        json.dumps(f(scores, members, DELTA, strategy=Bonferroni()).details, allow_nan=False)


def test_registry_estimators_all_take_scores_members_delta_confidence():
    assert set(ESTIMATORS) == {"clopper_pearson", "one_run", "gdp"}
    for f in ESTIMATORS.values():
        assert list(inspect.signature(f).parameters)[:4] == [
            "scores",
            "members",
            "delta",
            "confidence",
        ]


def test_estimators_cite_their_papers_by_arxiv_id():
    assert "2006.07709" in epsilon_lower_bound_clopper_pearson.__doc__
    assert "2101.04535" in epsilon_lower_bound_clopper_pearson.__doc__
    assert "2305.08846" in epsilon_lower_bound_one_run.__doc__
    assert "2305.08846" in one_run_p_value.__doc__
    assert "2302.07956" in epsilon_estimate_gdp.__doc__
    assert "1905.02383" in epsilon_estimate_gdp.__doc__


# --------------------------------------------------------------------------------------------------
# Threshold strategies: the bound never sees the scores that chose the threshold
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("estimator", [epsilon_lower_bound_clopper_pearson, epsilon_estimate_gdp])
def test_held_out_bound_counts_only_the_evaluation_half(estimator):
    rng = np.random.default_rng(11)
    scores, members = _coin_flip_candidates(rng, 1001, shift=2.0)
    strategy = HeldOut(fraction=0.5, seed=3)
    d = estimator(scores, members, DELTA, strategy=strategy).details
    sel, ev = _held_out_split(members, strategy)
    assert np.intersect1d(sel, ev).size == 0 and sel.size + ev.size == scores.size
    assert d["n_members"] + d["n_nonmembers"] == d["n_evaluation"] == ev.size
    n_members = int(members.sum())
    assert d["n_selection"] == sel.size == round(0.5 * n_members) + round(0.5 * (1001 - n_members))
    # The threshold is one of the selection scores, and the counts are recomputable on `ev` alone.
    assert d["threshold"] in scores[sel]
    predicted = scores[ev] >= d["threshold"]
    if d["direction"] == "member if score < threshold":
        predicted = ~predicted
    assert d["false_positives"] == int((predicted & ~members[ev]).sum())
    assert d["false_negatives"] == int((~predicted & members[ev]).sum())


def test_held_out_choice_of_threshold_ignores_the_evaluation_scores():
    rng = np.random.default_rng(12)
    scores, members = _coin_flip_candidates(rng, 600, shift=2.0)
    strategy = HeldOut()
    _, ev = _held_out_split(members, strategy)
    scrambled = scores.copy()
    scrambled[ev] = rng.permutation(scrambled[ev])
    before = epsilon_lower_bound_clopper_pearson(scores, members, DELTA, strategy=strategy)
    after = epsilon_lower_bound_clopper_pearson(scrambled, members, DELTA, strategy=strategy)
    assert before.details["threshold"] == after.details["threshold"]
    assert after.epsilon < before.epsilon


def test_held_out_split_is_stratified_and_seeded():
    members = np.r_[np.ones(30, bool), np.zeros(70, bool)]
    sel, _ = _held_out_split(members, HeldOut(fraction=0.2, seed=1))
    assert members[sel].sum() == 6 and (~members[sel]).sum() == 14
    np.testing.assert_array_equal(sel, _held_out_split(members, HeldOut(fraction=0.2, seed=1))[0])
    assert not np.array_equal(sel, _held_out_split(members, HeldOut(fraction=0.2, seed=2))[0])


def test_bonferroni_splits_alpha_over_both_rates_directions_and_thresholds():
    rng = np.random.default_rng(13)
    scores, members = _coin_flip_candidates(rng, 1000, shift=3.0)
    result = epsilon_lower_bound_clopper_pearson(scores, members, DELTA, 0.95, strategy=Bonferroni(max_thresholds=50))
    d = result.details
    assert d["n_thresholds"] == 50 and d["n_rules_tested"] == 100
    assert d["alpha_per_rate"] == pytest.approx(0.05 / (2 * 100))
    assert d["n_members"] + d["n_nonmembers"] == scores.size
    # The same counts without the correction would claim more: the correction is not free.
    uncorrected = epsilon_lower_bound_from_counts(
        d["false_positives"], d["n_nonmembers"], d["false_negatives"], d["n_members"], DELTA
    )
    assert 0 < result.epsilon < uncorrected


# --------------------------------------------------------------------------------------------------
# One-run estimator from scores
# --------------------------------------------------------------------------------------------------


def test_one_run_chooses_its_rule_on_a_pilot_and_tests_once_on_the_rest():
    rng = np.random.default_rng(14)
    scores, members = _coin_flip_candidates(rng, 1000, shift=5.0)
    result = epsilon_lower_bound_one_run(scores, members, DELTA, 0.95)
    d = result.details
    assert (d["m_pilot"], d["m_eval"]) == (300, 700)
    assert d["alpha_each"] == pytest.approx(0.05)  # one test: nothing paid for the search
    assert d["r"] == d["k_plus"] + d["k_minus"] > 0
    # The recorded guesses, recounted by hand on the evaluation part, give the same counts and bound.
    evaluation = np.sort(np.random.default_rng(0).permutation(1000)[300:])
    s, m = scores[evaluation], members[evaluation]
    guess_in = s >= d["threshold_in"] if d["threshold_in"] is not None else np.zeros(s.size, bool)
    guess_out = (s <= d["threshold_out"]) & ~guess_in if d["threshold_out"] is not None else np.zeros(s.size, bool)
    assert int(guess_in.sum() + guess_out.sum()) == d["r"]
    assert int(m[guess_in].sum() + (~m[guess_out]).sum()) == d["v"]
    assert result.epsilon == pytest.approx(one_run_epsilon_from_counts(700, d["r"], d["v"], DELTA, alpha=0.05))


def test_one_run_never_lets_input_order_split_tied_scores():
    # Members listed first, every score tied: a stable sort would "guess" perfectly.
    members = np.r_[np.ones(500, bool), np.zeros(500, bool)]
    result = epsilon_lower_bound_one_run(np.zeros(1000), members, DELTA)
    assert result.epsilon == 0.0
    # A tie group is guessed whole or not at all: never "members first, so guess them".
    assert result.details["r"] in (0, result.details["m_eval"])


def test_one_run_refuses_membership_that_cannot_be_fair_coin_flips():
    scores = np.arange(1100.0)
    members = np.r_[np.ones(100, bool), np.zeros(1000, bool)]
    with pytest.raises(ValueError, match=r"^members\b.*coin"):
        epsilon_lower_bound_one_run(scores, members, DELTA)


# --------------------------------------------------------------------------------------------------
# Bad arguments
# --------------------------------------------------------------------------------------------------

S, M = np.arange(20.0), np.arange(20) % 2 == 0


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: clopper_pearson_upper(5, 4, 0.05), "k"),
        (lambda: clopper_pearson_upper(0, 0, 0.05), "n"),
        (lambda: clopper_pearson_upper(1, 10, 1.0), "alpha"),
        (lambda: clopper_pearson_upper(1.5, 10, 0.05), "k"),
        (lambda: epsilon_from_error_rates(1.2, 0.1, 0.0), "fpr_upper"),
        (lambda: epsilon_from_error_rates(0.1, -0.1, 0.0), "fnr_upper"),
        (lambda: epsilon_from_error_rates(0.1, 0.1, 1.0), "delta"),
        (lambda: epsilon_lower_bound_from_counts(11, 10, 0, 10, DELTA), "false_positives"),
        (lambda: epsilon_lower_bound_from_counts(0, 10, 11, 10, DELTA), "false_negatives"),
        (lambda: epsilon_lower_bound_from_counts(0, 0, 0, 10, DELTA), "n_nonmembers"),
        (lambda: epsilon_lower_bound_from_counts(0, 10, 0, 10, DELTA, 1.5), "confidence"),
        (lambda: one_run_p_value(-1.0, 10, 5, 5, DELTA), "epsilon"),
        (lambda: one_run_epsilon_from_counts(10, 11, 5, DELTA), "r"),
        (lambda: one_run_epsilon_from_counts(10, 5, 6, DELTA), "v"),
        (lambda: one_run_epsilon_from_counts(10, 5, 5, DELTA, alpha=0.0), "alpha"),
        (lambda: epsilon_from_gdp_mu(-1.0, DELTA), "mu"),
        (lambda: epsilon_from_gdp_mu(1.0, -DELTA), "delta"),
        (lambda: HeldOut(fraction=1.0), "fraction"),
        (lambda: Bonferroni(max_thresholds=0), "max_thresholds"),
        (lambda: epsilon_lower_bound_clopper_pearson(S, M, DELTA, strategy="held_out"), "strategy"),
        (lambda: epsilon_lower_bound_clopper_pearson(S, M[:-1], DELTA), "members"),
        (lambda: epsilon_estimate_gdp(np.r_[S[:-1], np.nan], M, DELTA), "scores"),
        (lambda: epsilon_estimate_gdp(S, M, 2.0), "delta"),
        (lambda: epsilon_lower_bound_one_run(S, M, DELTA, pilot_fraction=0), "pilot_fraction"),
        (lambda: epsilon_lower_bound_one_run(S, np.ones(20), DELTA), "members"),
        (lambda: epsilon_lower_bound_clopper_pearson(S[:3], [1, 0, 0], DELTA), "members"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        call()


def test_the_gdp_estimate_rises_toward_the_truth_as_runs_grow_instead_of_falling():
    # Exactly Gaussian scores (μ = 1 ⇒ ε = 4.38 at δ = 1e-5). Choosing the threshold for the width
    # the held-out half will have keeps the estimate from falling as runs grow (issue 11).
    from audit.statistics.epsilon_bounds import HeldOut, epsilon_estimate_gdp, epsilon_from_gdp_mu

    truth = epsilon_from_gdp_mu(1.0, 1e-5)
    means = []
    for n in (1000, 8000):
        values = []
        for rep in range(3):
            rng = np.random.default_rng(rep)
            scores = np.r_[rng.normal(1.0, 1.0, n), rng.normal(0.0, 1.0, n)]
            members = np.r_[np.ones(n, bool), np.zeros(n, bool)]
            values.append(epsilon_estimate_gdp(scores, members, 1e-5, strategy=HeldOut(0.5, rep)).epsilon)
        assert max(values) <= truth
        means.append(np.mean(values))
    assert means[1] > means[0] > 0


def test_the_gdp_estimate_on_null_scores_is_zero_in_at_least_95_percent_of_repeats():
    from audit.statistics.epsilon_bounds import HeldOut, epsilon_estimate_gdp

    members = np.r_[np.ones(200, bool), np.zeros(200, bool)]
    estimates = [
        epsilon_estimate_gdp(np.random.default_rng(r).normal(size=400), members, 1e-5, strategy=HeldOut(0.5, r)).epsilon
        for r in range(100)
    ]
    assert sum(e == 0 for e in estimates) >= 95


def test_gdp_mu_from_epsilon_inverts_the_reference_conversion():
    from audit.statistics.epsilon_bounds import epsilon_from_gdp_mu, gdp_mu_from_epsilon

    # docs/statistics.md reference: μ = 1 is ε 4.38 at δ 1e-5; the inverse gives μ back.
    assert gdp_mu_from_epsilon(epsilon_from_gdp_mu(1.0, 1e-5), 1e-5) == pytest.approx(1.0, abs=1e-8)
    assert gdp_mu_from_epsilon(4.38, 1e-5) == pytest.approx(1.0, abs=2e-3)
