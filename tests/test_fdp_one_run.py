"""The one-run f-DP audit (Mahloujifar, Melis, Chaudhuri 2024): reference values, soundness on null data."""

import numpy as np
import pytest

from audit.statistics.epsilon_bounds import one_run_epsilon_from_counts
from audit.statistics.fdp_one_run import (
    fdp_one_run_audit,
    fdp_one_run_epsilon_gdp,
    fdp_one_run_refutes,
    gdp_blow_up_inverse,
    profile_blow_up_inverse,
)
from audit.statistics.tradeoff_curves import dpsgd_privacy_profile, pair_privacy_profile

# Reference values from an independent implementation (jax_privacy/auditing.py,
# `_epsilon_one_run_fdp`, run on these counts): (m, guesses, right, α, δ) → ε of the refuted GDP curve.
REFERENCE = [
    ((1000, 100, 95, 0.05, 1e-5), 3.3233),
    ((1000, 100, 100, 0.05, 1e-5), 5.549028),
    ((6400, 640, 420, 0.05, 1e-5), 0.688986),
    ((10000, 1000, 750, 0.05, 1e-5), 1.326113),
    ((200, 20, 18, 0.05, 1e-5), 1.394206),
    ((1000, 200, 130, 0.05 / 6, 1e-5), 0.346715),
]


@pytest.mark.parametrize("counts, expected", REFERENCE)
def test_gdp_epsilon_matches_an_independent_implementation(counts, expected):
    assert fdp_one_run_epsilon_gdp(*counts) == pytest.approx(expected, abs=2e-5)


def test_it_is_tighter_than_the_steinke_bound_on_the_same_counts():
    # 100 right of 100 guesses among 1000 canaries: Steinke et al. 3.49, the f-DP analysis 5.55.
    assert one_run_epsilon_from_counts(1000, 100, 100, 1e-5, 0.05) < fdp_one_run_epsilon_gdp(1000, 100, 100, 0.05, 1e-5)


def test_the_profile_inverse_blow_up_matches_gdp_without_subsampling():
    # q = 1, T = 1: the Gaussian mechanism with σ = 2 is exactly 0.5-GDP.
    profile_inverse = profile_blow_up_inverse(dpsgd_privacy_profile(2.0, 1.0, 1))
    gdp_inverse = gdp_blow_up_inverse(0.5)
    for y in (0.05, 0.2, 0.5, 0.8, 0.95):
        assert gdp_inverse(y) - 1e-3 <= profile_inverse(y) <= gdp_inverse(y) + 1e-9  # lower envelope side


def test_a_pure_dp_pair_inverse_blow_up():
    inverse = profile_blow_up_inverse(pair_privacy_profile(1.0, 0.0))
    # f̄⁻¹(y) = max(y/e, 1 − e(1 − y)).
    assert inverse(0.5) == pytest.approx(0.5 / np.e)
    assert inverse(0.9) == pytest.approx(max(0.9 / np.e, 1 - np.e * 0.1))


def test_all_guesses_right_refutes_a_strict_claim_and_few_right_refute_nothing():
    strict = gdp_blow_up_inverse(0.1)
    assert fdp_one_run_refutes(strict, 1000, 200, 200, 0.05)
    assert not fdp_one_run_refutes(strict, 1000, 200, 100, 0.05)  # chance level


def _gaussian_canaries(rng, m, mu):
    members = rng.random(m) < 0.5
    return rng.normal(size=m) + mu * members, members


def test_canaries_exactly_at_the_claim_are_refuted_in_at_most_5_percent_of_200_repeats():
    # Scores N(μ, 1) for members, N(0, 1) for the rest: each canary is exactly μ-GDP, the hardest null.
    rng = np.random.default_rng(0)
    profile = dpsgd_privacy_profile(1.0, 1.0, 1)  # μ = 1
    refuted = sum(
        fdp_one_run_audit(*_gaussian_canaries(rng, 1000, 1.0), profile, delta=1e-5, with_gdp_epsilon=False)["refuted"]
        for _ in range(200)
    )
    assert refuted <= 10


def test_a_leakier_mechanism_is_refuted():
    rng = np.random.default_rng(1)
    result = fdp_one_run_audit(*_gaussian_canaries(rng, 4000, 3.0), dpsgd_privacy_profile(1.0, 1.0, 1), delta=1e-5)
    assert result["refuted"] and result["gdp_epsilon"] > 0
