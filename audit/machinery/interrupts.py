"""Holding Ctrl-C / SIGTERM across a commit: work that was kept is reported as kept.

An interrupt that lands between a database COMMIT and the line saying what was recorded used to end
as `interrupted` (exit 130) with the row committed: the user re-records it and the budget counts it
twice. Inside `held_interrupts()` SIGINT and SIGTERM only set a flag; the holder decides what the
interrupt means once its work is settled — kept: say so and exit 0; rolled back: raise it (130).

Only the main thread can change signal handlers; elsewhere (a writer thread, a test worker) the
holder is a no-op that never reports an interrupt.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

__all__ = [
    "HeldInterrupts",
    "held_interrupts",
    "install_interrupt_handlers",
    "interrupt_received",
    "reset_interrupt_received",
]


class HeldInterrupts:
    """Context manager: SIGINT/SIGTERM deferred while inside; `fired` says whether one arrived."""

    def __init__(self):
        self.fired = False
        self._previous: dict[int, Any] = {}
        self._active = False

    def _handler(self, signum, frame):  # noqa: ARG002 - the signal module's signature
        self.fired = True

    def start(self) -> HeldInterrupts:
        if not self._active and threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                try:
                    self._previous[signum] = signal.signal(signum, self._handler)
                except (ValueError, TypeError, OSError):  # pragma: no cover - a handler set from C
                    continue
            self._active = True
        return self

    def stop(self) -> None:
        if self._active:
            for signum, previous in self._previous.items():
                try:
                    signal.signal(signum, previous)
                except (ValueError, TypeError, OSError):  # pragma: no cover
                    pass
            self._previous.clear()
            self._active = False

    def __enter__(self) -> HeldInterrupts:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def held_interrupts() -> HeldInterrupts:
    return HeldInterrupts()


# --------------------------------------------------------------------------------------------------
# Whether Ctrl-C / SIGTERM reached this command at all. A library the signal lands in may swallow the
# KeyboardInterrupt and raise something else (scikit-learn's gradient boosting re-raises it as a
# ValueError): the command still ends as interrupted (130, MLflow runs KILLED), never as a bug (3).

_received = False


def reset_interrupt_received() -> None:
    global _received
    _received = False


def interrupt_received() -> bool:
    return _received


def install_interrupt_handlers() -> None:
    """SIGINT and SIGTERM: note that one arrived, then raise KeyboardInterrupt (Python's own Ctrl-C).
    Only from the main thread (elsewhere signal handlers cannot be set)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum, frame):  # noqa: ARG001 - the signal module's signature
        global _received
        _received = True
        raise KeyboardInterrupt

    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(signum, handler)
        except (ValueError, TypeError, OSError):  # pragma: no cover - a handler set from C
            pass
