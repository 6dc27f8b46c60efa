"""What a fork server preloads for its workers (audit/machinery/workers.py `preload_for`).

A worker that trains makes an optimizer, and torch imports torch._dynamo at a process's first optimizer
(~1-2 s of CPU): preloaded once in the fork server, the pool's workers start with it instead of each
importing it. A process that has not loaded torch must not make its workers load it."""

from __future__ import annotations

import multiprocessing

import pytest

from audit.machinery.workers import WorkerPool, preload_for


def test_a_process_with_opacus_loaded_preloads_torch_dynamo_for_its_training_workers():
    chosen = preload_for({"numpy", "torch", "opacus"})
    assert chosen == ("numpy", "torch", "opacus", "torch._dynamo", "audit.machinery.workers")


def test_a_process_that_made_an_optimizer_preloads_torch_dynamo():
    assert "torch._dynamo" in preload_for({"torch", "torch._dynamo"})


def test_torch_without_opacus_or_an_optimizer_does_not_preload_dynamo_and_no_torch_loads_neither():
    assert preload_for({"numpy", "torch"}) == ("numpy", "torch", "audit.machinery.workers")
    light = preload_for({"numpy", "opacus_like_name", "torch._dynamo"})  # torch itself not loaded: nothing of it
    assert light == ("numpy", "audit.machinery.workers")


def _dynamo_loaded_at_task_start() -> bool:
    import sys

    return "torch._dynamo" in sys.modules


@pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(), reason="no fork server here")
def test_a_worker_of_this_process_starts_with_what_its_server_preloaded():
    """The choice reaches the workers: this test process has torch and Opacus loaded (the suite imports
    them), so its fork server preloads torch._dynamo, and a worker has it before its task imports anything."""
    import opacus  # noqa: F401  (as the audits that train have it)

    from audit.machinery.workers import forkserver_modules

    with WorkerPool(1, name="x", timeout=60) as pool:
        [loaded] = pool.map(_dynamo_loaded_at_task_start, [()])
    assert loaded == ("torch._dynamo" in forkserver_modules())
