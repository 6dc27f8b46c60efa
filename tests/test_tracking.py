"""Claims about the MLflow conventions (audit/machinery/tracking.py): what an MLflow user finds."""

from __future__ import annotations

import json

import jsonschema
import pandas as pd

from audit.machinery.config import resolve_config
from audit.machinery.tracking import (
    AuditTracker,
    NullTracker,
    experiment_name,
    open_tracker,
    system_tags,
    verdict_status,
)
from tests.conftest import REPO


def test_experiments_carry_a_prefix_per_command():
    assert experiment_name("run", "default") == "privacy-audit/run/default"
    assert experiment_name("synth-check") == "privacy-audit/synth-check"


def test_runs_carry_mlflow_system_tags_the_verdict_and_no_none_params(tmp_path):
    uri = f"sqlite:///{tmp_path}/m.db"
    tracker = AuditTracker(uri, experiment_name("audit-scores"), command="audit-scores")
    run_id = tracker.start_run("scores.csv", tags={"source": "scores.csv", "empty": None})
    tracker.log_params(run_id, {"delta": 1e-5, "claimed_epsilon": None})
    tracker.log_table(
        run_id,
        pd.DataFrame({"member": [0, 1], "score": [0.1, 0.9]}),
        name="scores.csv",
        source="scores.csv",
        context="scores",
    )
    tracker.set_verdict(run_id, {"status": "inconclusive", "passed": True, "reasons": []})
    tracker.finish(run_id)
    run = tracker.client.get_run(run_id)
    assert run.data.tags["mlflow.source.name"] == "privacy-audit audit-scores"
    assert run.data.tags["mlflow.user"] and run.data.tags["verdict"] == "inconclusive"
    assert "empty" not in run.data.tags and run.data.params == {"delta": "1e-05"}
    (dataset_input,) = run.inputs.dataset_inputs
    assert dataset_input.dataset.name == "scores.csv" and dataset_input.tags[0].value == "scores"
    assert tracker.client.get_experiment(tracker.experiment_id).name == "privacy-audit/audit-scores"
    assert not [p for p in tmp_path.iterdir() if "lock" in p.name]  # no init-lock beside the database


def test_verdict_status_follows_the_shared_contract():
    assert verdict_status({"status": "fail", "passed": False}) == "fail"
    assert verdict_status({"passed": True, "reasons": []}) == "pass"
    assert verdict_status({"passed": False, "reasons": ["x"]}) == "fail"


def test_git_commit_tag_only_inside_a_checkout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not a git checkout
    tags = system_tags("run")
    assert "mlflow.source.git.commit" not in tags and tags["mlflow.source.type"] == "LOCAL"


def test_tracking_off_logs_nothing_and_the_python_api_still_writes_results(tmp_path, monkeypatch):
    from audit.sweep.runner import run_audit

    monkeypatch.chdir(tmp_path)
    assert isinstance(open_tracker(None, "x", enabled=False), NullTracker)
    config = resolve_config(
        "smoke",
        None,
        {
            "data": {"n_rows": 400},
            "training": {"epochs": 1, "hidden_sizes": [8]},
            "privacy": {"epsilons": ["inf"]},
            "attacks": {"names": ["loss"]},
        },
    )
    events = []
    audit = run_audit(config, out_dir=tmp_path / "runs", tracking=False, progress=events.append)
    assert audit.results["mlflow"] is None and (audit.run_dir / "report.html").is_file()
    schema = json.loads((REPO / "audit" / "schema" / "results.schema.json").read_text())
    jsonschema.validate(json.loads((audit.run_dir / "results.json").read_text()), schema)
    assert not list(tmp_path.glob("mlflow.db")) and not (tmp_path / "mlartifacts").exists()
    finished = [e["description"] for e in events if e["event"] == "finish"]
    assert "targets" in finished and any("training" in d for d in finished)
