"""`gate` writes where the run wrote (issue 36, item 2): the gated verdict goes to the MLflow run the
results point to — tags `verdict.gate`, `verdict.gate.policy`, the policy file as an artifact under
gate/ — and the run's own `verdict` tag is left as the run wrote it. A gate on results with no store
or no run says so in one line; a store named only by the file is used when it is an existing MLflow
SQLite store (a results file must not make the gate create a database or contact a server).

The MLflow run is real (a SQLite store written by the tool's own tracker, as `run` writes it); the
results are the smoke example pointed at it and written with the tool's digest.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hostile_support import run_main

from audit.machinery.result_integrity import ENV_KEY, ENV_VERIFY
from audit.machinery.run_directory import write_result_json_atomic

pytestmark = pytest.mark.slow  # a real MLflow store: its schema migration takes seconds

DATA = Path(__file__).parent / "data"
RUN_EXAMPLE = json.loads((DATA / "results_smoke_example.json").read_text())
POLICY = Path(__file__).resolve().parents[1] / "examples" / "policy-strict.yaml"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One real MLflow SQLite store for the module (creating one migrates its schema: seconds)."""
    from audit.machinery.tracking import AuditTracker

    folder = tmp_path_factory.mktemp("store")
    tracker = AuditTracker(f"sqlite:///{folder}/mlflow.db", "privacy-audit/run", command="run")
    return tracker


@pytest.fixture
def tracked_run(tmp_path, monkeypatch, store):
    monkeypatch.delenv(ENV_KEY, raising=False)
    monkeypatch.delenv(ENV_VERIFY, raising=False)
    monkeypatch.chdir(tmp_path)
    run_id = store.start_run("smoke")
    store.set_verdict(run_id, {"status": "inconclusive"})
    store.finish(run_id)
    results = {**RUN_EXAMPLE, "mlflow": {"tracking_uri": store.tracking_uri, "parent_run_id": run_id}}
    write_result_json_atomic(tmp_path / "run" / "results.json", results)
    return tmp_path, store.tracking_uri, run_id


def _tags(uri: str, run_id: str) -> dict[str, str]:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri).get_run(run_id).data.tags


def test_a_failed_gate_reaches_the_mlflow_run_beside_its_own_verdict(tracked_run, capsys):
    _, uri, run_id = tracked_run
    code, _ = run_main(["gate", "--policy", POLICY, "run"])
    out, err = capsys.readouterr()
    assert code == 1, err + out
    tags = _tags(uri, run_id)
    assert tags["verdict"] == "inconclusive"  # the run's own verdict, untouched
    assert tags["verdict.gate"] == "fail"
    assert tags["verdict.gate.policy"].startswith("strict (") and str(POLICY) in tags["verdict.gate.policy"]
    assert "max_tpr_at_fpr" in tags["verdict.gate.reasons"]
    assert tags["verdict.gate.integrity"] == "intact; signature unsigned"
    from mlflow.tracking import MlflowClient

    assert [a.path for a in MlflowClient(tracking_uri=uri).list_artifacts(run_id, "gate")] == [
        "gate/policy-strict.yaml"
    ]
    assert f"MLflow: tag verdict.gate = fail on run {run_id}" in " ".join(out.split())


def test_a_gate_without_a_store_or_run_says_so_in_one_line(tracked_run, capsys):
    folder, uri, run_id = tracked_run
    (folder / "policy.yaml").write_text("rules:\n  fail_on_violation: true\n")
    lines = {
        "no run": ({k: v for k, v in RUN_EXAMPLE.items() if k != "mlflow"}, "name no MLflow run"),
        "a store that is not there": (
            {**RUN_EXAMPLE, "mlflow": {"tracking_uri": f"sqlite:///{folder}/gone.db", "parent_run_id": run_id}},
            "is not an MLflow SQLite store",
        ),
        "a server named by the file": (
            {**RUN_EXAMPLE, "mlflow": {"tracking_uri": "http://203.0.113.1:5000", "parent_run_id": run_id}},
            "give --tracking-uri",
        ),
        "a run not in the store": (
            {**RUN_EXAMPLE, "mlflow": {"tracking_uri": uri, "parent_run_id": "0" * 32}},
            "is not in the store",
        ),
    }
    for name, (results, words) in lines.items():
        write_result_json_atomic(folder / name / "results.json", results)
        code, _ = run_main(["gate", "--policy", "policy.yaml", name])
        out, err = capsys.readouterr()
        assert code == 0, name + err + out
        said = [line for line in out.splitlines() if line.startswith("MLflow:")]
        assert len(said) == 1 and words in said[0], (name, out)
    assert not (folder / "gone.db").exists()  # nothing created where the file pointed
    assert _tags(uri, run_id).get("verdict.gate") is None


def test_a_foreign_sqlite_database_named_by_the_file_is_left_alone(tracked_run, capsys):
    folder, _, run_id = tracked_run
    (folder / "policy.yaml").write_text("rules:\n  fail_on_violation: true\n")
    with sqlite3.connect(folder / "app.db") as connection:
        connection.execute("CREATE TABLE customers (id INTEGER)")
    results = {**RUN_EXAMPLE, "mlflow": {"tracking_uri": f"sqlite:///{folder}/app.db", "parent_run_id": run_id}}
    write_result_json_atomic(folder / "foreign" / "results.json", results)
    code, _ = run_main(["gate", "--policy", "policy.yaml", "foreign"])
    out, err = capsys.readouterr()
    assert code == 0, err + out
    with sqlite3.connect(folder / "app.db") as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"customers"}
