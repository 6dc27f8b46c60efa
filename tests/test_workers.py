"""Isolated workers (audit/machinery/workers.py): user code that raises, exits, crashes or hangs
is reported against the function it was, and never ends or passes the audit by itself."""

from __future__ import annotations

import multiprocessing
import os
import textwrap
import time

import pytest

from audit.errors import AuditInputError
from audit.machinery.workers import (
    UserCodeError,
    WorkerInternalError,
    WorkerPool,
    call_user_function,
    forkserver_modules,
    run_isolated,
)

USER_MODULE = textwrap.dedent(
    """
    import os, sys, time, ctypes

    def square(x):
        return x * x

    def pid_and_square(x):
        return os.getpid(), x * x

    def divide(x):
        return 1 / 0

    def exits_zero(x):
        sys.exit(0)

    def hard_exit(x):
        os._exit(0)

    def segfault(x):
        ctypes.string_at(0)

    def sleeps(x):
        time.sleep(600)

    def torch_loaded(x):
        return "torch" in sys.modules

    def torch_threads(x):
        import torch
        return torch.get_num_threads()

    def environment(x):
        return os.environ.get("PRIVACY_AUDIT_TEST_MARK"), os.getcwd(), sys.path
    """
)


@pytest.fixture()
def user_module(tmp_path, monkeypatch):
    (tmp_path / "hostile_user_code.py").write_text(USER_MODULE)
    (tmp_path / "exits_on_import.py").write_text("import sys\nsys.exit(0)\n")
    monkeypatch.chdir(tmp_path)
    return "hostile_user_code"


def _call(spec, x=3, timeout=60.0):
    return run_isolated(call_user_function, spec, "--trainer", (x,), name=f"--trainer {spec}", timeout=timeout)


def test_a_well_behaved_function_returns_its_value_from_a_child(user_module):
    pid, value = _call(f"{user_module}:pid_and_square")
    assert value == 9 and pid != os.getpid()


@pytest.mark.parametrize(
    "function, expected",
    [
        ("divide", "raised ZeroDivisionError"),
        ("exits_zero", "called sys.exit(0)"),
        ("hard_exit", "exited with status 0"),
        ("segfault", "SIGSEGV"),
    ],
)
def test_failing_user_code_is_a_user_code_error_naming_the_function(user_module, function, expected):
    with pytest.raises(UserCodeError) as info:
        _call(f"{user_module}:{function}")
    assert info.value.where == f"--trainer {user_module}:{function}"
    assert expected in info.value.message
    assert isinstance(info.value, AuditInputError)  # exit code 2


def test_a_module_that_exits_on_import_is_a_user_code_error(user_module):
    with pytest.raises(AuditInputError, match=r"sys.exit\(0\)"):
        _call("exits_on_import:anything")


def test_a_hanging_function_is_killed_at_the_timeout(user_module):
    start = time.monotonic()
    with pytest.raises(UserCodeError, match="did not return within 2 s"):
        _call(f"{user_module}:sleeps", timeout=2.0)
    assert time.monotonic() - start < 30


def test_results_come_back_in_task_order_from_several_workers(user_module):
    spec = f"{user_module}:pid_and_square"
    with WorkerPool(2, name=spec, timeout=60) as pool:
        results = pool.map(call_user_function, [(spec, "--trainer", (x,)) for x in range(8)])
    assert [value for _, value in results] == [x * x for x in range(8)]
    assert len({pid for pid, _ in results}) == 2  # both workers took part


def test_a_worker_has_torch_loaded_only_if_the_audit_had_and_a_task_that_needs_it_gets_the_pools_threads(
    user_module,
):
    """Workers do not import PyTorch to set its thread count (~1.5 s of CPU each): a worker starts with torch
    loaded only where the fork server preloaded it, because the audit's process had it loaded (forked, not
    imported again); a task that imports it gets the pool's `threads` all the same (OMP_NUM_THREADS)."""
    with WorkerPool(1, name="x", timeout=60, threads=1) as pool:
        loaded, threads, loaded_after = pool.map(
            call_user_function,
            [
                (f"{user_module}:torch_loaded", "--trainer", (0,)),
                (f"{user_module}:torch_threads", "--trainer", (0,)),
                (f"{user_module}:torch_loaded", "--trainer", (0,)),
            ],
        )
    assert (threads, loaded_after) == (1, True)
    forked = "forkserver" in multiprocessing.get_all_start_methods()
    assert loaded == (forked and "torch" in forkserver_modules())


def test_a_worker_sees_the_audits_environment_and_folder_as_they_are_when_it_starts(user_module, monkeypatch):
    """The fork server started with the process's first pool, in another folder and environment (an
    earlier test's); a worker must see the audit's state now, as a spawned child would."""
    with WorkerPool(1, name="x", timeout=60) as pool:  # the server is running after this pool, whatever came first
        pool.map(call_user_function, [(f"{user_module}:square", "--trainer", (2,))])
    monkeypatch.setenv("PRIVACY_AUDIT_TEST_MARK", "set after the server started")
    elsewhere = os.getcwd() + "/elsewhere"
    os.mkdir(elsewhere)
    monkeypatch.syspath_prepend(elsewhere)
    with WorkerPool(1, name="x", timeout=60) as pool:
        [(mark, cwd, path)] = pool.map(call_user_function, [(f"{user_module}:environment", "--trainer", (0,))])
    assert mark == "set after the server started"
    assert cwd == os.getcwd()
    assert elsewhere in path  # the audit's sys.path now, not the server's


def test_a_failure_in_one_task_stops_the_whole_map_and_kills_the_workers(user_module):
    pool = WorkerPool(2, name="x", timeout=60)
    tasks = [(f"{user_module}:square", "--trainer", (1,)), (f"{user_module}:divide", "--trainer", (1,))]
    with pytest.raises(UserCodeError):
        pool.map(call_user_function, tasks * 3)
    assert pool._workers == []


def test_an_exception_of_the_harness_in_a_worker_is_an_internal_error():
    with pytest.raises(WorkerInternalError) as info:
        run_isolated(int, "not a number", name="int", timeout=60)
    assert "ValueError" in str(info.value) and "Traceback" in info.value.child_traceback


@pytest.mark.parametrize("workers", [0, -1, True, 1.5])
def test_the_worker_count_is_validated(workers):
    with pytest.raises(AuditInputError, match="--workers"):
        WorkerPool(workers, name="x")
