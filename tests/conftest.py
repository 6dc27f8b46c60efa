"""Shared fixtures. Tests run on the CPU with real Opacus, real MLflow (SQLite file) and real files."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")

REPO = Path(__file__).resolve().parents[1]


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
