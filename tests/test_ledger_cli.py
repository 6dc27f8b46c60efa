"""`privacy-audit ledger …` and `--ledger URI --dataset NAME` on the recording commands, as a user runs them:
exit 0 recorded, exit 1 over budget (nothing recorded), exit 2 bad input (nothing written)."""

from __future__ import annotations

import json
import shutil

import pytest

from audit.cli import main
from audit.ledger.composition import compose_mechanisms
from audit.ledger.mechanisms import validate_mechanism
from audit.ledger.store import Ledger
from tests.conftest import REPO

SMOKE_RESULTS = REPO / "tests" / "data" / "results_smoke_example.json"


@pytest.fixture
def invoke(capsys, monkeypatch, tmp_path):
    """`privacy-audit ARGS` in this process, from tmp_path: (exit code, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")

    def _invoke(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as ended:
            main(list(args))
        out = capsys.readouterr()
        return ended.value.code, out.out, out.err

    return _invoke


def test_record_by_hand_and_show_the_same_figure_dp_accounting_gives(invoke, tmp_path):
    for args in (
        ["--laplace-scale", "10", "--count", "10"],
        ["--gaussian-scale", "20", "--count", "5"],
        ["--noise-multiplier", "1.1", "--sample-rate", "0.01", "--steps", "1000"],
        ["--epsilon", "0.5", "--delta", "1e-6", "--label", "synthetic release"],
    ):
        code, out, err = invoke("ledger", "record", "--dataset", "adult", *args)
        assert code == 0, err
        assert "spent ε" in out
    code, out, _ = invoke("ledger", "show", "--dataset", "adult", "--json")
    shown = json.loads(out)
    expected = compose_mechanisms(
        [
            validate_mechanism(m)
            for m in (
                {"kind": "laplace", "scale": 10.0, "count": 10},
                {"kind": "gaussian", "scale": 20.0, "count": 5},
                {"kind": "dpsgd", "noise_multiplier": 1.1, "sample_rate": 0.01, "steps": 1000},
                {"kind": "epsilon_delta", "epsilon": 0.5, "delta": 1e-6},
            )
        ],
        1e-5,
    )
    assert code == 0 and shown["composition"] == expected.as_dict() and shown["active_releases"] == 4
    code, out, _ = invoke("ledger", "list", "--dataset", "adult", "--json")
    releases = json.loads(out)["releases"]
    assert [r["label"] for r in releases][-1] == "synthetic release"
    assert releases[-1]["mechanisms"] == [{"kind": "epsilon_delta", "epsilon": 0.5, "delta": 1e-6, "count": 1}]
    assert all(r["command"].startswith("privacy-audit ledger record") for r in releases)
    assert (tmp_path / "privacy-ledger.db").is_file()


def test_a_release_over_the_budget_exits_1_and_records_nothing(invoke, tmp_path):
    assert invoke("ledger", "set-budget", "--dataset", "adult", "--max-epsilon", "1.0")[0] == 0
    assert invoke("ledger", "record", "--dataset", "adult", "--laplace-scale", "2")[0] == 0
    code, _, err = invoke("ledger", "record", "--dataset", "adult", "--laplace-scale", "1")
    assert code == 1 and "FAIL" in err and "nothing was recorded" in err
    policy = tmp_path / "policy.yaml"
    policy.write_text("rules:\n  max_total_epsilon: {adult: 0.55, other: 9.0}\n")
    code, _, err = invoke("ledger", "record", "--dataset", "adult", "--laplace-scale", "10", "--policy", str(policy))
    assert code == 1 and "policy" in err
    with Ledger.open("privacy-ledger.db") as ledger:
        assert ledger.count_releases("adult") == 1


def test_remove_records_a_removal_and_frees_the_budget(invoke):
    invoke("ledger", "record", "--dataset", "adult", "--laplace-scale", "1", "--label", "oops")
    code, out, err = invoke(
        "ledger", "remove", "--dataset", "adult", "--release", "1", "--reason", "recorded by mistake"
    )
    assert code == 0, err
    code, out, _ = invoke("ledger", "list", "--dataset", "adult", "--json")
    release = json.loads(out)["releases"][0]
    assert release["removed"]["reason"] == "recorded by mistake" and json.loads(out)["composition"]["epsilon"] == 0.0


def test_record_the_private_targets_of_a_run_results_file(invoke):
    code, out, err = invoke("ledger", "record", "--dataset", "adult", "--results", str(SMOKE_RESULTS))
    assert code == 0, err
    assert "non-private baseline" in out
    with Ledger.open("privacy-ledger.db") as ledger:
        state = ledger.dataset_state("adult")
    assert [r["mechanisms"][0]["noise_multiplier"] for r in state["releases"]] == [5.0390625, 1.077880859375]
    assert all(r["source_sha256"] and r["source"] == "run" for r in state["releases"])


def _bad_input_cases(tmp_path):
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"\x00\x01 not a database " * 100)
    record = ["ledger", "record", "--laplace-scale", "1"]
    return [
        ([*record, "--dataset", "adult", "--ledger", "https://example.com/ledger"], "--ledger"),
        ([*record, "--dataset", "adult", "--ledger", str(tmp_path / "notes.txt")], "--ledger"),
        ([*record, "--dataset", "adult", "--ledger", str(corrupt)], "not a SQLite database"),
        ([*record, "--dataset", "../../etc/passwd"], "--dataset"),
        ([*record, "--dataset", "a/b"], "--dataset"),
        (
            [
                "ledger",
                "record",
                "--dataset",
                "adult",
                "--noise-multiplier",
                "-1",
                "--sample-rate",
                "0.1",
                "--steps",
                "10",
            ],
            "--noise-multiplier",
        ),
        (
            [
                "ledger",
                "record",
                "--dataset",
                "adult",
                "--noise-multiplier",
                "nan",
                "--sample-rate",
                "0.1",
                "--steps",
                "10",
            ],
            "--noise-multiplier",
        ),
        (["ledger", "record", "--dataset", "adult", "--gaussian-scale", "-3"], "--gaussian-scale"),
        (["ledger", "record", "--dataset", "adult", "--epsilon", "1"], "--delta"),
        (["ledger", "record", "--dataset", "adult", "--laplace-scale", "1", "--gaussian-scale", "1"], "exactly one"),
        (["ledger", "set-budget", "--dataset", "adult", "--max-epsilon", "nan"], "--max-epsilon"),
        (
            [
                "synth-check",
                "--train",
                "t.csv",
                "--holdout",
                "h.csv",
                "--synthetic",
                "s.csv",
                "--ledger",
                "l.db",
                "--dataset",
                "../x",
            ],
            "--dataset",
        ),
        (
            ["synth-check", "--train", "t.csv", "--holdout", "h.csv", "--synthetic", "s.csv", "--dataset", "adult"],
            "--ledger",
        ),
        (["canary-audit", "--trainer", "m:f", "--ledger", "ftp://host/x", "--dataset", "adult"], "--ledger"),
        # a synthetic release without a DP claim has no ε to record: refused before any output is written
        (
            [
                "synth-check",
                "--train",
                "t.csv",
                "--holdout",
                "h.csv",
                "--synthetic",
                "s.csv",
                "--ledger",
                "l.db",
                "--dataset",
                "adult",
            ],
            "--ledger",
        ),
    ]


def test_bad_input_exits_2_with_one_line_and_writes_nothing(invoke, tmp_path):
    (tmp_path / "notes.txt").write_text("not a database")
    existing = tmp_path / "existing.db"
    invoke("ledger", "record", "--dataset", "adult", "--laplace-scale", "5", "--ledger", str(existing))
    for args, named in _bad_input_cases(tmp_path):
        before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
        code, out, err = invoke(*args)
        assert code == 2, (args, out, err)
        assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and named in err, (args, err)
        after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
        assert after == before, args  # no new file, no changed byte
        assert not (tmp_path / "runs").exists()
    # and the same flags against an existing ledger leave its rows alone
    code, _, _ = invoke(
        "ledger",
        "record",
        "--dataset",
        "adult",
        "--ledger",
        str(existing),
        "--noise-multiplier",
        "nan",
        "--sample-rate",
        "0.1",
        "--steps",
        "10",
    )
    assert code == 2
    with Ledger.open(str(existing)) as ledger:
        assert ledger.count_releases() == 1


def test_reading_a_ledger_that_does_not_exist_creates_nothing(invoke, tmp_path):
    code, _, err = invoke("ledger", "show", "--dataset", "adult", "--ledger", "missing.db")
    assert code == 2 and "no ledger there yet" in err and not (tmp_path / "missing.db").exists()


def test_gate_checks_max_total_epsilon_on_the_figure_a_recording_command_wrote(invoke, tmp_path):
    from audit.cli.ledger_commands import record_in_ledger

    results_path = tmp_path / "results.json"
    shutil.copy(SMOKE_RESULTS, results_path)
    results = json.loads(results_path.read_text())
    results["mlflow"] = None  # no MLflow run to tag here
    record_in_ledger("ledger.db", "adult", "run", results, results_path)
    section = json.loads(results_path.read_text())["ledger"]
    assert section["recorded"] and section["dataset"] == "adult" and section["method"] == "pld"
    spent = section["epsilon_spent"]
    with Ledger.open("ledger.db") as ledger:
        assert ledger.dataset_state("adult")["composition"].epsilon == spent
    for limit, expected in ((spent * 0.9, 1), (spent * 1.1, 0)):
        policy = tmp_path / "policy.yaml"
        policy.write_text(f"rules:\n  max_total_epsilon: {limit!r}\n  max_auc: 0.99\n")
        code, out, err = invoke("gate", "--policy", str(policy), str(results_path))
        assert code == expected, out + err
        assert "max_total_epsilon" in (tmp_path / "junit.xml").read_text()  # a check that decides, either way
        if expected == 1:
            assert "max_total_epsilon" in out + err


def test_a_refuted_claim_is_not_recorded(invoke, tmp_path):
    from audit.cli.ledger_commands import record_in_ledger

    results_path = tmp_path / "results.json"
    results = json.loads(SMOKE_RESULTS.read_text())
    results["targets"][1]["violation"] = True
    results["mlflow"] = None
    results_path.write_text(json.dumps(results))
    record_in_ledger("ledger.db", "adult", "run", results, results_path)
    assert json.loads(results_path.read_text())["ledger"]["recorded"] is False
    assert not (tmp_path / "ledger.db").exists()


def test_policy_rule_max_total_epsilon_is_validated():
    from audit.errors import AuditInputError
    from audit.machinery.policy import policy_from_dict

    assert policy_from_dict({"rules": {"max_total_epsilon": 8}}).rules.total_epsilon_limit("any") == 8
    assert policy_from_dict({"rules": {"max_total_epsilon": {"adult": 2.5}}}).rules.total_epsilon_limit("other") is None
    for bad in (
        {"rules": {"max_total_epsilon": -1.0}},
        {"rules": {"max_total_epsilon": ".inf"}},
        {"rules": {"max_auc": 0.9}, "overrides": [{"epsilon": 1.0, "rules": {"max_total_epsilon": 1.0}}]},
    ):
        with pytest.raises(AuditInputError, match="max_total_epsilon"):
            policy_from_dict(bad)


def test_canary_and_whitebox_claims_become_the_accountants_events_or_a_marked_pair():
    from audit.ledger.sources import releases_in_results

    canary = {
        "trainer": "m:f",
        "claim": {
            "epsilon": 2.0,
            "delta": 1e-5,
            "source": "CLAIM",
            "noise_multiplier": 1.2,
            "sample_rate": 0.05,
            "steps": 300,
        },
        "claimed_epsilon": 2.0,
    }
    ((label, mechanisms),) = releases_in_results(canary, "x")[0]
    assert mechanisms == [{"kind": "dpsgd", "noise_multiplier": 1.2, "sample_rate": 0.05, "steps": 300}]
    canary["claim"] = {"epsilon": 2.0, "delta": 1e-5, "source": "--claimed-epsilon/--delta", "noise_multiplier": None}
    ((label, mechanisms),) = releases_in_results(canary, "x")[0]
    assert "(ε, δ) pair" in label and mechanisms == [{"kind": "epsilon_delta", "epsilon": 2.0, "delta": 1e-5}]
    whitebox = {
        "subject": "f",
        "gdp_bound": {},
        "claimed_epsilon": 3.0,
        "delta": 1e-5,
        "claim": {"source": "PLD accountant of (σ, q, T)"},
        "settings": {"accountant_history": [[1.0, 0.1, 50], [2.0, 0.1, 20]], "noise_multiplier": 1.0},
    }
    ((_, mechanisms),) = releases_in_results(whitebox, "x")[0]
    assert [m["steps"] for m in mechanisms] == [50, 20]


@pytest.mark.slow
def test_synth_check_records_tags_mlflow_and_refuses_a_release_over_budget(invoke, tmp_path):
    import numpy as np
    import pandas as pd
    from mlflow.tracking import MlflowClient

    rng = np.random.default_rng(0)
    for name in ("train", "holdout", "syn"):
        pd.DataFrame({"age": rng.normal(40, 10, 200).round(), "income": rng.lognormal(10, 0.5, 200)}).to_csv(
            tmp_path / f"{name}.csv", index=False
        )
    tracking = f"sqlite:///{tmp_path}/mlflow.db"
    args = [
        "synth-check",
        "--train",
        "train.csv",
        "--holdout",
        "holdout.csv",
        "--synthetic",
        "syn.csv",
        "--claimed-epsilon",
        "2",
        "--tracking-uri",
        tracking,
        "--ledger",
        "ledger.db",
        "--dataset",
        "census",
        "--quiet",
    ]
    code, out, err = invoke(*args)
    assert code == 0, err
    assert "ledger: recorded release #1 on dataset 'census'" in out
    (results_path,) = tmp_path.glob("runs/*-synth-check/results.json")
    results = json.loads(results_path.read_text())
    assert results["ledger"]["recorded"] and results["ledger"]["epsilon_spent"] == pytest.approx(2.0, abs=1e-3)
    tags = MlflowClient(tracking).get_run(results["mlflow"]["parent_run_id"]).data.tags
    assert tags["ledger.dataset"] == "census" and tags["ledger.release_ids"] == "1"
    # the report, rendered again after the release was recorded, shows the dataset's spent budget
    report = (results_path.parent / "report.html").read_text()
    assert '<section id="ledger">' in report and "census" in report and "Spent ε (after this run)" in report
    assert (
        invoke(
            "ledger",
            "set-budget",
            "--dataset",
            "census",
            "--ledger",
            "ledger.db",
            "--max-epsilon",
            "3",
            "--delta",
            "1e-4",
        )[0]
        == 0
    )
    code, out, err = invoke(*args)
    assert code == 1 and "FAIL (privacy ledger)" in err
    with Ledger.open("ledger.db") as ledger:
        assert ledger.count_releases("census") == 1
