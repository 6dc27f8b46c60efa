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
  per finished step with the time of its own work (a piece reported inside it with a line of its
  own, e.g. reference-model training inside an attack, is booked there, not twice; a step stopped
  by an error prints nothing: the error line follows), and heartbeat lines for a step still running
  — after 10 s once pieces of it are done, then every `heartbeat_s` — with done/total and an
  estimate of the time left, so a log never sits silent and a person can tell whether to wait.

`progress_for(console, quiet)` picks the right one for a command; `as_progress(x)` turns what a
Python caller passed (None, a Progress, a callable) into a Progress.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

__all__ = [
    "Progress",
    "Step",
    "LazyStep",
    "PieceReporter",
    "CallbackProgress",
    "RichProgress",
    "LineProgress",
    "CountingPool",
    "as_progress",
    "progress_for",
]

HEARTBEAT_SECONDS = 30.0
FIRST_HEARTBEAT_SECONDS = 10.0


@dataclass
class Step:
    """One piece of work being reported: `advance()` / `update(n)` move it towards `total`."""

    description: str
    total: int | None
    depth: int
    started: float = field(default_factory=time.monotonic)
    # "main": the driver's own work; "side": a step running beside it (the run's second process,
    # audit.sweep.side_lane). Off a terminal each lane's innermost step gets its heartbeat line.
    lane: str = "main"
    completed: int = 0
    _owner: Progress | None = field(default=None, repr=False, compare=False)
    handle: Any = field(default=None, repr=False, compare=False)

    def advance(self, n: int = 1) -> None:
        self.update(self.completed + n)

    def update(self, completed: int) -> None:
        self.completed = int(completed)
        if self._owner is not None:
            self._owner._updated(self)

    # Time of pieces reported inside this step that print a line of their own (reference and shadow
    # model training inside an attack): booked there, not here, so each line is its own work.
    nested_s: float = 0.0

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def own_elapsed(self) -> float:
        return max(0.0, self.elapsed - self.nested_s)

    def counts(self) -> str:
        if self.total is None:
            return f" {self.completed}" if self.completed else ""
        return f" {self.completed}/{self.total}"

    def seconds_left(self) -> float | None:
        """Linear estimate from the pace so far; None before the first piece is done or without a total."""
        if self.total is None or self.completed <= 0 or self.completed >= self.total:
            return None
        return self.elapsed / self.completed * (self.total - self.completed)


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
    def lazy_step(self, description: str, total: int | None = None) -> Iterator[LazyStep]:
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

    def begin(self, description: str, total: int | None = None, lane: str = "main") -> Step:
        """Start a step by hand (prefer `step`); end it with `end`. `lane`: see `Step.lane`."""
        step = Step(description, None if total is None else int(total), depth=len(self._stack), lane=lane, _owner=self)
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

    def reporter(self, prefix: str = "") -> PieceReporter:
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
        left = step.seconds_left()
        self.callback(
            {
                "event": kind,
                "description": step.description,
                "completed": step.completed,
                "total": step.total,
                "elapsed_s": round(step.elapsed, 3),
                "own_s": round(step.own_elapsed, 3),
                "seconds_left": None if left is None else round(left, 1),
                "depth": step.depth,
                **extra,
            }
        )

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

    @property
    def completed(self) -> int:
        return 0 if self.step is None else self.step.completed

    def set_total(self, total: int | None) -> None:
        self.total = total
        if self.step is not None:
            self.step.total = total


class PieceReporter:
    """Turns `report(what, done, total)` calls from code that cannot import audit/ into steps.

    Attacks and trainers take a plain callable (e.g. `AttackContext.report_progress`); each new
    `what` ends the previous piece and starts a step for it, and a piece whose `done` reaches its `total` ends
    there (its line's time is its own work). `close()` ends the last one.
    """

    def __init__(self, progress: Progress, prefix: str = ""):
        self.progress = progress
        self.prefix = f"{prefix}: " if prefix else ""
        self.current: Step | None = None
        self.parent: Step | None = None

    def __call__(self, what: str, done: float, total: int | None) -> None:
        what = self.prefix + what
        if self.current is None or self.current.description != what:
            self.close()
            with self.progress._lock:
                main = [step for step in self.progress._stack if step.lane == "main"]
                self.parent = main[-1] if main else None
            self.current = self.progress.begin(what, total)
        self.current.update(int(done))
        if total is not None and done >= total:  # done: its time is its own, not what the caller does next
            self.close()

    def close(self, ok: bool = True) -> None:
        if self.current is not None:
            if self.parent is not None:
                self.parent.nested_s += self.current.elapsed
            self.progress.end(self.current, ok)
            self.current = None


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    return f"{minutes} min {secs} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def _time_left(step: Step) -> str:
    left = step.seconds_left()
    if left is None:
        if step.total is not None and step.completed >= step.total:
            return ", every unit done, finishing"  # e.g. the white-box twin scoring its canaries after training
        return "" if step.total is None else ", time left: not known before the first one finishes"
    return f", about {_duration(left)} left"


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
        from audit.errors import escape_controls  # a note may quote --out or a file name

        self._last_line = time.monotonic()
        print(f"[{_clock(self._last_line - self.started)}] {escape_controls(text)}", file=self.stream, flush=True)

    def _started(self, step: Step) -> None:
        if self._thread is None and self.heartbeat_s > 0:
            self._thread = threading.Thread(target=self._heartbeat, name="progress-heartbeat", daemon=True)
            self._thread.start()

    def _finished(self, step: Step, ok: bool) -> None:
        # A step ended by an error or Ctrl-C prints nothing: the one-line error (or "interrupted")
        # that follows says what happened, and bad input stays one line.
        if ok:
            self._print(f"{step.description}{step.counts()}: {step.own_elapsed:.1f} s")

    def note(self, text: str) -> None:
        self._print(text)

    def _heartbeat(self) -> None:
        # A step with pieces done says how far it is after FIRST_HEARTBEAT_SECONDS of silence (done/total
        # and the time left); later lines, and a step with nothing done yet, every heartbeat_s. A step
        # with nothing done may still be checking input: an error found there stays the one line.
        beats = 0
        while not self._stop.wait(min(self.heartbeat_s, self._heartbeat_poll, FIRST_HEARTBEAT_SECONDS)):
            with self._lock:
                lanes = {step.lane: step for step in self._stack}  # each lane's innermost running step
            if not lanes:
                continue
            early = beats == 0 and any(s.completed > 0 and s.total is not None for s in lanes.values())
            wait = FIRST_HEARTBEAT_SECONDS if early else self.heartbeat_s
            if time.monotonic() - self._last_line < min(wait, self.heartbeat_s):
                continue
            beats += 1
            for running in lanes.values():
                self._print(
                    f"… {running.description}{running.counts()}: running for {_duration(running.elapsed)}"
                    f"{_time_left(running)}"
                )

    def close(self) -> None:
        self._stop.set()


class RichProgress(Progress):
    """A rich live display on a terminal: one bar per running step; finished inner steps vanish.

    The counts (done/total), the elapsed time and the time left keep their width; on a narrow terminal (80
    columns) only the description is shortened (an ellipsis), so a step never reads "0… … left -:…"."""

    def __init__(self, console):
        super().__init__()
        from rich.progress import BarColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bars
        from rich.table import Column

        self.bars = Bars(
            SpinnerColumn(),
            TextColumn(
                "{task.description}", table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis", min_width=8)
            ),
            BarColumn(bar_width=10),
            _CountsColumn(),
            TimeElapsedColumn(),
            _TimeLeftColumn(),
            console=console,
            transient=False,
            expand=True,
        )
        self._live = False
        self._last_frame = 0.0

    def _started(self, step: Step) -> None:
        # Started on the first step, not before: input errors found earlier print one clean line.
        if not self._live:
            self.bars.start()
            self._live = True
        step.handle = self.bars.add_task("  " * step.depth + step.description, total=step.total, step=step)

    def _updated(self, step: Step) -> None:
        # A unit done is drawn at once, not at rich's next timed frame (10 a second, taken by a thread that waits for
        # the GIL): a step whose first unit is slow (start-up) and whose last ones are quick would otherwise go from
        # 0/4 to 4/4 on screen and never show its time left. At most 20 such frames a second.
        now = time.monotonic()
        refresh = now - self._last_frame >= 0.05
        if refresh:
            self._last_frame = now
        self.bars.update(step.handle, completed=step.completed, total=step.total, refresh=refresh)

    def _finished(self, step: Step, ok: bool) -> None:
        if step.depth > 0 or not ok:  # failed steps vanish too: the error line says what happened
            self.bars.remove_task(step.handle)
        elif step.total is not None:
            self.bars.update(step.handle, completed=step.total)

    def note(self, text: str) -> None:
        from rich.markup import escape

        from audit.errors import escape_controls  # a note may quote --out or a file name: no escapes, no markup

        self.bars.console.print(f"[yellow]{escape(escape_controls(text))}[/yellow]", soft_wrap=True, highlight=False)

    def close(self) -> None:
        if self._live:
            self.bars.stop()
            self._live = False


def _rich_column_base():
    from rich.progress import ProgressColumn

    return ProgressColumn


class _CountsColumn(_rich_column_base()):  # type: ignore[misc]  # rich is imported only on a terminal
    """done/total of the step in its own unit (runs, epochs, steps); "done" alone where no total is known."""

    def render(self, task):
        from rich.text import Text

        step = task.fields.get("step")
        text = step.counts().strip() if step is not None else f"{int(task.completed)}/{task.total}"
        return Text(text or "0", style="progress.download", no_wrap=True, overflow="ignore")


class _TimeLeftColumn(_rich_column_base()):  # type: ignore[misc]  # rich is imported only on a terminal
    """The time left from the step's own pace (`Step.seconds_left`: linear, once one unit is done), refreshed on
    every frame: "left 01:23", "left ?" before the first unit, "finishing" once every unit is done and the step still
    works (a twin scoring its canaries after training); nothing for a step without a total."""

    def render(self, task):
        from rich.text import Text

        step = task.fields.get("step")
        if step is None or step.total is None:
            return Text("", no_wrap=True)
        left = step.seconds_left()
        if left is None:
            return Text(
                "left ?" if step.completed < step.total else "finishing", style="progress.remaining", no_wrap=True
            )
        return Text(f"left {_clock(left)}", style="progress.remaining", no_wrap=True, overflow="ignore")


class CountingPool:
    """An executor that advances `step` by one for each finished task of the functions it counts.

    For audits that send many independent training runs to an executor (canary-audit): the step
    reads "runs finished of runs planned". `step.total` starts at the plan (when the audit can say
    it in advance) and never reads less than the runs already submitted.
    """

    def __init__(self, pool, step: Step | LazyStep, counted: Callable[[Callable], bool]):
        self.pool, self.step, self.counted = pool, step, counted
        self.submitted = 0

    def map(self, function, tasks, kwargs=None, on_result=None):
        if not self.counted(function):
            return self.pool.map(function, tasks, kwargs, on_result=on_result)
        tasks = list(tasks)
        self.submitted += len(tasks)
        if self.step.total is None or self.step.total < self.submitted:
            if isinstance(self.step, LazyStep):
                self.step.set_total(self.submitted)
            else:
                self.step.total = self.submitted
        self.step.update(self.step.completed)  # a lazy step shows from here: the user's code imported fine

        def finished(index, result):
            self.step.advance()
            if on_result is not None:
                on_result(index, result)

        return self.pool.map(function, tasks, kwargs, on_result=finished)

    def __getattr__(self, name):
        return getattr(self.pool, name)


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
