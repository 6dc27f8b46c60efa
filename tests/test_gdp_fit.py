"""The GDP estimate says when its assumption fails (issue 27, item 3)."""

import numpy as np

from audit.statistics.attack_evaluation import evaluate_attack
from audit.statistics.epsilon_bounds import epsilon_from_gdp_mu
from audit.statistics.gdp_fit import gaussian_tradeoff_fit


def _randomized_response(rng, n, epsilon):
    members = rng.random(n) < 0.5
    truthful = rng.random(n) < np.exp(epsilon) / (1 + np.exp(epsilon))
    return np.where(truthful, members, ~members).astype(float), members


def test_randomized_response_scores_withhold_the_estimate():
    rng = np.random.default_rng(0)
    scores, members = _randomized_response(rng, 2400, 1.0)
    fit = gaussian_tradeoff_fit(scores, members)
    assert fit["withheld"] and "discrete" in fit["reason"] and fit["distinct_scores"] == 2
    row = evaluate_attack(
        "rr",
        scores,
        members,
        np.zeros(2400, int),
        delta=1e-5,
        confidence=0.95,
        threshold_seed=0,
        accountant_epsilon=1.0,
    )
    assert row["epsilon_estimate_gdp"]["epsilon"] is None
    assert "discrete" in row["epsilon_estimate_gdp"]["withheld"]
    assert any("GDP estimate withheld" in note for note in row["notes"])


def test_gaussian_scores_keep_the_estimate_in_at_least_90_percent_of_repeats():
    # The fit test rejects a true Gaussian curve with probability ≈ 5 %; 40 repeats, ≤ 4 rejections.
    rng = np.random.default_rng(1)
    rejected = 0
    for i in range(40):
        members = rng.random(1000) < 0.5
        scores = rng.normal(size=1000) + 1.0 * members
        fit = gaussian_tradeoff_fit(scores, members, seed=i)
        rejected += fit["withheld"]
        assert fit["mu_fit"] is not None
    assert rejected <= 4


def test_a_non_gaussian_curve_is_rejected_and_a_gaussian_one_kept_in_the_row():
    rng = np.random.default_rng(2)
    members = rng.random(2400) < 0.5
    mixture = rng.normal(size=2400) + np.where(members & (rng.random(2400) < 0.2), 10.0, 0.0)
    assert gaussian_tradeoff_fit(mixture, members)["withheld"]
    scores = rng.normal(size=2400) + 1.0 * members
    row = evaluate_attack(
        "loss",
        scores,
        members,
        np.zeros(2400, int),
        delta=1e-5,
        confidence=0.95,
        threshold_seed=0,
        accountant_epsilon=None,
    )
    estimate = row["epsilon_estimate_gdp"]
    assert estimate["withheld"] is None and 0 < estimate["epsilon"] <= epsilon_from_gdp_mu(1.0, 1e-5) * 1.2
