"""Sequential canary audits: the looks are declared before the first run, the audit stops at the first look that
refutes, and a correct claim is refuted at most α of the time over all looks together (issue #40)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from audit.statistics.sequential import (
    group_sequential_design,
    look_levels,
    look_sizes,
    obrien_fleming_spending,
    run_group_sequential,
)
from tests.mlflow_store import fresh_store


def test_obrien_fleming_spending_matches_lan_demets_reference_values():
    # Lan & DeMets 1983, O'Brien-Fleming type, α = 0.05: α(t) = 2 − 2Φ(1.95996/√t). At t = 1 all of α; at t = ½
    # 2·(1 − Φ(2.77181)) = 0.005575 (the 0.0056 of the group-sequential tables); at t = ¼ 2·(1 − Φ(3.91993)).
    assert obrien_fleming_spending(1.0, 0.05) == pytest.approx(0.05, abs=1e-12)
    assert obrien_fleming_spending(0.5, 0.05) == pytest.approx(0.005575, abs=2e-6)
    assert obrien_fleming_spending(0.25, 0.05) == pytest.approx(8.861e-5, rel=1e-3)
    with pytest.raises(ValueError):
        obrien_fleming_spending(0.0, 0.05)


def test_the_levels_of_the_looks_add_up_to_alpha_whatever_the_spending():
    sizes = (1500, 3000, 6000, 12000, 24000, 48000)
    for spending in ("haybittle-peto", "obrien-fleming", "bonferroni"):
        levels = look_levels(sizes, 0.05, spending)
        assert len(levels) == 6 and all(level >= 0 for level in levels)
        assert math.fsum(levels) == pytest.approx(0.05, abs=1e-12)
    # Haybittle-Peto type: 0.001 at each interim look, 0.045 kept for the last.
    assert look_levels(sizes, 0.05) == pytest.approx((0.001,) * 5 + (0.045,))
    assert look_levels((400,), 0.05) == (0.05,)  # one look: the fixed-size test at the full level
    with pytest.raises(ValueError):
        look_levels((400, 200), 0.05)
    with pytest.raises(ValueError):
        look_levels((200, 400), 0.05, "pocock")


def test_looks_halve_the_planned_size_and_none_falls_below_the_first_look_size():
    assert look_sizes(48000, 6, 200) == (1500, 3000, 6000, 12000, 24000, 48000)
    assert look_sizes(1600, 6, 200) == (200, 400, 800, 1600)
    assert look_sizes(300, 6, 200) == (300,)
    assert look_sizes(48000, 1, 200) == (48000,)
    design = group_sequential_design(1600, 0.05, max_looks=6, first_at_least=200)
    assert "1,600 audited runs planned, 4 looks" in design.describe("audited runs")
    assert design.to_dict()["planned"] == 1600


def test_the_test_stops_at_the_first_look_that_rejects_and_never_looks_further():
    design = group_sequential_design(800, 0.05, max_looks=3, first_at_least=200)
    asked = []

    def look(index, size, level):
        asked.append(size)
        return (1e-9 if size == 400 else 0.5), {"note": "x"}

    outcome = run_group_sequential(design, look)
    assert asked == [200, 400] and outcome.rejected and outcome.size_used == 400
    assert "look 2 of 3" in outcome.reason()
    held = run_group_sequential(design, lambda i, n, level: (0.5, {}))
    assert not held.rejected and held.size_used == 800 and "ran to the planned 800" in held.reason()


def _sequential_null_audit(seed: int, profile, mu: float, planned: int = 800) -> bool:
    """One sequential profile test of a mechanism that sits exactly on the claimed curve: scores N(μ, 1) with the
    canary, N(0, 1) without, against the μ-GDP Gaussian mechanism's claimed curve (the hardest null there is). Pilot
    and tested runs are disjoint; each look picks its rule on the pilot runs so far, as the canary audit does."""
    from audit.statistics.tradeoff_curves import _errors, best_profile_rule, tangent_test_p_value

    rng = np.random.default_rng(seed)
    n_pilot = planned // 4
    pilot_coins = rng.random(n_pilot) < 0.5
    pilot = rng.normal(size=n_pilot) + mu * pilot_coins
    coins = rng.random(planned) < 0.5
    scores = rng.normal(size=planned) + mu * coins

    def look(index, size, level):
        k = max(16, n_pilot * size // planned)
        c, s = coins[:size], scores[:size]
        rule, _ = best_profile_rule(
            pilot[:k][pilot_coins[:k]], pilot[:k][~pilot_coins[:k]], profile, int(c.sum()), int((~c).sum()), 1 - level
        )
        fp, fn = _errors(rule, s[c], s[~c])
        return tangent_test_p_value(fn, int(c.sum()), fp, int((~c).sum()), rule[2], profile, alpha=level), {}

    design = group_sequential_design(planned, 0.05, max_looks=6, first_at_least=200)
    assert design.sizes == (200, 400, 800)
    return run_group_sequential(design, look).rejected


@pytest.mark.slow
def test_a_claim_the_mechanism_meets_exactly_is_refuted_in_at_most_5_percent_of_300_sequential_audits():
    from audit.statistics.tradeoff_curves import dpsgd_privacy_profile

    # One Gaussian mechanism step of sensitivity 1 and noise σ = 2: μ = ½; the PLD profile is pessimistic, so the
    # mechanism meets it (its curve lies on or above the claimed one).
    profile = dpsgd_privacy_profile(2.0, 1.0, 1)
    false_alarms = sum(_sequential_null_audit(seed, profile, mu=0.5) for seed in range(300))
    assert false_alarms <= 15  # ≤ 5 % of 300, the level the looks share


# --------------------------------------------------------------------------------------------------
# The canary audit itself: real trainers in isolated workers
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pool():
    from audit.machinery.workers import WorkerPool

    with WorkerPool(2, name="--trainer", timeout=600) as workers:
        yield workers


@pytest.mark.slow
def test_sequential_profile_audits_of_a_correct_trainer_refute_at_most_5_percent_of_the_time(pool):
    # The trainer does what its CLAIM says (σ 4.5, q 0.25, T 20); three looks of 32, 64, 128 audited runs.
    from audit.dp_validation.canary_audit import run_canary_audit

    results = [
        run_canary_audit(
            "audit.demos.planted_bugs:correct_eps_1", n_models=128, seed=seed, first_look_runs=32, pool=pool
        )
        for seed in range(40)
    ]
    assert all(r["sequential"]["looks"] == [32, 64, 128] for r in results)
    assert sum(r["violation"] for r in results) <= 2  # ≤ 5 % of 40
    # Holding a correct claim needs the whole planned size: no audit that held stopped early.
    assert all(r["sequential"]["runs_used"] == r["sequential"]["runs_planned"] for r in results if not r["violation"])


@pytest.mark.slow
def test_the_cli_declares_the_looks_first_and_stops_a_grossly_broken_trainer_at_the_first(cli_in_process, tmp_path):
    import json

    proc = cli_in_process(
        "canary-audit",
        "--trainer",
        "audit.demos.planted_bugs:noise_divided_twice",
        "--models",
        "800",
        "--tracking-uri",
        fresh_store(tmp_path),
    )
    assert proc.returncode == 1, proc.stderr
    text = proc.stdout + proc.stderr
    assert "declared before the first run: sequential: 800 audited runs planned, 3 looks after 200" in text
    assert text.index("declared before the first run") < text.index("runs: 250 of 1,000 planned")
    assert "stopped early: look 1 of 3 refuted the claim after 200 audited runs" in text
    (path,) = tmp_path.glob("runs/*-canary-audit/canary-audit.json")
    sequential = json.loads(path.read_text())["sequential"]
    assert sequential["runs_used"] == 250 and sequential["runs_planned"] == 1000 and sequential["stopped_early"]
    assert [look["size"] for look in sequential["looks_taken"]] == [200]


def test_looks_apply_to_the_modes_that_spend_many_runs_only(cli_in_process, tmp_path):
    # One-run is one training run (profile and multi take looks; multi-canary runs to its size).
    proc = cli_in_process(
        "canary-audit",
        "--trainer",
        "audit.demos.planted_bugs:correct_eps_1",
        "--mode",
        "one-run",
        "--looks",
        "3",
        "--tracking-uri",
        fresh_store(tmp_path),
    )
    assert proc.returncode == 2 and "--looks" in proc.stderr and not list(tmp_path.glob("runs/*"))
