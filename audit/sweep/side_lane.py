"""The run's second lane: a child process beside the driver, both taking tasks from one queue.

On the default (`local`) executor, on a machine with two or more cores, every piece of a target that needs no
attack is a queued task (audit.sweep.target_audit.submit_side_work): its Opacus training, each of its reference
and shadow banks' two tasks (`attacks.reference_models.model_slices`, laid out before the target trains), its
white-box canary twin and the probes of its Opacus setup. The child process (one worker of
`audit.machinery.workers.WorkerPool`) runs them in the queue's order; the driver, whenever it asks for a result that
is not there yet (`SideLane.result`), runs that task itself if nobody has started it, else the next queued one, and
waits only when the queue is empty: both cores stay busy until the queue is done. Each task is a module-level
function seeded by its arguments only, the same function the driver would call, so the numbers are those of a run
without the lane (a test compares every number of a small run both ways, tests/test_side_lane.py; the bank's two
tasks: tests/test_shared_reference_bank.py). σ the driver calibrated travels with every task
(`remember_sigma`), so the child does not search for it again. A bank the attacks train themselves (one not laid
out ahead) still shares its second task with the lane (`LaneSharingExecutor`).

Progress: each task is a step of its own, on the lane of the process that runs it, counted in its own unit
(epochs, DP-SGD steps, probes) through the worker's progress channel (`report_task_progress`; in the driver
`reporting_to`). A task's failure is raised in the driver when it asks for that task's result (a bad ε is still
exit 2, a bug exit 3), and every task taken after it fails with it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from audit.machinery.executors import LocalExecutor
from audit.machinery.progress import Progress, Step
from audit.machinery.workers import WorkerPool, default_workers, report_task_progress, reporting_to

__all__ = ["LaneSharingExecutor", "SideLane", "side_lane_wanted"]

# (ε, δ, q, epochs, accountant): the arguments of targets.opacus_setups.calibrated_noise_multiplier
SigmaKey = tuple[float, float, float, int, str]


def side_lane_wanted(executor_name: str, requested: bool | None) -> bool:
    """Use the lane? `requested` None: where it pays, on the local executor with two or more cores (another
    executor runs the targets' training as its own tasks, and one core gains nothing)."""
    if requested is not None:
        return requested
    return executor_name == "local" and default_workers() >= 2


@dataclass
class _Task:
    key: str
    function: Callable[..., Any]
    args: tuple
    kwargs: dict[str, Any]
    description: str
    total: int | None
    on_result: Callable[[Any], None] | None
    done: threading.Event
    units: Callable[[tuple[float, int | None]], int] | None = None  # a task's (done, total) figures -> step units
    started: bool = False  # taken by the lane (under SideLane._lock): too late to withdraw
    withdrawn: bool = False
    outcome: tuple[bool, Any] | None = None  # (ok, result or exception)


class SideLane:
    """One child process running submitted tasks in order (those submitted `first` before the others); `result(key)`
    waits for one, `withdraw(key)` takes back one not started. Use as a context
    manager (or call `close`): the child is killed at the end, interrupted or not."""

    def __init__(self, progress: Progress, threads: int | None = 1):
        self.progress = progress
        # threads=None: the child keeps the driver's environment, so numpy's BLAS runs with the driver's threads
        # (the PRV accountant's ε moves in its last digits with the BLAS thread count); torch gets the run's
        # cpu_threads per task (`_with_torch_threads`), as the driver has it.
        self._pool = WorkerPool(1, name="privacy-audit side task", threads=None)
        self._torch_threads = threads
        # (rank, order, task): rank (0,) for work the driver waits on next (`submit(..., first=True)`), (1, *priority)
        # otherwise; the order keeps submission order within a rank; None (rank (-1,)) ends the lane before anything
        # still queued.
        self._queue: queue.PriorityQueue[tuple[tuple[int, ...], int, _Task | None]] = queue.PriorityQueue()
        # σ the driver calibrated (targets.opacus_setups.remember_noise_multiplier's arguments): sent with every
        # task, so the side process does not search for them again.
        self._sigmas: dict[SigmaKey, float] = {}
        self._order = 0
        self._tasks: dict[str, _Task] = {}
        self._lock = threading.Lock()  # a task is either started by the lane or withdrawn by the driver, never both
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="side-lane", daemon=True)
        self._thread.start()

    def __enter__(self) -> SideLane:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def submit(
        self,
        key: str,
        function: Callable[..., Any],
        args: tuple = (),
        kwargs: dict[str, Any] | None = None,
        *,
        description: str,
        total: int | None = None,
        on_result: Callable[[Any], None] | None = None,
        first: bool = False,
        units: Callable[[tuple[float, int | None]], int] | None = None,
        priority: tuple[int, ...] = (),
    ) -> None:
        """Queue `function(*args, **kwargs)` under `key`; `on_result(result)` runs in this process when it
        returns (e.g. a checkpoint), before `result(key)` gives it out. `first`: run it before everything queued
        and not started (work the driver is about to wait for); otherwise queued tasks run by `priority`, then in
        submission order. `units`: how the task's reported `(done, total)` (`report_task_progress`) becomes its
        step's count (default: `done`)."""
        task = _Task(
            key, function, tuple(args), dict(kwargs or {}), description, total, on_result, threading.Event(), units
        )
        self._tasks[key] = task
        self._order += 1
        self._queue.put(((0,) if first else (1, *priority), self._order, task))

    def remember_sigma(self, key: SigmaKey, sigma: float) -> None:
        """σ calibrated here for `key` (ε, δ, q, epochs, accountant): every task sent after this carries it."""
        self._sigmas[key] = float(sigma)

    def has(self, key: str) -> bool:
        return key in self._tasks

    def result(self, key: str, *, help: bool = True) -> Any:
        """The task's result, once it is done (raises what the task raised). While it is not, this process does not
        sit idle (`help`): it runs the task itself if the lane has not started it, else the next task queued (in the
        lane's order), so both cores stay busy while there is work queued; it waits only when there is none."""
        task = self._tasks[key]
        while not task.done.is_set():
            if not help:
                task.done.wait(0.5)
            elif self._start(task):
                self._run_here(task)
                break
            other = self._take_next()
            if other is not None:
                self._run_here(other)
            else:
                task.done.wait(0.5)  # a timed wait: Ctrl-C reaches the driver while it waits
        assert task.outcome is not None
        ok, value = task.outcome
        if not ok:
            raise value
        return value

    def withdraw(self, key: str) -> bool:
        """Take back a queued task the lane has not started (True: the caller runs it itself); False once it runs."""
        task = self._tasks[key]
        with self._lock:
            if task.started:
                return False
            task.withdrawn = True
        del self._tasks[key]
        return True

    def close(self) -> None:
        self._order += 1
        self._queue.put(((-1,), self._order, None))
        self._pool.close()

    def _start(self, task: _Task) -> bool:
        """Mark a queued task as taken (by the lane or by this process); False if it was already taken."""
        with self._lock:
            if task.started or task.withdrawn:
                return False
            task.started = True
            return True

    def _take_next(self) -> _Task | None:
        """The next queued task nobody has taken, taken for this process; None when there is none."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return None
            task = item[2]
            if task is None:  # the lane is closing: leave the sentinel for it
                self._queue.put(item)
                return None
            if self._start(task):
                return task

    def _run_here(self, task: _Task) -> None:
        """Run a taken task in this process (the driver), counted on the driver's lane in the task's units. Its
        failure is kept for whoever asks for its result (as the lane's are), and every task taken after it fails
        with it; an interrupt is raised at once."""
        if self._failure is not None:
            task.outcome = (False, self._failure)
            task.done.set()
            return
        step = self.progress.begin(task.description, task.total, lane="main")

        def advance(done: float, total: int | None) -> None:
            step.update(int(done) if task.units is None else task.units((done, total)))

        try:
            with reporting_to(advance):
                result = _with_torch_threads(self._torch_threads, {}, task.function, task.args, **task.kwargs)
            if task.on_result is not None:
                task.on_result(result)
        except BaseException as exc:  # noqa: BLE001 - handed to whoever asks for the result, as the lane's are
            self._failure = exc
            task.outcome = (False, exc)
            task.done.set()
            self.progress.end(step, False)
            if not isinstance(exc, Exception):  # Ctrl-C, SystemExit: now
                raise
            return
        task.outcome = (True, result)
        task.done.set()
        self.progress.end(step, True)

    def _serve(self) -> None:
        while True:
            _, _, task = self._queue.get()
            if task is None:
                return
            if not self._start(task):  # withdrawn, or taken by the driver
                continue
            if self._failure is not None:  # queued after a failed task: it fails with it
                task.outcome = (False, self._failure)
                task.done.set()
                continue
            step = self.progress.begin(task.description, task.total, lane="side")

            def advance(_index: int, figures: tuple[float, int | None], step: Step = step, task: _Task = task) -> None:
                step.update(int(figures[0]) if task.units is None else task.units(figures))

            try:
                [result] = self._pool.map(
                    _with_torch_threads,
                    [(self._torch_threads, dict(self._sigmas), task.function, task.args)],
                    task.kwargs,
                    on_progress=advance,
                )
                if task.on_result is not None:
                    task.on_result(result)
                task.outcome = (True, result)
                self.progress.end(step, True)
            except BaseException as exc:  # noqa: BLE001 - handed to the driver, which raises it
                self._failure = exc
                task.outcome = (False, exc)
                self.progress.end(step, False)
            task.done.set()


class LaneSharingExecutor(LocalExecutor):
    """The local executor of one target's attacks with the side lane's help: a vectorized bank of reference or
    shadow models trains as two tasks (attacks.reference_models.model_slices), and `share` queues the second on the
    lane ahead of the work waiting there, returning its handle (`take_back` or `result`) while the driver trains
    the first. The attacks' code sees a local executor that can share; the numbers are those of the same two tasks
    run here one after the other."""

    def __init__(self, side: SideLane, label: str):
        self._side = side
        self._label = label
        self._shared = 0

    def share(
        self,
        function: Callable[..., Any],
        args: tuple,
        kwargs: dict[str, Any],
        *,
        what: str,
        total: int,
        units: Callable[[tuple[float, int | None]], int],
    ) -> _SharedTask:
        self._shared += 1
        key = f"shared {self._shared} of {self._label}"
        self._side.submit(
            key,
            function,
            args,
            {**kwargs, "on_progress": report_task_progress},
            description=f"{self._label}: {what}",
            total=total,
            first=True,
            units=units,
        )
        return _SharedTask(self._side, key)


@dataclass
class _SharedTask:
    """A bank's part queued on the side lane: `take_back()` withdraws it if the lane has not started it (the driver,
    done with its own part, then trains it rather than wait for the lane's current task); else `result()`."""

    side: SideLane
    key: str

    def take_back(self) -> bool:
        return self.side.withdraw(self.key)

    def result(self) -> Any:
        return self.side.result(self.key)


def _with_torch_threads(
    threads: int | None, sigmas: dict[SigmaKey, float], function: Callable[..., Any], args: tuple, **kwargs: Any
) -> Any:
    """In the side process: `function(*args, **kwargs)` with torch's intra-op threads those of the driver and the σ
    it calibrated known (`targets.opacus_setups.remember_noise_multiplier`: the same float, not searched again)."""
    if sigmas:
        from targets.opacus_setups import remember_noise_multiplier

        for key, sigma in sigmas.items():
            remember_noise_multiplier(*key, sigma)
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    return function(*args, **kwargs)
