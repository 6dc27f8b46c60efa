"""Ceilings: the largest bound a perfect attack can reach with a given number of runs or canaries."""

import numpy as np
import pytest

from audit.statistics.audit_ceilings import (
    canaries_needed_one_run,
    ceiling_one_run,
    ceiling_threshold_audit,
    evaluation_runs,
    runs_needed_threshold_audit,
)
from audit.statistics.epsilon_bounds import epsilon_lower_bound_one_run
from audit.statistics.threshold_audit import threshold_audit


@pytest.mark.parametrize("n, expected", [(25, 1.84), (100, 3.28), (1000, 5.60)])
def test_threshold_ceiling_matches_the_reference_values(n, expected):
    # docs/statistics.md ("Estimators"): a perfect attack with N trials per side at 95 % caps at
    # 3.28 (N=100), 5.60 (N=1000);
    # the issue: 1.84 with K = 50 models (25 evaluated per side).
    assert ceiling_threshold_audit(n, n, 1e-5, 0.95) == pytest.approx(expected, abs=0.005)


def test_a_perfect_separation_reaches_exactly_the_ceiling():
    result = threshold_audit(np.arange(50) + 100.0, np.arange(50) * 1.0, delta=1e-5)
    assert result["epsilon_lower_bound"] == pytest.approx(result["ceiling"])
    assert result["ceiling"] == pytest.approx(ceiling_threshold_audit(25, 25, 1e-5))


def test_no_bound_on_random_scores_exceeds_its_ceiling():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(4, 200))
        result = threshold_audit(rng.normal(size=n), rng.normal(size=n), delta=1e-5)
        assert result["epsilon_lower_bound"] <= result["ceiling"] + 1e-12


@pytest.mark.parametrize("claim", [0.3, 1.0, 2.0, 3.84, 6.0])
def test_runs_needed_is_the_smallest_count_whose_ceiling_exceeds_the_claim(claim):
    n = runs_needed_threshold_audit(claim, 1e-5, 0.95)
    at = evaluation_runs(n)
    below = evaluation_runs(n - 1)
    assert ceiling_threshold_audit(at, at, 1e-5) > claim >= ceiling_threshold_audit(below, below, 1e-5)


def test_the_one_run_ceiling_is_what_a_perfect_attack_on_m_canaries_gets():
    rng = np.random.default_rng(1)
    members = rng.random(400) < 0.5
    perfect = epsilon_lower_bound_one_run(members.astype(float) + rng.random(400) * 0.1, members, 1e-5)
    ceiling = ceiling_one_run(400, 1e-5)
    # The rule's thresholds come from the pilot, so a few evaluation scores can fall between them:
    # a perfect attack gets within a few percent of the ceiling, never above it.
    assert 0.97 * ceiling <= perfect.epsilon <= ceiling
    # Closed form at δ = 0: all r = m_eval = 700 guesses right has p(ε) = q^r, q = e^ε/(1 + e^ε),
    # one test at α = 0.05 (the rule is chosen on the 300-candidate pilot), so ε = logit(α^(1/r)).
    p = 0.05 ** (1 / 700)
    assert ceiling_one_run(1000, 0.0) == pytest.approx(np.log(p / (1 - p)), rel=1e-6)
    assert ceiling_one_run(1000, 1e-5) <= ceiling_one_run(1000, 0.0)
    # More canaries never lower the ceiling (the old fixed-fraction design's did: its 2mδ term).
    assert ceiling_one_run(1000, 1e-5) <= ceiling_one_run(10_000, 1e-5) <= ceiling_one_run(100_000, 1e-5)


def test_canaries_needed_is_minimal():
    m = canaries_needed_one_run(2.0, 1e-5)
    assert ceiling_one_run(m, 1e-5) > 2.0 >= ceiling_one_run(m - 1, 1e-5)
