"""Shared fixtures. Tests run on the CPU with real Opacus, real MLflow (SQLite file) and real files.

Conventions for every test file (docs/test-suite.md has the long form):

- Markers: `slow` (trains real models end to end, runs a full audit in a fresh process, or otherwise takes
  more than ~5 s of CPU on its own), `browser` (headless Chromium), `packaging` (builds or installs the
  wheel), `gpu` (needs a CUDA device; skipped without one, the only skip a CPU machine may show).
  `make test-fast` runs `-m "not slow and not browser and not packaging"`.
- The suite runs under pytest-xdist (`make test` = `-n 2 --dist loadfile`). So: tmp_path / tmp_path_factory
  for every file, port 0 for every server, one MLflow store per test (or per shared fixture), never chdir
  without monkeypatch.chdir, never write into the checkout.
- Expensive things are built once: a module-scoped fixture, shared by the tests of its file. loadfile keeps
  a file on one worker, so it is built once; a session-scoped fixture would be built once per worker.
  (`xdist_group` marks do nothing here: xdist 3.8 groups by rewriting `item._nodeid`, which pytest 9.2 no
  longer reads, so loadgroup schedules test by test.)
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"


def run_cli(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `privacy-audit ARGS` as a user would, in a fresh process, from `cwd`."""
    return subprocess.run(
        [sys.executable, "-m", "audit.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


@pytest.fixture
def cli(tmp_path):
    def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return run_cli(*args, cwd=tmp_path, timeout=timeout)

    return _run


@pytest.fixture(autouse=True)
def _no_crash_log_folder_left_behind():
    """An in-process CLI call sets the crash-log folder (a process-wide setting), often relative ('.'):
    reset it so a later test's internal error never writes its log into the checkout."""
    yield
    crash_log = sys.modules.get("audit.machinery.crash_log")
    if crash_log is not None:
        crash_log.set_log_folder(None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cuda = None
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            if cuda is None:
                import torch

                cuda = torch.cuda.is_available()
            if not cuda:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU (marked gpu)"))


# --- where the time goes ---------------------------------------------------------------------------
# PRIVACY_AUDIT_TEST_TIMES=FILE appends one line per test as it finishes (setup, call and teardown
# together): nodeid, wall seconds, CPU seconds (this process plus the children it waited for: CLI runs, worker pools). Works
# under xdist (each worker appends its own lines); `python -m tests.timing FILE` sums them per file.
_TIMES = os.environ.get("PRIVACY_AUDIT_TEST_TIMES")


def _cpu_seconds() -> float:
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


if _TIMES:
    import time

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        start_wall, start_cpu = time.perf_counter(), _cpu_seconds()
        yield
        wall, cpu = time.perf_counter() - start_wall, _cpu_seconds() - start_cpu
        with open(_TIMES, "a") as out:
            out.write(f"{item.nodeid}\t{wall:.2f}\t{cpu:.2f}\n")
