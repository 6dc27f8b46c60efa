"""The run's second lane: per-target work that needs no attack, in one child process beside the driver.

On the default (`local`) executor the driver trains the reference and shadow models and runs the attacks,
one target after another, on one core. The rest of a target's work depends only on the config, the
data and the target's index — its Opacus training, its white-box canary twin, the probes of its Opacus
setup — so on a machine with two or more cores it runs here, in one spawned worker
(`audit.machinery.workers.WorkerPool`), in the order it was submitted, while the driver works: the run
then keeps two cores busy. Each task is a module-level function seeded by its arguments only, the same
function the driver would call, so the numbers are those of a run without the lane (a test compares
every number of the smoke run both ways).

Progress: each task is a step of its own, shown while it runs and counted in its own unit (epochs,
probes) through the worker's progress channel (`report_task_progress`). A task's failure is raised in
the driver when it asks for that task's result (a bad ε is still exit 2, a bug exit 3), and every task
queued after it fails with it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from audit.machinery.progress import Progress, Step
from audit.machinery.workers import WorkerPool, default_workers

__all__ = ["SideLane", "side_lane_wanted"]


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
    outcome: tuple[bool, Any] | None = None  # (ok, result or exception)


class SideLane:
    """One child process running submitted tasks in order; `result(key)` waits for one. Use as a context
    manager (or call `close`): the child is killed at the end, interrupted or not."""

    def __init__(self, progress: Progress, threads: int | None = 1):
        self.progress = progress
        # threads=None: the child keeps the driver's environment, so numpy's BLAS runs with the driver's threads
        # (the PRV accountant's ε moves in its last digits with the BLAS thread count); torch gets the run's
        # cpu_threads per task (`_with_torch_threads`), as the driver has it.
        self._pool = WorkerPool(1, name="privacy-audit side task", threads=None)
        self._torch_threads = threads
        self._queue: queue.Queue[_Task | None] = queue.Queue()
        self._tasks: dict[str, _Task] = {}
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
    ) -> None:
        """Queue `function(*args, **kwargs)` under `key`; `on_result(result)` runs in this process when it
        returns (e.g. a checkpoint), before `result(key)` gives it out."""
        task = _Task(key, function, tuple(args), dict(kwargs or {}), description, total, on_result, threading.Event())
        self._tasks[key] = task
        self._queue.put(task)

    def has(self, key: str) -> bool:
        return key in self._tasks

    def result(self, key: str) -> Any:
        """The task's result, once it is done (raises what the task raised)."""
        task = self._tasks[key]
        while not task.done.wait(0.5):  # a timed wait: Ctrl-C reaches the driver while it waits
            pass
        assert task.outcome is not None
        ok, value = task.outcome
        if not ok:
            raise value
        return value

    def close(self) -> None:
        self._queue.put(None)
        self._pool.close()

    def _serve(self) -> None:
        while True:
            task = self._queue.get()
            if task is None:
                return
            if self._failure is not None:  # queued after a failed task: it fails with it
                task.outcome = (False, self._failure)
                task.done.set()
                continue
            step = self.progress.begin(task.description, task.total, lane="side")

            def advance(_index: int, figures: tuple[float, int | None], step: Step = step) -> None:
                step.update(int(figures[0]))

            try:
                [result] = self._pool.map(
                    _with_torch_threads,
                    [(self._torch_threads, task.function, task.args)],
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


def _with_torch_threads(threads: int | None, function: Callable[..., Any], args: tuple, **kwargs: Any) -> Any:
    """In the side process: `function(*args, **kwargs)` with torch's intra-op threads those of the driver."""
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    return function(*args, **kwargs)
