"""The federated job's default number of canary clients is read from the claim's ceiling before any
training (audit/federated/canary_rows.py `default_canary_clients`): the smallest rung of the ladder
with which a perfect attack could refute the claim at Holm's first level α/K, K a bound on the run's
decisive rows, within a memory budget — judged here by the verdict's own power rule (`whitebox_power`)."""

from __future__ import annotations

from audit.federated.canary_rows import CANARY_LADDER, HOLM_ROOM, default_canary_clients
from audit.statistics.epsilon_bounds import one_run_ceiling
from audit.statistics.one_run_power import curve_ceilings, whitebox_power

ALPHA, DELTA = 0.05, 1e-5
# The `clients` preset's schedule (q 0.5, 20 rounds); σ 1.555 is its ε ≈ 8 at δ 1e-5 (PRV).
SIGMA, Q, ROUNDS, CLAIM = 1.555, 0.5, 20, 8.0


def _powered(m: int, rows: int) -> bool:
    """What the verdict would say of a row with m canaries at Holm's first level α/rows."""
    curves = curve_ceilings(SIGMA, Q, ROUNDS, m, DELTA, CLAIM, factors=(1.0,))
    able = {"steinke": one_run_ceiling(m, DELTA, ALPHA) > CLAIM, "fdp": curves[0]["fdp_perfect_p_value"] <= ALPHA}
    row = {
        "claim": CLAIM,
        "m": m,
        "delta": DELTA,
        "curve_ceilings": curves,
        "tests": [t for t, ok in able.items() if ok] or ["steinke", "fdp"],
    }
    return whitebox_power(row, ALPHA / rows)["powered"]


def test_the_default_is_the_smallest_rung_the_verdict_would_call_testable():
    for rows in (HOLM_ROOM, 48):  # 48: the clients preset's bound (2 DP targets × (23 membership rows + 1))
        m = default_canary_clients(SIGMA, Q, ROUNDS, CLAIM, DELTA, ALPHA, n_parameters=1000, decisive_rows=rows)
        rung = CANARY_LADDER.index(m)
        assert rung > 0 and _powered(m, rows) and not _powered(CANARY_LADDER[rung - 1], rows)
    assert default_canary_clients(8.672, Q, ROUNDS, 1.0, DELTA, ALPHA, n_parameters=1000) == CANARY_LADDER[0]


def test_the_ladder_stops_at_the_memory_budget():
    # 10⁷ parameters: 2000 float64 directions would take 160 GB, far above the budget; 1000 stays.
    assert (
        default_canary_clients(SIGMA, Q, ROUNDS, CLAIM, DELTA, ALPHA, n_parameters=10**7, decisive_rows=48)
        == CANARY_LADDER[0]
    )
