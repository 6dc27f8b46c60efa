"""The mechanism audit and the white-box multi-run audit are group-sequential (issue #40): the looks are declared
before the first run, the audit stops at the first look that refutes, and a claim the mechanism meets is refuted
at most α of the time over all looks together (nulls at small sizes, ≥ 200 seeds each)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from audit.demos.mechanisms import laplace_count, laplace_count_wrong_scale, neighbouring_datasets
from audit.dp_validation.mechanism_audit import audit_mechanism, mechanism_design
from audit.dp_validation.whitebox_audit import _claim, _evaluate_look, whitebox_design
from audit.dp_validation.whitebox_checks import deciding_checks
from audit.dp_validation.whitebox_runs import _IN, _OUT
from audit.errors import AuditInputError
from audit.statistics.gaussian_dp_audit import mu_full_batch_dpsgd
from audit.statistics.sequential import run_group_sequential
from tests.mlflow_store import fresh_store

COUNTS = neighbouring_datasets(100, relation="add_remove", seed=0)


@pytest.mark.slow  # ~2 s of CPU: 200 audits of 4 looks each
def test_a_laplace_count_that_meets_its_claim_exactly_is_refuted_in_at_most_5_percent_of_200_sequential_audits():
    # Laplace(1/ε) on a count is exactly ε-DP (δ 0): its likelihood ratio reaches e^ε on every tail threshold.
    # Four looks of 25, 50, 100, 200 draws per dataset.
    results = [
        audit_mechanism(
            laplace_count, *COUNTS, n_trials=200, claimed_epsilon=1.0, seed=s, looks=6, first_look_trials=25
        )
        for s in range(200)
    ]
    assert all(r["sequential"]["looks"] == [25, 50, 100, 200] for r in results)
    assert sum(r["violation"] for r in results) <= 10  # ≤ 5 % of 200
    # Holding needs the whole planned size: no audit that held stopped early.
    assert all(r["n_trials_used"] == 200 for r in results if not r["violation"])


def _whitebox_null(seed: int, sigma: float, steps: int, n_runs: int) -> bool:
    """One sequential white-box decision on simulated runs of a correct full-batch DP-SGD (x_t = 1 + σz in, σz
    out: exactly the claimed μ = √T/σ Gaussian shift), through the audit's own look and checks."""
    rng = np.random.default_rng(seed)
    sides = {
        _IN: [{"steps": 1.0 + sigma * rng.standard_normal((n_runs, steps)), "final": rng.standard_normal(n_runs)}],
        _OUT: [{"steps": sigma * rng.standard_normal((n_runs, steps)), "final": rng.standard_normal(n_runs)}],
    }
    settings = {
        "noise_multiplier": sigma,
        "sample_rate": 1.0,
        "steps": steps,
        "accountant_history": [[sigma, 1.0, steps]],
    }
    claim = _claim(settings, 1e-5)
    mu = mu_full_batch_dpsgd([(sigma, steps)])
    design = whitebox_design(n_runs)  # 400 runs per side: looks after 100, 200, 400

    def look(index, size, level):
        found = _evaluate_look(sides, size, level, "all", claim, mu, 1e-5, seed)
        checks = deciding_checks(
            found["audit"],
            subject="null",
            claim=claim,
            eps_claim=float(claim["epsilon_pld"]),
            mu_claim=mu,
            delta=1e-5,
            per_test=found["per_test"],
            claimed_epsilon=None,
            pilot_fraction=0.2,
        )
        return math.nan, {"rejected": checks.refuted}

    return run_group_sequential(design, look).rejected


@pytest.mark.slow
def test_a_correct_full_batch_dp_sgd_is_refuted_in_at_most_5_percent_of_200_sequential_whitebox_audits():
    # σ 1, T 1: μ = 1, the Dirac canary's exact Gaussian shift; the looks' tests are the audit's own. ~15 s of CPU.
    assert whitebox_design(400).sizes == (100, 200, 400)
    assert sum(_whitebox_null(seed, 1.0, 1, 400) for seed in range(200)) <= 10  # ≤ 5 % of 200


def test_a_mechanism_with_a_quarter_of_its_noise_is_refuted_at_the_first_look():
    result = audit_mechanism(laplace_count_wrong_scale, *COUNTS, n_trials=20_000, claimed_epsilon=1.0, seed=0, looks=6)
    sequential = result["sequential"]
    assert result["violation"] and result["verdict"]["status"] == "fail"
    assert sequential["stopped_at_look"] == 1 and sequential["stopped_early"]
    assert sequential["runs_used"] == result["n_trials_used"] == 625 and sequential["runs_planned"] == 20_000
    assert sequential["looks"] == [625, 1250, 2500, 5000, 10000, 20000]
    assert math.isclose(sum(sequential["levels"]), 0.05)
    assert "stopped early: look 1 of 6" in sequential["stop_reason"]
    assert sequential["looks_taken"][0]["p_value"] <= sequential["levels"][0]


def test_the_fixed_design_is_the_audit_before_issue_40():
    fixed = audit_mechanism(laplace_count, *COUNTS, n_trials=4000, claimed_epsilon=1.0, seed=3, looks=1)
    assert fixed["sequential"]["looks"] == [4000] and fixed["sequential"]["stop_reason"].startswith("fixed size")
    assert fixed["confidence"] == fixed["look_confidence"] == 0.95  # the caller's number, not 1 − (1 − 0.95)
    assert fixed["evaluation"]["n_positive"] == 2000 and fixed["n_trials_used"] == 4000


@pytest.mark.parametrize(
    ("kwargs", "where"),
    [({"looks": 0}, "looks"), ({"looks": 21}, "looks"), ({"spending": "pocock"}, "spending")],
)
def test_a_bad_design_names_its_parameter(kwargs, where):
    with pytest.raises(AuditInputError) as caught:
        mechanism_design(1000, **kwargs)
    assert caught.value.where == where
    with pytest.raises(AuditInputError) as caught:
        whitebox_design(1000, **kwargs)
    assert caught.value.where == where


@pytest.mark.slow  # the mechanism runs in a worker process (its start-up dominates)
def test_the_mechanism_cli_declares_the_looks_first_and_reports_the_trials_used(cli_in_process, tmp_path):
    proc = cli_in_process(
        "mechanism-audit",
        "--mechanism",
        "audit.demos.mechanisms:laplace_count_wrong_scale",
        "--trials",
        "4000",
        "--out",
        str(tmp_path / "runs"),
        "--tracking-uri",
        fresh_store(tmp_path),
    )
    assert proc.returncode == 1, proc.stderr
    text = proc.stdout
    declared = "declared before the first run: sequential: 4,000 trials per dataset planned, 5 looks after 250"
    assert declared in text
    assert text.index(declared) < text.index("trials per dataset: 250 of 4,000 planned; stopped early: look 1 of 5")
    (path,) = (tmp_path / "runs").glob("*-mechanism-audit/mechanism-audit.json")
    saved = json.loads(path.read_text())
    assert saved["sequential"]["runs_used"] == 250 and saved["n_trials"] == 4000
    assert "group-sequential test over 5 looks" in saved["verdict"]["family_wise_error"]["statement"]


def test_looks_are_refused_for_a_one_run_whitebox_audit_and_bad_spending_names_the_flag(cli_in_process, tmp_path):
    common = ["--builtin", "--noise-multiplier", "1", "--tracking-uri", fresh_store(tmp_path)]
    common += ["--out", str(tmp_path / "runs")]
    proc = cli_in_process("whitebox-audit", "--mode", "one-run", "--looks", "3", *common)
    assert proc.returncode == 2 and "--looks" in proc.stderr and "one training run" in proc.stderr
    proc = cli_in_process("whitebox-audit", "--spending", "pocock", *common)
    assert proc.returncode == 2 and "--spending" in proc.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


@pytest.mark.slow  # 250 training runs of a planted bug in worker processes (~4 s of CPU)
def test_the_multi_run_canary_audit_stops_a_grossly_broken_trainer_at_its_first_look():
    from audit.dp_validation.canary_audit import run_canary_audit

    said: list[str] = []
    result = run_canary_audit(
        "audit.demos.planted_bugs:noise_divided_twice",
        mode="multi",
        n_models=200,
        seed=0,
        workers=2,
        announce=said.append,
    )
    sequential = result["sequential"]
    assert said and said[0].startswith(
        "declared before the first run: sequential: 200 models per side planned, 3 looks"
    )
    assert result["verdict"]["status"] == "fail" and sequential["stopped_at_look"] == 1
    assert sequential["runs_used"] == result["n_models_per_side"] == 50 and result["n_runs_planned"] == 200
    assert len(result["scores"]["with_canary"]) == 50  # only the runs trained


def test_looks_are_refused_for_the_multi_canary_mode_naming_the_flag(cli_in_process, tmp_path):
    proc = cli_in_process(
        "canary-audit",
        "--trainer",
        "audit.demos.planted_bugs:correct_eps_1",
        "--mode",
        "multi-canary",
        "--looks",
        "3",
        "--tracking-uri",
        fresh_store(tmp_path),
    )
    assert proc.returncode == 2 and "--looks" in proc.stderr and "runs to its planned size" in proc.stderr
    assert not list(tmp_path.glob("runs/*"))
