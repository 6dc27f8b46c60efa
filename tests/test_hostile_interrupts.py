"""Ctrl-C inside a real `privacy-audit run`, landing in the libraries it runs (issue #39).

Each case starts a real `run` (a tiny config, a real SQLite MLflow store) in a fresh process and
delivers SIGINT at a chosen point: inside Opacus's DP optimizer step while a target trains (sent from
outside, to the process group, as a terminal's Ctrl-C is), inside scikit-learn's gradient-boosting
tree growing (the shadow attack's classifier), and inside MLflow's SQL store while it logs. A
launcher patches the one library function so that it announces where it is (a marker file) and, for
the in-process cases, signals its own process there: the signal handler the tool installed then
raises inside that library's frame, which is what a Ctrl-C at that moment does.

Every case must end as interrupted: exit 130, one "interrupted" line, no traceback, every MLflow run
of the attempt KILLED (none RUNNING, none FAILED), and nothing presented as done — no finished run
folder, no results.json outside the staging folder kept for `--resume`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.security, pytest.mark.slow]  # each case starts a real run (~10-20 s of CPU)

# The white-box twin and the conformance probes train in the driver process, beside the targets: off, so
# that the Opacus case's DP steps are a target's (the test's point) and no case pays for them
# (tests/test_end_to_end.py interrupts and resumes a run that has both).
TINY = """\
name: tiny
data: {n_rows: 600}
training: {hidden_sizes: [16], epochs: 2}
privacy: {epsilons: [2.0, .inf], accountant: gdp, whitebox_one_run: false, conformance: false}
attacks: {names: [loss, shadow], n_shadow_models: 2, models_per_task: 2}
"""

# Patches `module:Class.method` so that its N-th call writes the marker file and, with `self`,
# sends SIGINT to this process from inside the call (the library's frame is on the stack). The hook
# is read from the environment and installed at import, outside the main guard: `run` trains its
# targets in a second, spawned process (audit/sweep/side_lane.py), which imports this file as
# `__mp_main__` and so carries the hook too; only the command itself runs under the guard.
LAUNCHER = textwrap.dedent(
    """\
    import importlib, os, signal, sys


    def _install():
        target, nth = os.environ["HOOK_TARGET"], int(os.environ["HOOK_NTH"])
        how, marker = os.environ["HOOK_HOW"], os.environ["HOOK_MARKER"]
        module_name, _, attribute = target.partition(":")
        owner_name, _, method = attribute.rpartition(".")
        owner = importlib.import_module(module_name)
        if owner_name:
            owner = getattr(owner, owner_name)
        original = getattr(owner, method)
        calls = [0]

        def hooked(*args, **kwargs):
            calls[0] += 1
            if calls[0] == nth:
                with open(marker, "w") as handle:
                    handle.write(target)
                if how == "self":
                    os.kill(os.getpid(), signal.SIGINT)
            return original(*args, **kwargs)

        setattr(owner, method, hooked)


    _install()

    if __name__ == "__main__":
        sys.argv = ["privacy-audit", *sys.argv[1:]]
        from audit.cli import main

        main()
    """
)


def _interrupted_run(tmp_path: Path, target: str, nth: int, how: str) -> tuple[subprocess.CompletedProcess, Path]:
    (tmp_path / "tiny.yaml").write_text(TINY)
    (tmp_path / "launch.py").write_text(LAUNCHER)
    marker = tmp_path / "reached"
    args = ["run", "--preset", "smoke", "--config", "tiny.yaml", "--out", "runs"]
    args += ["--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"]
    proc = subprocess.Popen(
        [sys.executable, "launch.py", *args],
        cwd=tmp_path,
        env={
            **os.environ,
            "PYTHONPATH": str(REPO),
            "HOOK_TARGET": target,
            "HOOK_NTH": str(nth),
            "HOOK_HOW": how,
            "HOOK_MARKER": str(marker),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the Ctrl-C below reaches it and its workers only
    )
    try:
        if how == "outside":
            deadline = time.monotonic() + 400
            while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert marker.exists(), f"the run never reached {target}: the case tested nothing\n{err[-2000:]}"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), tmp_path


def _assert_interrupted(done: subprocess.CompletedProcess, root: Path) -> None:
    console = done.stdout + done.stderr
    assert done.returncode == 130, console[-3000:]
    assert "interrupted" in done.stderr
    assert "Traceback" not in console and "internal error" not in console, console[-3000:]
    # Nothing presented as done: no verdict line, no finished folder, no results outside the staging folder.
    assert not any(word in done.stdout for word in ("PASS", "FAIL (", "INCONCLUSIVE")), done.stdout[-2000:]
    runs = root / "runs"
    finished = [p for p in runs.iterdir() if not p.name.startswith(".")] if runs.exists() else []
    assert finished == [], finished
    results = [p for p in runs.rglob("results.json") if ".partial" not in str(p)] if runs.exists() else []
    assert results == []
    # Every MLflow run of the attempt is closed as KILLED: none left RUNNING, none FAILED (a crash).
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    experiments = client.search_experiments()
    statuses = [
        run.info.status for exp in experiments for run in client.search_runs([exp.experiment_id], max_results=1000)
    ]
    assert statuses, "the run had started no MLflow run: the case interrupted nothing tracked"
    assert "RUNNING" not in statuses and "FAILED" not in statuses, statuses
    assert "KILLED" in statuses, statuses


def test_ctrl_c_from_the_terminal_while_a_target_trains_in_opacus(tmp_path):
    done, root = _interrupted_run(tmp_path, "opacus.optimizers.optimizer:DPOptimizer.step", 2, "outside")
    _assert_interrupted(done, root)


def test_ctrl_c_inside_scikit_learns_gradient_boosting(tmp_path):
    done, root = _interrupted_run(
        tmp_path, "sklearn.ensemble._hist_gradient_boosting.grower:TreeGrower.grow", 3, "self"
    )
    _assert_interrupted(done, root)


def test_ctrl_c_inside_mlflows_sql_store_while_it_logs(tmp_path):
    done, root = _interrupted_run(
        tmp_path, "mlflow.store.tracking.sqlalchemy_store:SqlAlchemyStore.log_batch", 2, "self"
    )
    _assert_interrupted(done, root)
