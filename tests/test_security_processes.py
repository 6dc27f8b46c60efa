"""Processes (issue #39 item 5): what a worker's code starts never outlives the command — also a
process that calls setsid (its own session, outside the worker's group) and one orphaned by its
parent (reparented to the worker, its subreaper, so the tree walk still finds it).

The task functions below run in real worker processes (audit.machinery.workers); the test then
checks with signal 0 that every pid they started is gone.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from audit.machinery.workers import WorkerInternalError, descendants, run_isolated

pytestmark = pytest.mark.security


def _spawn(record: str, *, orphan: bool, new_session: bool) -> None:
    """Fork a child that (optionally) calls setsid and (optionally) leaves a grandchild orphaned;
    every pid that stays alive is appended to `record`."""
    child = os.fork()
    if child == 0:
        try:
            if new_session:
                os.setsid()
            if orphan:
                grandchild = os.fork()
                if grandchild == 0:
                    with open(record, "a") as handle:
                        handle.write(f"{os.getpid()}\n")
                    time.sleep(300)
                    os._exit(0)
                os._exit(0)  # the grandchild is orphaned
            with open(record, "a") as handle:
                handle.write(f"{os.getpid()}\n")
            time.sleep(300)
        finally:
            os._exit(0)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not (Path(record).is_file() and Path(record).read_text().strip()):
        time.sleep(0.05)


def returns_after_spawning(record: str, orphan: bool, new_session: bool) -> str:
    _spawn(record, orphan=orphan, new_session=new_session)
    return "done"


def raises_after_spawning(record: str, orphan: bool, new_session: bool) -> str:
    _spawn(record, orphan=orphan, new_session=new_session)
    raise RuntimeError("a bug after forking")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


@pytest.mark.parametrize("task", [returns_after_spawning, raises_after_spawning], ids=["returns", "raises"])
@pytest.mark.parametrize(
    "orphan, new_session",
    [(False, False), (False, True), (True, True)],
    ids=["child in the group", "child calls setsid", "orphaned grandchild in its own session"],
)
def test_nothing_a_worker_started_outlives_it(tmp_path, task, orphan, new_session):
    record = tmp_path / "pids"
    try:
        run_isolated(task, str(record), orphan, new_session, name="test task", timeout=60)
    except WorkerInternalError:
        assert task is raises_after_spawning
    pids = [int(p) for p in record.read_text().split()]
    assert pids
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids), "a process started by the worker outlived it"


def test_descendants_walks_the_whole_tree():
    assert descendants(os.getpid()) == [] or all(isinstance(p, int) for p in descendants(os.getpid()))
