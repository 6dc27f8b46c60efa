"""`gate` and `ledger record` on a one-run result, as a CI job would run them after a user's own training script.

Shared by the in-script and the Lightning tests: the script itself stays a fresh process (as the user runs it);
the two commands are read for their exit code and output only, so they run in-process (tests/conftest.py's
convention).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import REPO, run_cli_in_process

STRICT_POLICY = REPO / "examples" / "policy-strict.yaml"


def gate(path: Path, cwd: Path) -> subprocess.CompletedProcess:
    """`gate --policy examples/policy-strict.yaml PATH`."""
    return run_cli_in_process("gate", "--policy", str(STRICT_POLICY), str(path), cwd=cwd)


def assert_passes_gate_and_is_recorded(path: Path, cwd: Path) -> None:
    """The strict policy passes the result (exit 0, PASS) and the ledger records it as release #1."""
    done = gate(path, cwd)
    assert done.returncode == 0 and "PASS" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    ledger = run_cli_in_process(
        "ledger", "record", "--dataset", "demo", "--ledger", str(cwd / "l.db"), "--results", str(path), cwd=cwd
    )
    assert ledger.returncode == 0, ledger.stdout[-2000:] + ledger.stderr[-2000:]
    assert "recorded #1" in ledger.stdout
