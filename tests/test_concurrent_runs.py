"""Two `run`s writing to one SQLite MLflow store at the same time both finish with every run recorded."""

import os
import subprocess
import sys

import mlflow
import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow  # two real audits at once

# Two targets and their MLflow runs each; the ε = 1 target's white-box twin and conformance probes
# (driver-side training that writes no MLflow run of its own) are left out to spare their CPU.
TINY = "privacy:\n  epsilons: [1.0, .inf]\n  whitebox_one_run: false\n  conformance: false\nattacks:\n  names: [loss]\n"


def test_two_runs_against_the_same_sqlite_store_both_finish_with_all_their_runs(tmp_path):
    db = f"sqlite:///{tmp_path}/shared.db"
    procs = []
    for name in ("first", "second"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "tiny.yaml").write_text(TINY)
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "audit.cli",
                    "run",
                    "--preset",
                    "smoke",
                    "--config",
                    "tiny.yaml",
                    "--tracking-uri",
                    db,
                ],
                cwd=folder,
                env={**os.environ, "PYTHONPATH": str(REPO)},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
    mlflow.set_tracking_uri(db)
    runs = mlflow.search_runs(experiment_names=["privacy-audit/run/smoke"])
    assert len(runs) == 2 * 3  # two parents, each with one child per ε
    assert set(runs["status"]) == {"FINISHED"}
    parents = runs[runs["tags.mlflow.parentRunId"].isna()]
    assert len(parents) == 2
