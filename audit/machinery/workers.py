"""Isolated worker processes: user code (and any embarrassingly parallel task) runs in children.

Why children: an audit runs code it does not trust — a user's trainer, accountant, mechanism or
model factory. In a child process a `sys.exit(0)` cannot make the audit exit 0, an `os._exit`
or a segfault cannot take the audit down, and a hang is cut by a timeout. The same pool runs the
parallel parts of an audit (`--workers N`), so isolation and parallelism are one mechanism.

Contract:
- a task is a *module-level* function of the harness plus its (picklable) arguments; it runs in a
  child forked from a fork server (a fresh interpreter that has imported once the libraries the audit
  had loaded, torch and Opacus among them: no inherited threads, CUDA state or open files; "spawn" where there is no fork server; the audit's
  environment, working folder and `sys.path` are re-applied in the child) and returns a picklable
  value — arrays, numbers, dicts, never the user's objects;
- inside a task, user code is called within `user_code(name)`: anything it raises (including
  `SystemExit`) becomes an `AuditInputError` naming the function (exit 2);
- a child that dies (`os._exit`, a signal) or overruns the per-task timeout is killed and the
  call raises `UserCodeError` naming the function (exit 2): the fault is the code it ran;
- any other exception in a task is a bug of ours: `WorkerInternalError` (exit 3) carrying the
  child's traceback;
- each worker leads its own process group (`os.setsid` as it starts): whatever user code forks
  stays in that group, and the group is killed whole (`os.killpg`) when the worker times out, is
  interrupted, or is closed — no process of the user's outlives the command (a process that starts
  its own session on purpose escapes this; see docs/errors.md);
- in a worker, SIGINT is ignored (the parent decides what an interrupt means), so a
  `KeyboardInterrupt` there was raised by user code: like any exception of user code, exit 2.

Results come back in task order whatever the number of workers, so each task's numbers depend only
on its arguments (seed it from the task id, never from the worker).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from audit.errors import AuditInputError

__all__ = [
    "UserCodeError",
    "WorkerInternalError",
    "WorkerPool",
    "default_workers",
    "report_task_progress",
    "reporting_to",
    "run_isolated",
    "user_code",
]

# How much of a user's exception message reaches the one-line error (the rest is in the log).
_MESSAGE_LIMIT = 200


class UserCodeError(AuditInputError):
    """User code failed, exited, crashed its process or timed out (exit 2, naming the function)."""


class WorkerInternalError(RuntimeError):
    """A task of the harness raised in a worker: a bug (exit 3). `child_traceback` is the child's."""

    def __init__(self, message: str, child_traceback: str):
        super().__init__(message)
        self.child_traceback = child_traceback


def default_workers() -> int:
    """The default `--workers`: the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _short(text: object) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 1] + "…"


# True in a worker process: there SIGINT is ignored, so a KeyboardInterrupt comes from user code.
_IN_WORKER = False


@contextmanager
def user_code(name: str, what: str = "function"):
    """Run the block as the user's `name`: its exceptions and `sys.exit` become `UserCodeError`.

    `AuditInputError`s raised by the harness's own validation inside the block pass unchanged. A
    `KeyboardInterrupt` is the user's Ctrl-C in the command's own process (exit 130) and user code's
    own raise in a worker, where SIGINT is ignored (exit 2).
    """
    try:
        yield
    except AuditInputError:
        raise
    except SystemExit as exc:
        raise UserCodeError(name, f"the {what} called sys.exit({exc.code!r}) instead of returning") from None
    except KeyboardInterrupt:
        if not _IN_WORKER:
            raise
        raise UserCodeError(name, f"the {what} raised KeyboardInterrupt") from None
    except BaseException as exc:  # noqa: BLE001 - any failure of user code is the user's to fix
        raise UserCodeError(name, f"the {what} raised {type(exc).__name__}: {_short(exc)}") from None


# --------------------------------------------------------------------------------------------------
# The child side
# --------------------------------------------------------------------------------------------------


# In a worker, the task being run and the connection to its parent (`report_task_progress`).
_CURRENT_TASK: tuple[Connection, int] | None = None


# Outside a worker: where `report_task_progress` goes while a task runs in this process (`reporting_to`).
_LOCAL_REPORTER: Callable[[float, int | None], None] | None = None


@contextmanager
def reporting_to(callback: Callable[[float, int | None], None]) -> Iterator[None]:
    """Run a task in this process (not a worker) with its `report_task_progress` figures sent to `callback`: the
    run's driver runs queued side-lane tasks itself while it waits (audit.sweep.side_lane), counted in the same
    units as in the worker."""
    global _LOCAL_REPORTER
    previous, _LOCAL_REPORTER = _LOCAL_REPORTER, callback
    try:
        yield
    finally:
        _LOCAL_REPORTER = previous


def report_task_progress(done: float, total: int | None) -> None:
    """From inside a task: tell the parent how far it is (`WorkerPool.imap`'s `on_progress(index, (done, total))`),
    so a long task is counted in its own unit (epochs, DP-SGD steps) rather than only when it returns. In this
    process within `reporting_to(callback)`, `callback(done, total)`; otherwise outside a worker, or between
    tasks, it does nothing."""
    current = _CURRENT_TASK
    if current is None:
        if _LOCAL_REPORTER is not None and not _IN_WORKER:
            _LOCAL_REPORTER(float(done), None if total is None else int(total))
        return
    conn, task_id = current
    try:
        conn.send(("progress", task_id, (float(done), None if total is None else int(total))))
    except (OSError, ValueError):  # the parent is gone: the task's own result will fail the same way
        pass


# What the fork server may import once, so that a worker starts with it loaded (forked), not importing it again
# (torch and Opacus: ~6-8 s of CPU per worker on 2 cores). Only what the audit's process has imported when the
# server starts (a command that never loads torch spares its workers too); never user code (imported afresh).
_PRELOAD_CANDIDATES = ("numpy", "scipy.stats", "pandas", "sklearn", "torch", "opacus", "dp_accounting")
_forkserver_modules: tuple[str, ...] | None = None


def forkserver_modules() -> tuple[str, ...]:
    """The modules this process's fork server imports: fixed at the first pool (one server per process)."""
    global _forkserver_modules
    _forkserver_modules = _forkserver_modules or preload_for(sys.modules)
    return _forkserver_modules


def preload_for(loaded: Collection[str]) -> tuple[str, ...]:
    """What a fork server preloads for a process that has imported `loaded`: the candidates it has loaded.
    Not torch._dynamo (torch imports it at a process's first optimizer): preloading it cost more CPU than it
    saved, measured side by side (the README-blocks test 137 → 150 s, docs/test-suite.md, wave 9)."""
    return (*(name for name in _PRELOAD_CANDIDATES if name in loaded), "audit.machinery.workers")


def _worker_context() -> Any:
    """The multiprocessing context of the pool: "forkserver" where the platform has it, else "spawn".

    A fork server is a fresh interpreter started once per process (no inherited threads, CUDA state or open
    files of the audit), which has imported `forkserver_modules()` and forks each worker from that state. A
    spawned worker would be the same fresh interpreter, importing those modules again. What a worker would
    inherit from the audit's process at its start under "spawn" — environment, working folder, `sys.path` —
    is sent with each worker (`_ParentState`) and applied before it runs anything, so the worker sees the
    audit's current state, not the fork server's (which is the audit's at the server's start)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(forkserver_modules()))
    _stop_fork_server_at_exit()
    return context


_stop_registered = False


def _stop_fork_server_at_exit() -> None:
    """At this process's exit, stop its fork server and wait for it (once registered per process). The server
    reaps the workers it forked, so their CPU time is counted in the server's children; unless the server is
    itself waited for, it is reaped by init and that time is lost to whoever measures this process
    (`/usr/bin/time privacy-audit run` showed 60 s of CPU for a run that kept the machine 82 s busy)."""
    global _stop_registered
    if _stop_registered:
        return
    _stop_registered = True
    import atexit
    import multiprocessing.forkserver as forkserver

    def stop() -> None:
        server = getattr(forkserver, "_forkserver", None)
        try:
            server._stop()  # type: ignore[union-attr]  # CPython's own, used by its tests; absent: nothing to wait for
        except (AttributeError, OSError, ChildProcessError):
            pass

    atexit.register(stop)


@dataclass(frozen=True)
class _ParentState:
    """What a spawned child would have inherited from the audit's process when it started."""

    environ: dict[str, str]
    cwd: str
    sys_path: list[str]

    @classmethod
    def now(cls) -> _ParentState:
        return cls(dict(os.environ), os.getcwd(), list(sys.path))

    def apply(self) -> None:
        os.environ.clear()
        os.environ.update(self.environ)
        try:
            os.chdir(self.cwd)
        except OSError:  # the audit's folder is gone: a spawned child would not have started at all
            pass
        sys.path[:] = self.sys_path


def _worker_main(conn: Connection, threads: int | None, parent: _ParentState | None = None) -> None:
    global _IN_WORKER
    _IN_WORKER = True
    if parent is not None:
        parent.apply()
    # Our own process group: what the user's code forks is killed with us (the parent's killpg).
    try:
        os.setsid()
    except OSError:  # already a group leader
        pass
    # A descendant that calls setsid leaves our group; as our subreaper it is still reparented to
    # us (not to init) when its own parent exits, so the tree walk below still finds it.
    _become_subreaper()
    # The parent decides what an interrupt means; the children just get killed. SIGTERM too: the
    # parent's killpg is SIGKILL, and a terminal's SIGTERM goes to the parent only.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        _serve(conn, threads)
    finally:
        _kill_own_group()


def _become_subreaper() -> None:
    """prctl(PR_SET_CHILD_SUBREAPER) on Linux, best effort (elsewhere the group kill is what remains)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid` (children first, then theirs): psutil when installed, else /proc."""
    try:
        import psutil

        try:
            return [child.pid for child in psutil.Process(pid).children(recursive=True)]
        except psutil.Error:
            return []
    except ImportError:
        pass
    parents: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            parents.setdefault(int(fields[1]), []).append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    found, queue = [], [pid]
    while queue:
        for child in parents.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL every descendant of `pid` — also those in their own session (setsid), which a group
    kill misses. Walked twice: a child forked during the first walk is found by the second."""
    for _ in range(2):
        for child in descendants(pid):
            try:
                os.kill(child, signal.SIGKILL)
            except OSError:
                pass


def _kill_own_group() -> None:
    """On the way out, kill whatever user code left running in this worker's group (and this process)."""
    kill_tree(os.getpid())
    try:
        if os.getpgrp() == os.getpid():
            sys.stdout.flush()
            sys.stderr.flush()
            os.killpg(os.getpid(), signal.SIGKILL)
    except OSError:
        pass


def _serve(conn: Connection, threads: int | None) -> None:
    if threads is not None:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(threads)
    cwd = os.getcwd()
    if cwd not in sys.path:  # like `python -m`: the user's modules beside them are importable
        sys.path.insert(0, cwd)
    # PyTorch takes its intra-op thread count from OMP_NUM_THREADS when it is imported, which in a
    # fresh child happens (if at all) when a task's module is unpickled, after the line above. Only
    # a torch already loaded needs telling: importing it here for that cost every worker ~1.5 s of
    # CPU, also those running a numpy trainer or an accountant that never touch torch.
    torch = sys.modules.get("torch") if threads is not None else None
    if torch is not None:
        try:
            torch.set_num_threads(threads)
        except Exception:  # already configured: the env vars still apply
            pass
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        task_id, function, args, kwargs = message
        global _CURRENT_TASK
        _CURRENT_TASK = (conn, task_id)
        try:
            reply = ("ok", task_id, function(*args, **kwargs))
        except AuditInputError as exc:
            reply = ("input", task_id, (type(exc) is UserCodeError, exc.where, exc.message))
        except KeyboardInterrupt:  # SIGINT is ignored here: user code raised it
            reply = ("interrupt", task_id, None)
        except BaseException as exc:  # noqa: BLE001 - SystemExit from our own code is a bug too
            reply = ("bug", task_id, (f"{type(exc).__name__}: {_short(exc)}", traceback.format_exc()))
        _CURRENT_TASK = None
        try:
            conn.send(reply)
        except Exception as exc:  # the result could not be pickled
            conn.send(
                (
                    "bug",
                    task_id,
                    (
                        f"the task's result cannot be sent back: {type(exc).__name__}: {_short(exc)}",
                        traceback.format_exc(),
                    ),
                )
            )


# --------------------------------------------------------------------------------------------------
# The parent side
# --------------------------------------------------------------------------------------------------


@dataclass
class _Worker:
    process: Any
    conn: Connection
    task: int | None = None
    deadline: float | None = None


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "stopped responding"
    if code < 0:
        try:
            return f"was killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code} (os._exit or a crash in native code)"


class WorkerPool:
    """`workers` spawned child processes running tasks with a per-task `timeout` (seconds).

    `name` names the user code the tasks run (e.g. "--trainer my_pkg.dp:train"): timeouts and
    crashes are reported against it. Use as a context manager; `map` may be called repeatedly.
    """

    def __init__(
        self, workers: int, *, name: str, timeout: float | None = None, threads: int | None = 1, what: str = "function"
    ):
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise AuditInputError("--workers", f"expected an integer ≥ 1, got {workers!r}")
        if timeout is not None and not (timeout > 0):
            raise AuditInputError("timeout", f"expected a number of seconds > 0, got {timeout!r}")
        self.n_workers = workers
        self.name = name
        self.what = what
        self.timeout = timeout
        self.threads = threads
        self._context = _worker_context()
        self._workers: list[_Worker] = []

    # -- lifecycle -----------------------------------------------------------------------------

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _start_worker(self) -> _Worker:
        parent_conn, child_conn = self._context.Pipe(duplex=True)
        process = self._context.Process(
            target=_worker_main, args=(child_conn, self.threads, _ParentState.now()), daemon=True
        )
        process.start()
        child_conn.close()
        return _Worker(process, parent_conn)

    def _ensure_started(self, n: int) -> None:
        while len(self._workers) < min(n, self.n_workers):
            self._workers.append(self._start_worker())

    @staticmethod
    def _kill(worker: _Worker) -> None:
        """Kill the worker's whole process group (it leads one), then reap it. The group is killed
        before the leader is reaped, so its id cannot have been reused."""
        pid = worker.process.pid
        if pid is not None:
            kill_tree(pid)  # before the worker dies: its descendants are still its (subreaper) tree
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError, OSError):
                pass  # not (yet) a group leader, or the group is gone
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join(timeout=5)
        worker.conn.close()

    def close(self) -> None:
        """Stop every worker (politely if idle, killed if busy)."""
        for worker in self._workers:
            if worker.task is None and worker.process.is_alive():
                try:
                    worker.conn.send(None)
                except (OSError, BrokenPipeError):
                    pass
                worker.process.join(timeout=2)
            self._kill(worker)
        self._workers = []

    # -- running tasks -------------------------------------------------------------------------

    def imap(
        self,
        function: Callable,
        tasks: Iterable[Sequence[Any]],
        kwargs: dict[str, Any] | None = None,
        on_progress: Callable[[int, tuple[float, int | None]], None] | None = None,
    ) -> Iterator[tuple[int, Any]]:
        """Yield (index, result) as tasks finish (any order). On the first failure every worker is
        killed and the error raised; nothing of a half-finished map stays running. `on_progress(index,
        (done, total))` gets what a running task reports with `report_task_progress`."""
        pending = list(enumerate(tasks))
        pending.reverse()
        kwargs = kwargs or {}
        in_flight = 0
        self._ensure_started(len(pending))
        try:
            while pending or in_flight:
                for worker in self._workers:
                    if worker.task is None and pending:
                        index, args = pending.pop()
                        worker.conn.send((index, function, tuple(args), kwargs))
                        worker.task = index
                        worker.deadline = None if self.timeout is None else time.monotonic() + self.timeout
                        in_flight += 1
                busy = [w for w in self._workers if w.task is not None]
                deadlines = [w.deadline for w in busy if w.deadline is not None]
                wait_for = None if not deadlines else max(0.0, min(deadlines) - time.monotonic())
                ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout=wait_for)
                for worker in busy:
                    if worker.conn in ready:
                        try:
                            status, index, payload = worker.conn.recv()
                        except (EOFError, OSError):
                            worker.process.join(timeout=5)
                            raise UserCodeError(
                                self.name, f"the {self.what}'s worker process {_describe_exit(worker.process.exitcode)}"
                            ) from None
                        if status == "progress":  # the task runs on
                            if on_progress is not None:
                                on_progress(index, payload)
                            continue
                        worker.task, worker.deadline = None, None
                        in_flight -= 1
                        if status == "ok":
                            yield index, payload
                        elif status == "interrupt":
                            raise UserCodeError(self.name, f"the {self.what} raised KeyboardInterrupt")
                        elif status == "input":
                            is_user, where, message = payload
                            raise (UserCodeError if is_user else AuditInputError)(where, message)
                        else:
                            summary, child_tb = payload
                            raise WorkerInternalError(f"a worker task failed: {summary}", child_tb)
                    elif worker.process.sentinel in ready and not worker.process.is_alive():
                        worker.process.join(timeout=5)
                        raise UserCodeError(
                            self.name, f"the {self.what}'s worker process {_describe_exit(worker.process.exitcode)}"
                        )
                    elif worker.deadline is not None and time.monotonic() >= worker.deadline:
                        raise UserCodeError(
                            self.name,
                            f"the {self.what} did not return within {self.timeout:g} s "
                            "(the timeout; raise it if this is just slow)",
                        )
        except BaseException:
            self.close()
            raise

    def map(
        self,
        function: Callable,
        tasks: Iterable[Sequence[Any]],
        kwargs: dict[str, Any] | None = None,
        on_result: Callable[[int, Any], None] | None = None,
        on_progress: Callable[[int, tuple[float, int | None]], None] | None = None,
    ) -> list[Any]:
        """Results of `function(*task, **kwargs)` for every task, in task order."""
        tasks = list(tasks)
        results: list[Any] = [None] * len(tasks)
        for index, result in self.imap(function, tasks, kwargs, on_progress):
            results[index] = result
            if on_result is not None:
                on_result(index, result)
        return results


def run_isolated(
    function: Callable,
    *args: Any,
    name: str,
    timeout: float | None,
    what: str = "function",
    threads: int | None = 1,
    **kwargs: Any,
) -> Any:
    """One call of `function(*args, **kwargs)` in a fresh child process (see `WorkerPool`)."""
    with WorkerPool(1, name=name, timeout=timeout, threads=threads, what=what) as pool:
        return pool.map(function, [args], kwargs)[0]


def call_user_function(
    spec: str,
    flag: str,
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
    convert: Callable[[Any], Any] | None = None,
) -> Any:
    """A task: load the user's `module:function` in this (child) process, call it, `convert` the result.

    `convert` (a module-level function of the harness) turns what the user returned into plain
    data inside the child, so nothing of the user's classes is unpickled by the parent.
    """
    from audit.machinery.user_code import load_user_function

    name = f"{flag} {spec}"
    with user_code(name, "module"):
        function = load_user_function(spec, flag)
    with user_code(name):
        result = function(*args, **(kwargs or {}))
    return result if convert is None else convert(result)
