"""The federated job's default number of canary clients is read from the claim's ceiling before any
training (audit/federated/canary_rows.py `default_canary_clients`): the smallest rung of the ladder
with which a perfect attack could refute the claim at α/4, within a memory budget."""
from __future__ import annotations

from audit.federated.canary_rows import CANARY_LADDER, HOLM_ROOM, default_canary_clients
from audit.statistics.epsilon_bounds import one_run_ceiling
from audit.statistics.one_run_power import fdp_perfect_p_value
from audit.statistics.tradeoff_curves import dpsgd_privacy_profile

ALPHA, DELTA = 0.05, 1e-5


def _refutable(sigma, q, rounds, claim, m):
    level = ALPHA / HOLM_ROOM
    return (one_run_ceiling(m, DELTA, level) > claim
            or fdp_perfect_p_value(dpsgd_privacy_profile(sigma, q, rounds), m) <= level)


def test_a_large_claim_gets_the_smallest_rung_that_makes_it_testable_and_a_small_one_keeps_1000():
    # The `clients` preset's schedule (q 0.5, 20 rounds); σ 1.555 is its ε ≈ 8 at δ 1e-5 (PRV).
    sigma, q, rounds, claim = 1.555, 0.5, 20, 8.0
    m = default_canary_clients(sigma, q, rounds, claim, DELTA, ALPHA, n_parameters=1000)
    rung = CANARY_LADDER.index(m)
    assert rung > 0 and _refutable(sigma, q, rounds, claim, m)
    assert not _refutable(sigma, q, rounds, claim, CANARY_LADDER[rung - 1])  # the smallest that does
    assert default_canary_clients(8.672, q, rounds, 1.0, DELTA, ALPHA, n_parameters=1000) == CANARY_LADDER[0]


def test_the_ladder_stops_at_the_memory_budget():
    # 10⁷ parameters: 2000 float64 directions would take 160 GB, far above the budget; 1000 stays.
    assert default_canary_clients(1.555, 0.5, 20, 8.0, DELTA, ALPHA, n_parameters=10**7) == CANARY_LADDER[0]
