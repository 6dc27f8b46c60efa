"""Third-party libraries' own output goes to the command's library log, never to the console.

transformers writes its warnings through its own stderr handler (with raw ANSI colour codes in its
loading report) and through `warnings.warn`; Hugging Face libraries draw progress bars; the
multiprocessing resource tracker prints "There appear to be N leaked semaphore objects" when a
worker that held a lock is ended. On a CI console these read as errors of the audit and break the
one-line contract of a verdict command. They are still worth keeping for a bug report, so:

- a command that has a run folder names `library.log` in it (`set_library_log`, an environment
  variable, so that worker processes started afterwards write to the same file);
- every process that loads transformers calls `route_library_output()`: its logger loses the
  console handler and gains one that appends to that file with ANSI codes removed; warnings raised
  from inside transformers, huggingface_hub, tokenizers, peft, safetensors or accelerate go to the
  same file; progress bars are off;
- the resource tracker is started with its stderr on that file (it is the process that prints the
  semaphore note), when the command names a log before anything started one.

Without a log named (a library call outside a command) the same output is dropped, not printed:
`--quiet` or not, the console carries only what the tool itself says.
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from pathlib import Path

__all__ = ["LOG_ENV", "LOG_NAME", "library_log", "route_library_output", "set_library_log", "strip_ansi"]

LOG_ENV = "PRIVACY_AUDIT_LIBRARY_LOG"
LOG_NAME = "library.log"
_LIBRARIES = ("transformers", "huggingface_hub", "tokenizers", "peft", "safetensors", "accelerate")
# CSI sequences (colours, cursor moves) and the two-byte escapes: what a terminal would interpret.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def strip_ansi(text: str) -> str:
    """`text` without terminal escape sequences."""
    return _ANSI.sub("", text)


def library_log() -> Path | None:
    """The library log this process writes to, if the command named one."""
    found = os.environ.get(LOG_ENV)
    return Path(found) if found else None


def set_library_log(path: Path | None, *, resource_tracker: bool = False) -> None:
    """Name the file (or none) that libraries' output goes to, for this process and the workers it
    starts from now on. `resource_tracker`: also start multiprocessing's resource tracker with its
    stderr on that file, unless one is already running (a language-model command's workers hold locks)."""
    if path is None:
        os.environ.pop(LOG_ENV, None)
        return
    os.environ[LOG_ENV] = str(path)
    if resource_tracker:
        _start_resource_tracker(Path(path))


def _append(line: str) -> None:
    path = library_log()
    if path is None:
        return
    try:  # opened per line: a staging folder renamed into place, or removed, never breaks the command
        if path.parent.is_dir():
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(strip_ansi(line).rstrip("\n") + "\n")
    except OSError:
        pass


class _LibraryLogHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        try:
            _append(f"{record.levelname} {record.name}: {record.getMessage()}")
        except Exception:  # noqa: BLE001 - a log line must never end the audit
            pass


def _from_library(filename: str) -> bool:
    parts = Path(filename).parts
    return any(name in parts for name in _LIBRARIES)


_original_showwarning = warnings.showwarning


def _showwarning(message, category, filename, lineno, file=None, line=None):
    if _from_library(str(filename)):
        _append(f"WARNING {category.__name__} ({filename}:{lineno}): {message}")
        return
    _original_showwarning(message, category, filename, lineno, file, line)


def route_library_output() -> None:
    """Call in any process before (or right after) it imports transformers: see the module doc."""
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # its fork warning, and threads in workers
    warnings.showwarning = _showwarning
    from transformers.utils import logging as hf_logging

    hf_logging.disable_default_handler()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_warning()
    for name in ("transformers", "huggingface_hub", "peft"):
        logger = logging.getLogger(name)
        logger.propagate = False  # the root logger's console handler (if a library set one) never sees it
        if not any(isinstance(h, _LibraryLogHandler) for h in logger.handlers):
            logger.addHandler(_LibraryLogHandler())
    path = library_log()
    if path is not None:  # a worker process of its own (not a multiprocessing child of the command)
        _start_resource_tracker(path)


def _start_resource_tracker(path: Path) -> None:
    # The tracker is a separate process that inherits stderr when it starts: start it now with fd 2
    # pointing at the log, so its "leaked semaphore" note lands there. Once it runs, nothing can
    # move its output; `_fd` is the tracker's documented-by-source "started" mark (CPython 3.8+).
    from multiprocessing import resource_tracker

    tracker = resource_tracker._resource_tracker
    if getattr(tracker, "_fd", None) is not None or not path.parent.is_dir():
        return
    saved = os.dup(2)
    try:
        with open(path, "a", encoding="utf-8") as handle:
            os.dup2(handle.fileno(), 2)
            try:
                tracker.ensure_running()
            finally:
                os.dup2(saved, 2)
    except OSError:
        pass
    finally:
        os.close(saved)
