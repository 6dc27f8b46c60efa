"""The run's second lane (audit/sweep/side_lane.py) and the worker progress channel it and the `processes`
executor use: same numbers with and without the lane, work counted in its own unit from a child process,
both lanes' heartbeats off a terminal, a failure in the lane raised in the driver."""

from __future__ import annotations

import io
import re
import time

import numpy as np
import pytest

from audit.errors import AuditInputError
from audit.machinery.progress import CallbackProgress, LineProgress
from audit.machinery.workers import WorkerPool
from audit.sweep.side_lane import SideLane, side_lane_wanted
from audit.sweep.tasks import train_target_task
from targets.training import TrainingSpec

SPEC = TrainingSpec(hidden_sizes=(8,), epochs=3, batch_size=16, lr=0.1, momentum=0.9, max_grad_norm=1.0)


def _rows(n: int = 64, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return dict(
        features=rng.normal(size=(n, 5)).astype(np.float32),
        labels=rng.integers(0, 2, n),
        n_classes=2,
        spec=SPEC,
        delta=1e-5,
        accountant="rdp",
        device="cpu",
        secure_mode=False,
    )


def test_the_lane_is_used_on_the_local_executor_only_and_as_asked():
    assert side_lane_wanted("processes", None) is False
    assert side_lane_wanted("ray", None) is False
    assert side_lane_wanted("local", False) is False
    assert side_lane_wanted("processes", True) is True


def test_two_lanes_each_get_their_heartbeat_line_off_a_terminal():
    stream = io.StringIO()
    progress = LineProgress(stream, heartbeat_s=0.2)
    progress._heartbeat_poll = 0.05
    main = progress.begin("refs, training steps", total=10)
    side = progress.begin("twin (epochs)", total=4, lane="side")
    main.update(3)
    side.update(1)
    time.sleep(0.6)
    progress.close()
    text = stream.getvalue()
    assert re.search(r"… refs, training steps 3/10: running for \d+ s, about \d+ s left", text), text
    assert re.search(r"… twin \(epochs\) 1/4: running for \d+ s, about \d+ s left", text), text


@pytest.mark.slow
def test_a_task_in_a_worker_reports_its_epochs_to_the_driver():
    seen = []
    with WorkerPool(1, name="test", threads=1) as pool:
        [result] = pool.map(
            train_target_task, [(1.0, 7)], _rows(), on_progress=lambda index, figures: seen.append((index, figures))
        )
    assert [figures[0] for _, figures in seen] == [1.0, 2.0, 3.0]
    assert {index for index, _ in seen} == {0} and result["meta"]["steps"] > 0


@pytest.mark.slow
def test_the_side_lane_runs_tasks_counts_them_and_raises_their_failure_in_the_driver():
    events = []
    progress = CallbackProgress(events.append)
    with SideLane(progress) as lane:
        lane.submit("a", train_target_task, (1.0, 7), _rows(), description="a: training (epochs)", total=3)
        # ε = 1e-9 cannot be calibrated: Opacus refuses, exit 2 in the driver (whichever process ran it: the driver
        # takes the next queued task while it waits for "a")
        lane.submit("bad", train_target_task, (1e-9, 7), _rows(), description="bad: training (epochs)", total=3)
        first = lane.result("a")
        with pytest.raises(AuditInputError, match="privacy.epsilons"):
            lane.result("bad")
        lane.submit("after", train_target_task, (1.0, 8), _rows(), description="after: training (epochs)", total=3)
        with pytest.raises(AuditInputError):  # queued after the failure: fails with it, never runs
            lane.result("after")
    assert first["meta"]["epsilon_target"] == 1.0
    updates = [e["completed"] for e in events if e["event"] == "update" and e["description"].startswith("a:")]
    assert updates == [1, 2, 3]
    finished = {e["description"]: e["ok"] for e in events if e["event"] == "finish"}
    assert finished == {"a: training (epochs)": True, "bad: training (epochs)": False}


@pytest.mark.slow
def test_the_driver_runs_queued_tasks_while_it_waits_with_the_numbers_of_the_lane():
    """While the lane trains "a", the driver takes "b" from the queue (counted on its own lane) rather than wait; a
    task run in either process gives the same result (each seeded by its arguments only)."""
    events = []
    progress = CallbackProgress(events.append)
    with SideLane(progress) as lane:
        for key, seed in (("a", 7), ("b", 8), ("c", 7)):
            lane.submit(key, train_target_task, (1.0, seed), _rows(), description=f"{key}: training (epochs)", total=3)
        results = {key: lane.result(key) for key in ("a", "b", "c")}
    order = [(e["event"], e["description"][0]) for e in events if e["event"] in ("start", "finish")]
    # one lane would start "b" only once "a" had finished: here both ran at once
    assert order.index(("start", "b")) < order.index(("finish", "a")), order
    lanes = {d for _, d in order}
    for key in ("a", "c"):  # the same task (ε 1, seed 7), whichever process ran it
        assert results[key]["meta"]["accountant_epsilon"] == results["a"]["meta"]["accountant_epsilon"]
        for name, array in results[key]["state"].items():
            assert (array == results["a"]["state"][name]).all()
    updates = {
        d: [e["completed"] for e in events if e["event"] == "update" and e["description"][0] == d] for d in lanes
    }
    assert all(counts == [1, 2, 3] for counts in updates.values()), updates


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    from audit.machinery.config import resolve_config
    from audit.sweep.runner import run_audit

    config = resolve_config("smoke").model_copy(deep=True)
    config.data.n_rows = 400
    config.training.epochs = 2
    config.training.hidden_sizes = [16]
    # Batch 16: Opacus's Poisson rate 1/8 on this small training set, where the default batch (q = 1/2) made each
    # PRV noise calibration (driver, lane, twin, probes: each process calibrates its own) ~10 s of CPU; ~1 s here.
    config.training.batch_size = 16
    config.attacks.n_reference_models = 4
    config.attacks.n_shadow_models = 2
    config.attacks.rmia_population = 100
    config.privacy.epsilons = [4.0]
    config.privacy.one_run_canaries = 50
    out = tmp_path_factory.mktemp("lanes")
    return {
        lane: run_audit(config, out_dir=out / str(lane), tracking=False, side_process=lane).results
        for lane in (True, False)
    }


@pytest.mark.slow
def test_a_run_with_the_side_lane_gives_the_numbers_of_a_run_without_it(tiny_runs):
    from tests.smoke_fingerprint import differences, fingerprint

    with_lane, without = fingerprint(tiny_runs[True]), fingerprint(tiny_runs[False])
    assert "targets/0/whitebox_one_run/p_value" in with_lane or any("whitebox_one_run" in k for k in with_lane)
    assert any("conformance" in k for k in with_lane)
    assert differences(without, with_lane) == {}
