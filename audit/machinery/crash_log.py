"""Where an internal error's traceback goes: a log file in the command's output folder, not the terminal.

A crash is a bug of ours (exit 3), never a finding (1) or bad input (2). The user sees one line
naming the log; the log holds the traceback (and a worker's traceback when the crash was in a
child process) for the bug report.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import sys
import tempfile
import traceback
from pathlib import Path

__all__ = ["log_folder", "set_log_folder", "write_crash_log"]

_folder: Path | None = None


def set_log_folder(folder: str | Path | None) -> None:
    """The folder the running command writes into (its run folder, or its --out)."""
    global _folder
    _folder = None if folder is None else Path(folder)


def log_folder() -> Path:
    if _folder is not None and _folder.is_dir():
        return _folder
    return Path(tempfile.gettempdir())


def write_crash_log(exc: BaseException, argv: list[str]) -> Path:
    """Write the traceback of `exc` (and a worker's, if it carries one) to a new log file; its path."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    from audit.machinery.secrets import redact, redact_argv

    # The log lands in a shared temp folder and in bug reports: the command line and every message
    # in the traceback are redacted (a ledger URI's password, a token), like everything else we print.
    lines = [
        f"privacy-audit internal error at {stamp}",
        f"command: {' '.join(redact_argv(argv))}",
        f"python {platform.python_version()} on {platform.platform()}",
        "",
        redact("".join(traceback.format_exception(exc))),
    ]
    child = getattr(exc, "child_traceback", None)
    if child:
        lines += ["traceback in the worker process:", redact(child)]
    for folder in (log_folder(), Path(tempfile.gettempdir())):
        try:
            fd, name = tempfile.mkstemp(prefix=f"privacy-audit-crash-{stamp}-", suffix=".log", dir=folder)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write("\n".join(lines))
            return Path(name)
        except OSError:  # a read-only or full output folder: fall back to the temp dir
            continue
    print(redact("".join(traceback.format_exception(exc))), file=sys.stderr)  # nowhere to write: keep it visible
    return Path("<stderr>")
