"""Forged result files through `gate` and `report` (issue 39, item 2): the single-audit schemas
describe the one-run and ledger blocks with their ranges and forbid unknown fields, gate and report
read through one reader, every figure the verdict reads is recomputed. None of the forged forms
exits 0; gate and report agree on every one; the documented exhausted budget is a finding (exit 1).

The forged files carry no digest (a forger removes it: "written by an older version"), so what
refuses them is the validation, not the digest (tests/test_result_integrity.py covers that).
Starting points are real files: tests/data/audit_results/current/whitebox-audit-one-run.json
(`whitebox-audit --mode one-run --builtin …`) and tests/data/results_smoke_example.json.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hostile_support import assert_refused, run_main

from audit.machinery.result_integrity import ENV_KEY, ENV_VERIFY

pytestmark = pytest.mark.security

DATA = Path(__file__).parent / "data"
ONE_RUN = json.loads((DATA / "audit_results" / "current" / "whitebox-audit-one-run.json").read_text())
CANARY = json.loads((DATA / "audit_results" / "current" / "canary-audit.json").read_text())
RUN_EXAMPLE = json.loads((DATA / "results_smoke_example.json").read_text())
LEDGER = {
    "recorded": True,
    "dataset": "adult",
    "ledger": "privacy-ledger.db",
    "epsilon_spent": 3.5,
    "epsilon_spent_unbounded": False,
    "delta": 1e-5,
    "method": "pld",
    "method_note": "tight",
    "basic_epsilon": 4.0,
    "advanced_epsilon": 9.0,
    "max_total_epsilon": None,
    "release_ids": [1, 2],
    "limit_source": None,
    "results_sha256": "0" * 64,
}


def _ceiling_below_claim(r):  # "held" kept, the ceiling moved under the claim everywhere it is written
    low = r["claimed_epsilon"] / 2
    r["ceiling"] = r["one_run"]["ceiling"] = r["one_run"]["steinke"]["ceiling"] = r["verdict"]["ceiling"] = low
    r["one_run"]["fdp"]["refutable_by_perfect_attack"] = False


def _claim_above_ceiling(r):  # the claim raised above what 200 canaries can test, "held" kept
    claim = r["ceiling"] * 3
    r["claimed_epsilon"] = r["one_run"]["claimed_epsilon"] = r["claim"]["epsilon"] = claim
    r["claim"]["source"] = "--claimed-epsilon"
    r["one_run"]["fdp"]["refutable_by_perfect_attack"] = False  # true of the pair (ε, δ) at this claim


def _disagreement(r):
    r["accountant_disagreements"] = ["the loader is not Poisson-sampled but the accountant assumes it"]


def _steinke_flag(r):
    r["one_run"]["steinke"]["p_value_claim"] = 1e-9  # rejects, but says not refuted


def _unknown_one_run_field(r):
    r["one_run"]["trust_me"] = True


def _ledger(**changes):
    def mutate(r):
        r["ledger"] = {**LEDGER, **changes}

    return mutate


def _ledger_extra(r):
    r["ledger"] = {**LEDGER, "approved_by": "ciso"}


ONE_RUN_FORGERIES = {
    "held with the ceiling below the claim": (_ceiling_below_claim, "one_run.ceiling"),
    "held with the claim above the ceiling": (_claim_above_ceiling, "one_run.status"),
    "accountant disagreements but a pass": (_disagreement, "accountant_disagreements"),
    "mode zero-run": (lambda r: r.__setitem__("mode", "zero-run"), "mode"),
    "Steinke refuted flag against its p-value": (_steinke_flag, "one_run.steinke.refuted"),
    "an unknown field in the one-run block": (_unknown_one_run_field, "one_run"),
    "a ledger block spending -1": (_ledger(epsilon_spent=-1), "ledger.epsilon_spent"),
    "a ledger block with an unknown field": (_ledger_extra, "ledger"),
    "a ledger block spending 'NaN'": (_ledger(epsilon_spent="NaN"), "ledger.epsilon_spent"),
}
RUN_FORGERIES = {
    "a ledger block spending -1": (_ledger(epsilon_spent=-1), "ledger.epsilon_spent"),
    "a ledger block spending -0.5 unbounded": (
        _ledger(epsilon_spent=-0.5, epsilon_spent_unbounded=True),
        "ledger.epsilon_spent",
    ),
    "a ledger block spending 'NaN'": (_ledger(epsilon_spent="NaN"), "ledger.epsilon_spent"),
    "a ledger block with an unknown field": (_ledger_extra, "ledger"),
    "a ledger block recorded without a figure": (_ledger(epsilon_spent=None), "ledger.epsilon_spent"),
}


@pytest.fixture
def gate_dir(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_KEY, raising=False)
    monkeypatch.delenv(ENV_VERIFY, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy.yaml").write_text(
        "rules:\n  fail_on_violation: true\n  fail_on_inconclusive: true\n  max_total_epsilon: 10.0\n"
    )
    return tmp_path


@pytest.mark.parametrize("name", list(ONE_RUN_FORGERIES))
def test_a_forged_one_run_result_is_refused_by_gate_and_report(gate_dir, capsys, name):
    mutate, field = ONE_RUN_FORGERIES[name]
    forged = copy.deepcopy(ONE_RUN)
    mutate(forged)
    (gate_dir / "whitebox-audit.json").write_text(json.dumps(forged))
    err = assert_refused(
        capsys,
        ["gate", "whitebox-audit.json", "--policy", "policy.yaml", "--out", "gated"],
        "whitebox-audit.json",
        folder=gate_dir,
    )
    assert f"'{field}" in err, err
    assert_refused(capsys, ["report", "whitebox-audit.json", "--out", "gated"], "whitebox-audit.json", folder=gate_dir)


@pytest.mark.parametrize("name", list(RUN_FORGERIES))
def test_a_forged_ledger_block_is_refused_by_gate_and_report_alike(gate_dir, capsys, name):
    mutate, field = RUN_FORGERIES[name]
    forged = copy.deepcopy(RUN_EXAMPLE)
    mutate(forged)
    (gate_dir / "run").mkdir()
    (gate_dir / "run" / "results.json").write_text(json.dumps(forged))
    for args in (["gate", "run", "--policy", "policy.yaml", "--out", "gated"], ["report", "run", "--out", "gated"]):
        err = assert_refused(capsys, args, "results.json", folder=gate_dir)
        assert f"'{field}" in err, err


@pytest.mark.parametrize("name", ["a ledger block spending -1", "a ledger block with an unknown field"])
def test_a_forged_ledger_block_in_a_canary_audit_is_refused(gate_dir, capsys, name):
    mutate, field = ONE_RUN_FORGERIES[name]
    forged = copy.deepcopy(CANARY)
    mutate(forged)
    (gate_dir / "canary-audit.json").write_text(json.dumps(forged))
    err = assert_refused(
        capsys, ["gate", "canary-audit.json", "--policy", "policy.yaml"], "canary-audit.json", folder=gate_dir
    )
    assert f"'{field}" in err, err


def test_the_genuine_one_run_result_passes_the_same_reader(gate_dir, capsys):
    (gate_dir / "whitebox-audit.json").write_text(json.dumps(ONE_RUN))
    code, _ = run_main(["gate", "whitebox-audit.json", "--policy", "policy.yaml", "--out", "gated"])
    out, err = capsys.readouterr()
    assert code == 0, err + out


@pytest.mark.parametrize("command", ["gate", "report"])
def test_the_documented_exhausted_budget_is_a_finding(gate_dir, capsys, command):
    """`epsilon_spent: null, epsilon_spent_unbounded: true` (docs/ledger.md) against max_total_epsilon:
    exit 1 with the rule failed, through gate and through report with the same policy."""
    results = copy.deepcopy(RUN_EXAMPLE)
    results["ledger"] = {
        **LEDGER,
        "epsilon_spent": None,
        "epsilon_spent_unbounded": True,
        "basic_epsilon": None,
        "advanced_epsilon": None,
    }
    (gate_dir / "run").mkdir()
    (gate_dir / "run" / "results.json").write_text(json.dumps(results))
    args = (
        ["gate", "run", "--policy", "policy.yaml", "--out", "gated"]
        if command == "gate"
        else ["report", "run", "--policy", "policy.yaml", "--out", "gated"]
    )
    code, _ = run_main(args)
    out, err = capsys.readouterr()
    assert code == 1, err + out
    checks = json.loads((gate_dir / "gated" / "results.json").read_text())["policy_evaluation"]["checks"]
    (rule,) = [c for c in checks if c["rule"] == "max_total_epsilon"]
    assert rule["status"] == "fail" and rule["measured"] == "unbounded", rule


def test_a_twin_row_whose_power_figure_does_not_match_its_training_is_refused(gate_dir, capsys):
    """results.json: the f-DP perfect-attack p-value at the claim (what makes a twin row's claim
    testable) is recomputed from the target's (σ, q, T) and m; one that says "testable" for a training
    ten times noisier is refused by gate and report alike."""
    results = json.loads((DATA / "results_one_run_example.json").read_text())
    (target,) = [t for t in results["targets"] if t["epsilon_target"] is not None]
    target["noise_multiplier"] *= 10
    (gate_dir / "run").mkdir()
    (gate_dir / "run" / "results.json").write_text(json.dumps(results))
    for args in (["gate", "run", "--policy", "policy.yaml", "--out", "gated"], ["report", "run", "--out", "gated"]):
        err = assert_refused(capsys, args, "results.json", folder=gate_dir)
        assert "fdp_perfect_p_value" in err, err


POWER_FORGERIES = {
    # a multi-mode canary audit of the fixture's size has no measured power (audit/dp_validation/mode_power.py)
    "canary-audit": (CANARY, {"kind": "measured", "figure": 1.0, "detail": "forged", "decider": None}),
    # a one-run white-box audit that observed only the final model has no power: "proven" is a forgery
    "whitebox-audit": (
        {**ONE_RUN, "observe": "final"},
        {"kind": "proven", "figure": None, "detail": "forged", "decider": None},
    ),
}


@pytest.mark.parametrize("kind", list(POWER_FORGERIES))
def test_a_power_entry_stronger_than_its_mode_allows_is_refused(gate_dir, capsys, kind):
    """`power` decides held vs not refuted: it is recomputed from the mode, observation and size, so an
    audit that read "not refuted" cannot be turned into "held" by rewriting that one field."""
    base, power = POWER_FORGERIES[kind]
    forged = {**copy.deepcopy(base), "power": power}
    (gate_dir / f"{kind}.json").write_text(json.dumps(forged))
    err = assert_refused(
        capsys, ["gate", f"{kind}.json", "--policy", "policy.yaml", "--out", "gated"], f"{kind}.json", folder=gate_dir
    )
    assert "'power.kind'" in err, err
