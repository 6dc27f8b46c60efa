"""Executors: where the embarrassingly parallel work of an audit runs — one interface, three places.

Every executor offers `map(function, tasks, kwargs=None, on_result=None) -> list`: the results of
`function(*task, **kwargs)` for every task, **in task order**, like `WorkerPool.map`. A task is a
module-level harness function with picklable arguments that returns plain data (arrays, numbers,
dicts); `kwargs` are shared by every task (sent once where the executor can). Each task seeds
itself from (audit seed, task id) — never from the worker that runs it — so `local`, `processes`
and `ray` give the same numbers on the CPU.

- `local` (the default): in this process, one task after another; today's behaviour.
- `processes`: `--workers N` spawned child processes on this machine (`workers.WorkerPool`): the
  same isolation (timeouts, crashes) user code gets everywhere.
- `ray`: tasks on a Ray cluster (`--ray-address auto|ray://host:port`, or a local one started
  here). A worker killed mid-task is retried by Ray (`max_retries`); a task that keeps dying
  fails the map with `ExecutorTaskError`; a task that overruns `timeout` is cancelled (its worker
  process killed) and fails the map with `UserCodeError` (exit 2), as in `processes`. Where the
  cluster has GPUs each task asks for a fraction of one (`gpus_per_task`, default 1/4: the models
  are small). Ray is the optional extra `privacy-audit[ray]`.

Tasks that run user code (a trainer, a model) get `make_user_code_executor`: the same three kinds,
but `local` is one isolated child process (`WorkerPool(1)`), never this process, so user code is
isolated from the driver whatever the executor.

`on_result(index, result)` is called in the driver as each task finishes (any order): the runner
checkpoints there, so an interrupted run resumes with only the unfinished tasks. Workers never
write to MLflow: they return results and the driver alone logs them.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from audit.errors import AuditInputError
from audit.machinery.workers import (
    UserCodeError,
    WorkerInternalError,
    WorkerPool,
    default_workers,
    report_task_progress,
)

__all__ = [
    "EXECUTORS",
    "Executor",
    "ExecutorTaskError",
    "IsolatedLocalExecutor",
    "LocalExecutor",
    "ProcessExecutor",
    "RayExecutor",
    "make_executor",
    "make_user_code_executor",
]

EXECUTORS = ("local", "processes", "ray")
# --workers with --ray-address: a sanity bound before the cluster is joined (then capped at its CPUs).
RAY_CLUSTER_MAX_WORKERS = 100_000
# Ray's own default for tasks; a task that dies more often than this is not a transient fault.
RAY_MAX_RETRIES = 3
# Small MLPs use a fraction of a GPU: four tasks share one.
RAY_GPU_FRACTION = 0.25
TASK_NAME = "privacy-audit task"


class ExecutorTaskError(RuntimeError):
    """A task could not be completed by the executor (its worker kept dying): the run fails, its
    finished tasks stay checkpointed and `--resume` continues from them."""


class Executor(Protocol):
    name: str
    workers: int

    # A module-level function a task may call as `task_progress(done, total)` to report how far it is; the
    # executor hands it to `map`'s `on_progress(index, (done, total))` in the driver. None where an executor
    # cannot carry it (local tasks get their callback directly; Ray counts whole tasks).
    @property
    def task_progress(self) -> Callable[[float, int | None], None] | None: ...

    def map(
        self,
        function: Callable,
        tasks: Iterable[Sequence[Any]],
        kwargs: dict[str, Any] | None = None,
        on_result: Callable[[int, Any], None] | None = None,
        on_progress: Callable[[int, tuple[float, int | None]], None] | None = None,
    ) -> list[Any]: ...

    def task_device(self, requested: str, driver_device: str) -> str: ...

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None: ...

    # Every executor is a context manager that closes itself (the commands use `with`).
    def __enter__(self) -> Executor: ...

    def __exit__(self, *exc_info: object) -> None: ...


class _Base:
    name = "base"
    workers = 1
    task_progress: Callable[[float, int | None], None] | None = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        pass

    def task_device(self, requested: str, driver_device: str) -> str:
        """The device string tasks resolve: on this machine, the driver's own device."""
        return driver_device

    def describe(self) -> dict[str, Any]:
        return {"executor": self.name, "workers": self.workers}


class LocalExecutor(_Base):
    """In this process, one task after another (no isolation: today's behaviour for harness tasks)."""

    name = "local"

    def map(self, function, tasks, kwargs=None, on_result=None, on_progress=None) -> list[Any]:
        results = []
        for index, args in enumerate(tasks):
            result = function(*args, **(kwargs or {}))
            results.append(result)
            if on_result is not None:
                on_result(index, result)
        return results


class ProcessExecutor(_Base):
    """`workers` spawned child processes on this machine (a `WorkerPool`, kept for repeated maps)."""

    name = "processes"
    task_progress = staticmethod(report_task_progress)

    def __init__(
        self,
        workers: int,
        *,
        threads: int | None = 1,
        timeout: float | None = None,
        name: str = TASK_NAME,
        what: str = "function",
    ):
        self.workers = workers
        self._pool = WorkerPool(workers, name=name, timeout=timeout, threads=threads, what=what)

    def map(self, function, tasks, kwargs=None, on_result=None, on_progress=None) -> list[Any]:
        return self._pool.map(function, tasks, kwargs, on_result=on_result, on_progress=on_progress)

    def close(self) -> None:
        self._pool.close()


class IsolatedLocalExecutor(ProcessExecutor):
    """`local` for user code: one task after another, in ONE isolated child process (timeout and
    crash handling of `WorkerPool`), so a user's `sys.exit` or hang never reaches the driver."""

    name = "local"

    def __init__(
        self, *, threads: int | None = 1, timeout: float | None = None, name: str = TASK_NAME, what: str = "function"
    ):
        super().__init__(1, threads=threads, timeout=timeout, name=name, what=what)


@dataclass(frozen=True)
class _InputFailure:
    """An `AuditInputError` raised in a Ray task, sent back as data (its two-argument constructor
    does not survive Ray's exception pickling)."""

    user_code: bool
    where: str
    message: str


def _ray_task(function: Callable, args: tuple, kwargs: dict[str, Any], threads: int | None, cwd: str) -> Any:
    """Runs in a Ray worker: the same thread limits and import path as a `WorkerPool` child."""
    if threads is not None:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(threads)
        # A torch imported later reads OMP_NUM_THREADS; one already loaded (by an earlier task, or
        # while Ray unpickled this task's function) is told. A numpy task never imports it here.
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(threads)
    if cwd and os.path.isdir(cwd) and cwd not in sys.path:  # the user's modules beside the driver
        sys.path.insert(0, cwd)
    try:
        return function(*args, **kwargs)
    except AuditInputError as exc:
        return _InputFailure(type(exc) is UserCodeError, exc.where, exc.message)


def _import_ray():
    try:
        import ray
    except ImportError:
        raise AuditInputError("--executor ray", "needs Ray: pip install 'privacy-audit[ray]'") from None
    return ray


class RayExecutor(_Base):
    """Tasks on a Ray cluster: `address` None starts a local one (this machine's cores) that
    `close` stops; "auto" or "ray://host:port" joins a running cluster (left running). `workers`
    is capped at the cluster's CPUs (`ray_worker_cap`), said in one line on stderr.

    A cluster's nodes need this package installed (the same version as the driver): tasks are
    the harness's own module-level functions, imported by name on the workers.

    `timeout` (seconds per task; None: no limit): Ray does not say when a queued task starts, so
    with a timeout at most `slots` tasks (`workers`, fewer where the GPUs hold fewer fractional
    requests) are in flight at once and each task's clock starts when it is submitted (≈ when it
    starts: a slot is free). A task still running at its deadline is
    cancelled with `ray.cancel(force=True)` (its worker process is killed; Ray does not retry a
    cancelled task) and the map fails with `UserCodeError(name, ...)` naming the task and the
    user's function (`what`), exit 2 as for `processes`. On a cluster shared with other jobs a
    task may wait for a slot on its clock: raise the timeout there. A retry after a killed worker,
    and the start of a fresh worker process (its imports), run on the same clock.
    """

    name = "ray"

    def __init__(
        self,
        workers: int | None = None,
        *,
        address: str | None = None,
        threads: int | None = 1,
        gpus_per_task: float | None = None,
        max_retries: int = RAY_MAX_RETRIES,
        timeout: float | None = None,
        name: str = TASK_NAME,
        what: str = "function",
    ):
        if timeout is not None and not (timeout > 0):
            raise AuditInputError("timeout", f"expected a number of seconds > 0, got {timeout!r}")
        ray = _import_ray()
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no telemetry from an audit tool
        self._ray = ray
        self._owns_cluster = False
        self.address = address
        if not ray.is_initialized():
            try:
                if address is None:
                    # Ray picks the node's address itself (it turns 127.0.0.1 into the reachable IP);
                    # a single-node cluster is reached by its own processes only.
                    # The local cluster gets this machine's cores: --workers beyond them is capped below.
                    ray.init(
                        num_cpus=default_workers(), include_dashboard=False, logging_level="ERROR", log_to_driver=False
                    )
                else:
                    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise AuditInputError(
                    f"--ray-address {address}", f"expected a reachable Ray cluster (auto or ray://host:port): {exc}"
                ) from None
            self._owns_cluster = True
        resources = ray.cluster_resources()
        self.workers, self.cap_note = ray_worker_cap(workers, resources, address)
        if self.cap_note:
            import sys

            print(f"note: {self.cap_note}", file=sys.stderr)
        has_gpu = resources.get("GPU", 0) > 0
        self.gpus_per_task = (gpus_per_task if gpus_per_task is not None else RAY_GPU_FRACTION) if has_gpu else 0
        self.threads = threads
        self.max_retries = max_retries
        self.timeout, self.task_name, self.what = timeout, name, what
        # Tasks that can run at once: one per CPU, and where each asks for a GPU fraction, as many as fit.
        self.slots = self.workers
        if self.gpus_per_task:
            self.slots = max(1, min(self.workers, int(resources.get("GPU", 0) / self.gpus_per_task + 1e-9)))
        # retry_exceptions=False: a Python exception is deterministic (the same seed fails the same
        # way); only a dead worker or node (SIGKILL, OOM, lost node) is retried.
        self._remote = ray.remote(_ray_task).options(
            num_cpus=1,
            num_gpus=self.gpus_per_task,
            max_retries=max_retries,
            retry_exceptions=False,
        )

    def task_device(self, requested: str, driver_device: str) -> str:
        # Each worker resolves "auto" itself: a CPU-only driver may send work to GPU nodes.
        return requested

    def describe(self) -> dict[str, Any]:
        return {
            "executor": self.name,
            "workers": self.workers,
            "ray_address": self.address or "local",
            "gpus_per_task": self.gpus_per_task,
            "max_retries": self.max_retries,
            "timeout": self.timeout,
        }

    def _reraise(self, exc: BaseException, index: int, function: Callable) -> None:
        ray = self._ray
        label = f"task {index} ({getattr(function, '__name__', function)})"
        if isinstance(exc, ray.exceptions.RayTaskError):
            cause = getattr(exc, "cause", None)
            if isinstance(cause, (KeyboardInterrupt, WorkerInternalError)):
                raise cause from None
            summary = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc).splitlines()[0]
            raise WorkerInternalError(f"a Ray task failed: {summary}", str(exc)) from None
        if isinstance(
            exc,
            (
                ray.exceptions.WorkerCrashedError,
                ray.exceptions.NodeDiedError,
                ray.exceptions.ObjectLostError,
                ray.exceptions.OutOfMemoryError,
            ),
        ):
            raise ExecutorTaskError(
                f"{label} failed on Ray after {self.max_retries} retries: {type(exc).__name__} "
                f"({' '.join(str(exc).split())[:200]}); finished tasks are checkpointed, resume with --resume"
            ) from None
        raise exc

    def _timed_out(self, index: int, function: Callable) -> UserCodeError:
        return UserCodeError(
            self.task_name,
            f"the {self.what} did not return within {self.timeout:g} s on Ray "
            f"(task {index}, {getattr(function, '__name__', function)}; it was cancelled: "
            "the timeout; raise it if this is just slow)",
        )

    def map(self, function, tasks, kwargs=None, on_result=None, on_progress=None) -> list[Any]:
        # on_progress: Ray tasks cannot report on the way (task_progress is None); they count when they return.
        ray = self._ray
        tasks = [tuple(args) for args in tasks]
        if not tasks:
            return []
        shared = ray.put(kwargs or {})  # one copy in the object store, not one per task
        cwd = os.getcwd()
        # Without a timeout Ray queues everything itself; with one, only as many tasks as there are
        # slots are in flight, so a task's clock starts about when it starts running.
        window = len(tasks) if self.timeout is None else self.slots
        in_flight: dict[Any, int] = {}
        deadline: dict[Any, float] = {}
        results: list[Any] = [None] * len(tasks)
        submitted = 0
        try:
            while submitted < len(tasks) or in_flight:
                while submitted < len(tasks) and len(in_flight) < window:
                    ref = self._remote.remote(function, tasks[submitted], shared, self.threads, cwd)
                    in_flight[ref] = submitted
                    if self.timeout is not None:
                        deadline[ref] = time.monotonic() + self.timeout
                    submitted += 1
                wait_for = None if not deadline else max(0.0, min(deadline.values()) - time.monotonic())
                ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=wait_for)
                if not ready:
                    now = time.monotonic()
                    overdue = [ref for ref, at in deadline.items() if at <= now]
                    if overdue:  # cancelled (with every other task) by the handler below
                        raise self._timed_out(in_flight[overdue[0]], function)
                    continue
                for ref in ready:
                    index = in_flight.pop(ref)
                    deadline.pop(ref, None)
                    try:
                        result = ray.get(ref)
                    except Exception as exc:  # noqa: BLE001 - mapped to our error classes
                        self._reraise(exc, index, function)
                    if isinstance(result, _InputFailure):  # user code's fault or bad input: exit 2, as locally
                        raise (UserCodeError if result.user_code else AuditInputError)(result.where, result.message)
                    results[index] = result
                    if on_result is not None:
                        on_result(index, result)
        except BaseException:
            for ref in in_flight:  # nothing of a half-finished map stays running
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - already finished or gone
                    pass
            raise
        return results

    def close(self) -> None:
        if self._owns_cluster and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns_cluster = False


def ray_worker_cap(workers: int | None, resources: dict[str, float], address: str | None) -> tuple[int, str | None]:
    """The tasks a Ray cluster can run at once for `--workers` (None: all of it): at most its CPUs —
    a joined cluster's, or the local one's — and the one line that says so when `--workers` asked for more."""
    cpus = max(1, int(resources.get("CPU", 1)))
    if workers is None:
        return cpus, None
    if workers <= cpus:
        return workers, None
    where = f"the Ray cluster at {address}" if address else "the local Ray cluster"
    return cpus, f"--workers {workers} capped at {cpus}: {where} has {cpus} CPU(s), so at most {cpus} tasks run at once"


def check_executor_options(kind: str, workers: int | None = None, ray_address: str | None = None) -> None:
    """Refuse bad `--executor/--workers/--ray-address` combinations (exit 2), before anything starts."""
    if kind not in EXECUTORS:
        raise AuditInputError("--executor", f"expected one of {', '.join(EXECUTORS)}, got {kind!r}")
    from audit.machinery.limits import check_count

    if workers is not None and kind == "ray" and ray_address is not None:
        # A running cluster's size is known once joined (RayExecutor caps --workers at its CPUs); here only
        # the table's sanity range applies: a billion is refused, not attempted.
        check_count("--workers", workers, high=RAY_CLUSTER_MAX_WORKERS, local_cap=False)
    elif workers is not None:  # the range table: 1 .. 4 × cores (a billion processes is refused, not attempted)
        check_count("--workers", workers)
    if ray_address is not None and kind != "ray":
        raise AuditInputError("--ray-address", "applies only with --executor ray")
    if ray_address is not None and not (
        ray_address == "auto" or ray_address.startswith("ray://") or ":" in ray_address
    ):
        raise AuditInputError("--ray-address", f"expected auto, ray://host:port or host:port, got {ray_address!r}")
    if kind == "local" and workers not in (None, 1):
        raise AuditInputError("--workers", "applies to --executor processes or ray (local runs one task at a time)")
    if kind == "ray":
        _import_ray()


def make_executor(
    kind: str = "local",
    *,
    workers: int | None = None,
    ray_address: str | None = None,
    threads: int | None = 1,
    timeout: float | None = None,
) -> Executor:
    """The executor named `kind` (`--executor`), validated like any user input (exit 2)."""
    check_executor_options(kind, workers, ray_address)
    if kind == "local":
        return LocalExecutor()
    if kind == "processes":
        return ProcessExecutor(workers or default_workers(), threads=threads, timeout=timeout)
    return RayExecutor(workers, address=ray_address, threads=threads, timeout=timeout)


def make_user_code_executor(
    kind: str = "processes",
    *,
    workers: int | None = None,
    ray_address: str | None = None,
    timeout: float | None = None,
    name: str = TASK_NAME,
    what: str = "function",
    threads: int | None = 1,
) -> Executor:
    """The executor for tasks that call user code (`--executor` of canary-audit, audit-model):
    user code never runs in the driver. `local` is one isolated child process, `processes`
    `workers` of them (default: the cores), `ray` the cluster's worker processes; each with a
    per-task `timeout` naming `name` (the flag) and `what` (the user's function) when it fires."""
    check_executor_options(kind, workers, ray_address)
    if kind == "local":
        return IsolatedLocalExecutor(threads=threads, timeout=timeout, name=name, what=what)
    if kind == "processes":
        return ProcessExecutor(workers or default_workers(), threads=threads, timeout=timeout, name=name, what=what)
    return RayExecutor(workers, address=ray_address, threads=threads, timeout=timeout, name=name, what=what)
