"""A bank of reference models shared between the run's two lanes (audit.sweep.side_lane.LaneSharingExecutor).

A vectorized bank trains as two tasks (attacks.reference_models.model_slices): with a side lane the driver trains
the first while the side process trains the second (the last quarter of the models), or takes it back when the lane is
busy; the bank must be the one trained here as the same two tasks, bit for bit. And the lane's
queue: a shared part runs before the work queued earlier, and a part the lane has not started can be taken back.
"""

import threading
import time

import numpy as np
import pytest
import torch

from attacks import AttackContext, AttackOptions, TargetTraining
from attacks.reference_models import SECOND_TASK_SHARE, reference_bank
from audit.machinery.progress import CallbackProgress
from audit.sweep.side_lane import LaneSharingExecutor, SideLane
from targets.datasets import make_default_tabular
from targets.training import TrainingSpec

pytestmark = pytest.mark.slow  # each test spawns the side process (a fresh interpreter importing torch)


def _context(executor, events: list | None = None) -> AttackContext:
    data = make_default_tabular(500, seed=4)
    order = np.random.default_rng(1).permutation(data.n_rows)
    cand, pool = order[:200], order[200:]
    spec = TrainingSpec(hidden_sizes=[16], epochs=2, batch_size=16, lr=0.1, momentum=0.9, max_grad_norm=1.0)
    return AttackContext(
        candidate_features=data.features[cand],
        candidate_labels=data.labels[cand],
        n_classes=2,
        pool_features=data.features[pool],
        pool_labels=data.labels[pool],
        training=TargetTraining(spec, 1.1, 1.0, 0.16, 13, 100),
        epsilon=4.0,
        delta=1e-5,
        accountant="prv",
        seed=7,
        device=torch.device("cpu"),
        options=AttackOptions(n_reference_models=16, rmia_population=50),
        executor=executor,
        report_progress=None if events is None else (lambda what, done, total: events.append((what, done, total))),
    )


@pytest.fixture
def one_torch_thread():
    """Both lanes with the run's torch threads (cpu_threads, 1 by default), as run_audit sets them."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_a_bank_shared_with_the_side_process_is_the_bank_trained_here(one_torch_thread):
    one_pass = reference_bank(_context(None))
    lane_events: list[dict] = []
    here_events: list[tuple] = []
    with SideLane(CallbackProgress(lane_events.append), threads=1) as side:
        shared = reference_bank(_context(LaneSharingExecutor(side, "target 1/1"), here_events))
    for field in ("in_masks", "candidate_logits", "population_features", "population_logits"):
        assert np.array_equal(getattr(shared, field), getattr(one_pass, field)), field
    n_side = int(16 * SECOND_TASK_SHARE)
    here_lines = {what for what, _, _ in here_events}
    assert f"16 reference models: {16 - n_side} here, training steps" in here_lines
    # the lane's part ran there (counted in DP-SGD steps on the lane's own line), or the driver took it back
    lane_lines = {e["description"] for e in lane_events if e["event"] == "finish"}
    ran_on_lane = (
        f"target 1/1: 16 reference models: {n_side} in the side process (from model {17 - n_side}), training steps"
    )
    taken_back = f"16 reference models: {n_side} more here (the side process was busy), training steps"
    assert (ran_on_lane in lane_lines) != (taken_back in here_lines)


def test_a_part_queued_first_runs_before_earlier_work_and_an_unstarted_one_can_be_taken_back():
    events: list[dict] = []
    busy = threading.Event()

    def record(event: dict) -> None:
        events.append(event)
        if event["event"] == "start" and event["description"] == "busy":
            busy.set()

    with SideLane(CallbackProgress(record), threads=None) as side:
        side.submit("busy", time.sleep, (1.5,), description="busy")
        assert busy.wait(30)  # the lane has taken it: what follows queues behind it
        side.submit("queued", abs, (-1,), description="queued earlier")
        side.submit("shared", abs, (-2,), description="shared part", first=True)
        side.submit("withdrawn", abs, (-3,), description="taken back")
        assert side.withdraw("withdrawn")  # the lane is still sleeping: nothing after "busy" has started
        # help=False: the driver waits (by default it would run the queued tasks itself while the lane is busy)
        assert side.result("queued", help=False) == 1 and side.result("shared", help=False) == 2
        assert not side.withdraw("queued")  # it ran: too late
    started = [e["description"] for e in events if e["event"] == "start"]
    assert started == ["busy", "shared part", "queued earlier"]
