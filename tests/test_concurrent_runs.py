"""Two `run`s writing to one SQLite MLflow store at the same time both finish with every run recorded."""

import functools
import os
import subprocess
import sys

import mlflow
import pytest

from tests.conftest import REPO, TINY_RUN_YAML

pytestmark = pytest.mark.slow  # two real audits at once

# Two targets and their MLflow runs each, at the suite's tiny size (tests/conftest.py TINY_RUN_YAML): what is
# checked is two processes writing one SQLite store at once, which does not depend on the audit's size.
TINY = TINY_RUN_YAML


def test_two_runs_against_the_same_sqlite_store_both_finish_with_all_their_runs(tmp_path):
    db = f"sqlite:///{tmp_path}/shared.db"
    procs = []
    cores = sorted(os.sched_getaffinity(0))
    for index, name in enumerate(("first", "second")):
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
                # One core each: a run given one core starts no side lane (a second spawned interpreter, ~6 s of
                # CPU importing torch), which writes nothing to MLflow; the writers under test are the drivers.
                preexec_fn=functools.partial(os.sched_setaffinity, 0, {cores[index % len(cores)]}),
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
