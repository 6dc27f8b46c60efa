"""What every hostile-input battery asserts (tests/test_hostile_*.py, issue 26).

A refused input ends with exit 2, exactly one line on stderr starting "error:" that names the
input, no traceback, control characters escaped, and nothing left behind: no run folder
(finished or `.partial`), no MLflow store, no output written beside a results file, no file
outside the working folder. Commands run in-process through the console entry point (`main`);
user code and user models run in the worker processes the commands start themselves.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from audit.cli import main

_PROGRESS = re.compile(r"^\[\d\d:\d\d(:\d\d)?\] ")


def run_main(args: list[str]) -> tuple[int, float]:
    started = time.monotonic()
    with pytest.raises(SystemExit) as exited:
        main([str(a) for a in args])
    return exited.value.code, time.monotonic() - started


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every entry under `folder` (not following links) with its size and mtime: 'nothing written'."""
    out = {}
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "__pycache__"]  # Python's own cache of the user's modules
        for name in dirs + files:
            path = Path(root) / name
            try:
                info = os.lstat(path)
            except OSError:
                continue
            out[str(path.relative_to(folder))] = (info.st_size, info.st_mtime_ns)
    return out


def assert_refused(
    capsys, args: list[str], names: str, *, folder: Path, before: dict | None = None, limit: float = 60.0
) -> str:
    """Run `args`; assert exit 2, one line naming `names`, nothing written under `folder`."""
    before = snapshot(folder) if before is None else before
    code, seconds = run_main(args)
    out, err = capsys.readouterr()
    # Progress lines ("[00:10] … step: running for 10 s") are not the error: a refusal that takes
    # more than the progress heartbeat under load prints them first. Exactly one error line remains.
    err = "".join(line for line in err.splitlines(keepends=True) if not _PROGRESS.match(line))
    assert code == 2, f"exit {code}: {err}{out}"
    assert err.startswith("error:") and err.count("\n") == 1, err
    assert names in err, err
    assert "Traceback" not in err + out
    assert "\x1b" not in err, "a control character reached the terminal"
    assert len(err) < 1200
    assert seconds < limit, f"took {seconds:.0f} s"
    assert snapshot(folder) == before, "the refused command wrote or changed files"
    return err
