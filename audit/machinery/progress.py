"""Progress of long work: one small interface the jobs call, three ways to show it.

A job reports *steps*, each with an optional total, and may nest them:

    with progress.step("targets", total=len(epsilons)) as targets:
        for epsilon in epsilons:
            with progress.step(f"target ε={epsilon}: training", total=epochs) as training:
                train(..., on_epoch=lambda epoch, _: training.update(epoch))
            targets.advance()

and says things in passing with `progress.note(text)`. The job never asks where it goes:

- `Progress()` is silent (the Python API's default);
- `CallbackProgress(fn)` calls `fn(event)` with a plain dict per start / update / finish / note
  (the Python API: pass any callable as `progress=`);
- `RichProgress(console)`: a live bar per running step on a terminal (finished inner steps
  vanish, top-level ones stay);
- `LineProgress(stream)`: when the output is not a terminal (CI, `make audit > log`), one line
  per finished step with its elapsed time (a step stopped by an error prints nothing: the error
  line follows), and a heartbeat line for a step still running after
  `heartbeat_s` seconds, so a log never sits silent for minutes.

`progress_for(console, quiet)` picks the right one for a command; `as_progress(x)` turns what a
Python caller passed (None, a Progress, a callable) into a Progress.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, TextIO

__all__ = ["Progress", "Step", "LazyStep", "PieceReporter", "CallbackProgress", "RichProgress", "LineProgress", "as_progress", "progress_for"]

HEARTBEAT_SECONDS = 30.0


@dataclass
class Step:
    """One piece of work being reported: `advance()` / `update(n)` move it towards `total`."""

    description: str
    total: int | None
    depth: int
    started: float = field(default_factory=time.monotonic)
    completed: int = 0
    _owner: "Progress | None" = field(default=None, repr=False, compare=False)
    handle: Any = field(default=None, repr=False, compare=False)

    def advance(self, n: int = 1) -> None:
        self.update(self.completed + n)

    def update(self, completed: int) -> None:
        self.completed = int(completed)
        if self._owner is not None:
            self._owner._updated(self)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def counts(self) -> str:
        if self.total is None:
            return f" {self.completed}" if self.completed else ""
        return f" {self.completed}/{self.total}"


class Progress:
    """Silent progress, and the base of the others: subclasses override the `_started` … hooks."""

    def __init__(self) -> None:
        self._stack: list[Step] = []
        self._lock = threading.Lock()
        self.started = time.monotonic()

    @contextmanager
    def step(self, description: str, total: int | None = None) -> Iterator[Step]:
        """Report one step; it finishes when the block ends (complete, or failed on an exception)."""
        step = self.begin(description, total)
        ok = False
        try:
            yield step
            ok = True
        finally:
            self.end(step, ok)

    @contextmanager
    def lazy_step(self, description: str, total: int | None = None) -> Iterator["LazyStep"]:
        """Like `step`, but shown only from its first `advance`/`update`: input checks that run
        first and fail print nothing but their one error line."""
        lazy = LazyStep(self, description, total)
        ok = False
        try:
            yield lazy
            ok = True
        finally:
            if lazy.step is not None:
                self.end(lazy.step, ok)

    def begin(self, description: str, total: int | None = None) -> Step:
        """Start a step by hand (prefer `step`); end it with `end`."""
        step = Step(description, None if total is None else int(total), depth=len(self._stack), _owner=self)
        with self._lock:
            self._stack.append(step)
        self._started(step)
        return step

    def end(self, step: Step, ok: bool = True) -> None:
        with self._lock:
            if step not in self._stack:
                return
            self._stack.remove(step)
        self._finished(step, ok)

    def reporter(self, prefix: str = "") -> "PieceReporter":
        """A plain callback `(what, done, total)` for code below audit/ (attacks, targets): see PieceReporter."""
        return PieceReporter(self, prefix)

    def note(self, text: str) -> None:
        """A remark worth showing while work goes on (a warning, a skipped piece)."""

    def close(self) -> None:
        """Stop live displays; safe to call twice."""

    # hooks
    def _started(self, step: Step) -> None:
        pass

    def _updated(self, step: Step) -> None:
        pass

    def _finished(self, step: Step, ok: bool) -> None:
        pass


class CallbackProgress(Progress):
    """Calls `callback(event)` with {"event", "description", "completed", "total", "elapsed_s", "depth"}."""

    def __init__(self, callback: Callable[[dict[str, Any]], None]):
        super().__init__()
        self.callback = callback

    def _event(self, kind: str, step: Step, **extra: Any) -> None:
        self.callback({"event": kind, "description": step.description, "completed": step.completed,
                       "total": step.total, "elapsed_s": round(step.elapsed, 3), "depth": step.depth, **extra})

    def _started(self, step: Step) -> None:
        self._event("start", step)

    def _updated(self, step: Step) -> None:
        self._event("update", step)

    def _finished(self, step: Step, ok: bool) -> None:
        self._event("finish", step, ok=ok)

    def note(self, text: str) -> None:
        self.callback({"event": "note", "text": text})


class LazyStep:
    """A step that begins on its first advance/update (see `Progress.lazy_step`)."""

    def __init__(self, progress: Progress, description: str, total: int | None):
        self.progress, self.description, self.total = progress, description, total
        self.step: Step | None = None

    def _started(self) -> Step:
        if self.step is None:
            self.step = self.progress.begin(self.description, self.total)
        return self.step

    def advance(self, n: int = 1) -> None:
        self._started().advance(n)

    def update(self, completed: int) -> None:
        self._started().update(completed)


class PieceReporter:
    """Turns `report(what, done, total)` calls from code that cannot import audit/ into steps.

    Attacks and trainers take a plain callable (e.g. `AttackContext.report_progress`); each new
    `what` ends the previous piece and starts a step for it. `close()` ends the last one.
    """

    def __init__(self, progress: Progress, prefix: str = ""):
        self.progress = progress
        self.prefix = f"{prefix}: " if prefix else ""
        self.current: Step | None = None

    def __call__(self, what: str, done: float, total: int | None) -> None:
        what = self.prefix + what
        if self.current is None or self.current.description != what:
            self.close()
            self.current = self.progress.begin(what, total)
        self.current.update(int(done))

    def close(self, ok: bool = True) -> None:
        if self.current is not None:
            self.progress.end(self.current, ok)
            self.current = None


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes // 60:d}:{minutes % 60:02d}:{secs:02d}" if minutes >= 60 else f"{minutes:02d}:{secs:02d}"


class LineProgress(Progress):
    """Plain lines for logs: `[mm:ss] description n/N: 12.3 s` when a step ends; heartbeats between."""

    def __init__(self, stream: TextIO, heartbeat_s: float = HEARTBEAT_SECONDS):
        super().__init__()
        self.stream = stream
        self.heartbeat_s = heartbeat_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_line = time.monotonic()
        self._heartbeat_poll = 5.0  # how often the heartbeat thread looks (tests shorten it)

    def _print(self, text: str) -> None:
        self._last_line = time.monotonic()
        print(f"[{_clock(self._last_line - self.started)}] {text}", file=self.stream, flush=True)

    def _started(self, step: Step) -> None:
        if self._thread is None and self.heartbeat_s > 0:
            self._thread = threading.Thread(target=self._heartbeat, name="progress-heartbeat", daemon=True)
            self._thread.start()

    def _finished(self, step: Step, ok: bool) -> None:
        # A step ended by an error or Ctrl-C prints nothing: the one-line error (or "interrupted")
        # that follows says what happened, and bad input stays one line.
        if ok:
            self._print(f"{step.description}{step.counts()}: {step.elapsed:.1f} s")

    def note(self, text: str) -> None:
        self._print(text)

    def _heartbeat(self) -> None:
        while not self._stop.wait(min(self.heartbeat_s, self._heartbeat_poll)):
            with self._lock:
                running = self._stack[-1] if self._stack else None
            if running is not None and time.monotonic() - self._last_line >= self.heartbeat_s:
                self._print(f"… {running.description}{running.counts()}: running for {running.elapsed:.0f} s")

    def close(self) -> None:
        self._stop.set()


class RichProgress(Progress):
    """A rich live display on a terminal: one bar per running step; finished inner steps vanish."""

    def __init__(self, console):
        super().__init__()
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress as Bars, SpinnerColumn, TextColumn,
                                   TimeElapsedColumn)

        self.bars = Bars(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                         TimeElapsedColumn(), console=console, transient=False)
        self._live = False

    def _started(self, step: Step) -> None:
        # Started on the first step, not before: input errors found earlier print one clean line.
        if not self._live:
            self.bars.start()
            self._live = True
        step.handle = self.bars.add_task("  " * step.depth + step.description, total=step.total)

    def _updated(self, step: Step) -> None:
        self.bars.update(step.handle, completed=step.completed)

    def _finished(self, step: Step, ok: bool) -> None:
        if step.depth > 0 or not ok:  # failed steps vanish too: the error line says what happened
            self.bars.remove_task(step.handle)
        elif step.total is not None:
            self.bars.update(step.handle, completed=step.total)

    def note(self, text: str) -> None:
        self.bars.console.print(f"[yellow]{text}[/yellow]", soft_wrap=True, highlight=False)

    def close(self) -> None:
        if self._live:
            self.bars.stop()
            self._live = False


def as_progress(progress: Progress | Callable[[dict[str, Any]], None] | None) -> Progress:
    """What the Python API accepts as `progress=`: None (silent), a Progress, or a callback."""
    if progress is None:
        return Progress()
    if isinstance(progress, Progress):
        return progress
    if callable(progress):
        return CallbackProgress(progress)
    raise TypeError(f"progress: expected None, a Progress or a callable, got {type(progress).__name__}")


def progress_for(console, quiet: bool = False) -> Progress:
    """A command's progress on `console` (stderr): bars on a terminal, lines otherwise, nothing if quiet."""
    if quiet:
        return Progress()
    if console.is_terminal:
        return RichProgress(console)
    return LineProgress(console.file)
