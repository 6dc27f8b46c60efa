"""What a fork server preloads for its workers (audit/machinery/workers.py `preload_for`).

Only what the audit's process has loaded, from a fixed list; never torch._dynamo, which torch imports at a
process's first optimizer: a fork server preloading it (wave 9) cost more CPU than it saved, measured side by
side (docs/test-suite.md). A process that has not loaded torch must not make its workers load it."""

from __future__ import annotations

import multiprocessing

import pytest

from audit.machinery.workers import WorkerPool, preload_for


def test_a_process_preloads_for_its_workers_only_what_it_has_loaded_of_the_candidates():
    assert preload_for({"numpy", "torch", "opacus"}) == ("numpy", "torch", "opacus", "audit.machinery.workers")
    assert preload_for({"numpy", "torch", "torch._dynamo"}) == ("numpy", "torch", "audit.machinery.workers")
    light = preload_for({"numpy", "opacus_like_name", "torch._dynamo"})  # torch itself not loaded: nothing of it
    assert light == ("numpy", "audit.machinery.workers")


def _loaded_at_task_start() -> tuple[bool, bool]:
    import sys

    return "torch" in sys.modules, "torch._dynamo" in sys.modules


@pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(), reason="no fork server here")
def test_a_worker_of_this_process_starts_with_what_its_server_preloaded():
    """The choice reaches the workers: this test process has torch loaded (the suite imports it), so its fork
    server preloads it and a worker has it before its task imports anything; torch._dynamo it does not."""
    import torch  # noqa: F401

    from audit.machinery.workers import forkserver_modules

    with WorkerPool(1, name="x", timeout=60) as pool:
        [(torch_loaded, dynamo_loaded)] = pool.map(_loaded_at_task_start, [()])
    assert torch_loaded == ("torch" in forkserver_modules())
    assert not dynamo_loaded
