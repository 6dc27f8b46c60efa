"""Shared fixtures. Tests run on the CPU with real Opacus, real MLflow (SQLite file) and real files.

Conventions for every test file (docs/test-suite.md has the long form):

- Markers: `slow` (trains real models end to end, runs a full audit in a fresh process, or otherwise takes
  more than ~5 s of CPU on its own), `browser` (headless Chromium), `packaging` (builds or installs the
  wheel), `gpu` (needs a CUDA device; skipped without one, the only skip a CPU machine may show).
  `make test-fast` runs `-m "not slow and not browser and not packaging"`.
- The suite runs under pytest-xdist (`make test` = `-n 2 --dist loadgroup`). So: tmp_path / tmp_path_factory
  for every file, port 0 for every server, one MLflow store per test (or per shared fixture), never chdir
  without monkeypatch.chdir, never write into the checkout.
- Expensive things are built once: a module- or session-scoped fixture defined under tests/. Under xdist
  each worker has its own session, so the hook below puts every test that uses such a fixture in one
  `xdist_group` (named after the fixture): its tests go to one worker and the fixture is built once.
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


def _shared_fixture_group(item: pytest.Item) -> str | None:
    """The xdist group of a test that uses an expensive shared fixture: the first (by name) module- or
    session-scoped fixture it requests that is defined in this test folder. None for other tests."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    names = []
    for name, defs in info.name2fixturedefs.items():
        fixturedef = defs[-1]
        if fixturedef.scope not in ("module", "package", "session"):
            continue
        code = getattr(fixturedef.func, "__code__", None)
        if code is None or not Path(code.co_filename).resolve().is_relative_to(TESTS):
            continue  # pytest's own (tmp_path_factory, ...) cost nothing
        source = Path(code.co_filename)
        where = "" if fixturedef.scope == "session" else f"{source.name}::"
        names.append(f"{where}{name}")
    return sorted(names)[0] if names else None


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cuda = None
    for item in items:
        if not any(item.iter_markers("xdist_group")):
            group = _shared_fixture_group(item)
            if group is not None:
                item.add_marker(pytest.mark.xdist_group(group))
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
