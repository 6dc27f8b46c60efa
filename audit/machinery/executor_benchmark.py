"""`bench --executor`: throughput of user-trainer runs on an executor, and what it projects to.

Measured: N runs of a trainer (`module:function`, the canary-audit protocol `train(features, labels,
seed) -> model`) through `call_user_function`, as a canary audit or a reference model of any
architecture runs it, at each worker count. Start-up (spawning workers, joining the cluster, first
imports) is excluded by a warm-up round of one run per worker: what is timed is the steady state.

Projected (arithmetic, not measured): the wall time of work made of T independent tasks of measured
cost c seconds on N GPUs with s task slots each (fractional GPU requests): T·c / (N·s), rounded up
to whole rounds. It assumes a slot runs a task as fast as one worker did here and that the tasks
are independent (they are: each is seeded by its id). A GPU's own speed-up over this machine is
not measured here and not assumed: the projection is for the device the cost was measured on.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import numpy as np

from audit.machinery.executors import make_executor
from audit.machinery.workers import call_user_function

DEFAULT_TRAINER = "audit.demos.dp_trainers:correct_dpsgd"


def parameter_checksum(model) -> float:
    """The `convert` of a benchmark run: the trained model reduced to one number (plain data back)."""
    return float(sum(float(p.detach().double().sum()) for p in model.parameters()))


def _benchmark_data(n_rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    from targets.datasets import make_default_tabular

    data = make_default_tabular(n_rows, seed)
    return data.features.astype(np.float32), data.labels.astype(np.int64)


def load_average() -> list[float] | None:
    """This machine's 1, 5 and 15-minute load averages (`/proc/loadavg`): a throughput measured on a
    machine other processes keep busy is low, and a ratio measured there understates the scaling."""
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except (AttributeError, OSError):  # not a Unix
        return None


def trainer_throughput(
    kind: str,
    workers: int,
    n_runs: int,
    *,
    trainer: str = DEFAULT_TRAINER,
    n_rows: int = 256,
    ray_address: str | None = None,
    min_seconds: float = 0.0,
) -> dict[str, Any]:
    """Steady-state runs/second of `trainer` on `kind` with `workers` workers (one warm-up run each).

    `n_runs` runs (seeds 0..n_runs-1, whose model checksums are returned) are timed, then further
    batches of `n_runs` (fresh seeds) until `min_seconds` have passed: a runs/second taken over a
    second or two of tiny tasks is mostly noise."""
    X, y = _benchmark_data(n_rows)
    load_before = load_average()
    executor = make_executor(kind, workers=None if kind == "local" else workers, ray_address=ray_address)
    shared = dict(convert=parameter_checksum)
    try:
        warm = [(trainer, "--trainer", (X, y, 10_000 + i)) for i in range(executor.workers)]
        executor.map(call_user_function, warm, shared)
        started = time.perf_counter()
        checksums = executor.map(call_user_function, [(trainer, "--trainer", (X, y, i)) for i in range(n_runs)], shared)
        done = n_runs
        while time.perf_counter() - started < min_seconds:
            batch = [(trainer, "--trainer", (X, y, 100_000 + done + i)) for i in range(n_runs)]
            executor.map(call_user_function, batch, shared)
            done += n_runs
        seconds = time.perf_counter() - started
    finally:
        executor.close()
    return {
        "executor": kind,
        "workers": executor.workers,
        "runs": done,
        "seconds": seconds,
        "runs_per_second": done / seconds,
        "seconds_per_run_per_worker": seconds * executor.workers / done,
        "checksums": checksums,
        "rows": n_rows,
        "load_average_before": load_before,
        "load_average_after": load_average(),
    }


def projected_wall_seconds(n_tasks: int, seconds_per_task: float, n_gpus: int, slots_per_gpu: int) -> float:
    """T tasks of c seconds on N GPUs × s slots: ⌈T / (N·s)⌉ rounds of c seconds."""
    slots = n_gpus * slots_per_gpu
    return math.ceil(n_tasks / slots) * seconds_per_task


def full_preset_model_trainings() -> tuple[int, dict[str, Any]]:
    """How many models the `full` preset trains (targets + LiRA/RMIA references + shadows, per ε)."""
    from audit.machinery.config import resolve_config

    config = resolve_config("full")
    n_targets = len(config.privacy.epsilons)
    per_target = 1 + config.attacks.n_reference_models + config.attacks.n_shadow_models
    return n_targets * per_target, {
        "targets": n_targets,
        "references_per_target": config.attacks.n_reference_models,
        "shadows_per_target": config.attacks.n_shadow_models,
        "rows": config.data.n_rows,
        "epochs": config.training.epochs,
        "hidden_sizes": list(config.training.hidden_sizes),
    }


def full_preset_seconds_per_model(steps_measured: int = 20) -> tuple[float, dict[str, Any]]:
    """Measured seconds to train one `full`-preset model (its rows, width, batch and epochs) with the
    vectorized DP-SGD trainer on this machine's CPU, one model, one thread: `steps_measured` steps
    timed, scaled to the preset's step count."""
    import torch

    from audit.machinery.config import resolve_config
    from targets.vectorized_dpsgd import DPSGDSpec, train_many

    config = resolve_config("full")
    splits = config.audit_splits(config.data.n_rows, seed=0)
    n_train = len(splits.train_idx)
    q = config.training.batch_size / n_train
    steps_full = config.training.epochs * math.ceil(n_train / config.training.batch_size)
    X, y = _benchmark_data(n_train)
    spec = DPSGDSpec(
        noise_multiplier=1.0,
        max_grad_norm=config.training.max_grad_norm,
        sample_rate=q,
        steps=steps_measured,
        lr=config.training.lr,
        momentum=config.training.momentum,
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train_many(
            X.shape[1],
            config.training.hidden_sizes,
            2,
            X,
            y,
            np.ones((1, n_train), bool),
            DPSGDSpec(noise_multiplier=1.0, max_grad_norm=1.0, sample_rate=q, steps=2, lr=0.1),
            seed=0,
            device="cpu",
        )  # warm-up
        started = time.perf_counter()
        train_many(
            X.shape[1], config.training.hidden_sizes, 2, X, y, np.ones((1, n_train), bool), spec, seed=0, device="cpu"
        )
        per_step = (time.perf_counter() - started) / steps_measured
    finally:
        torch.set_num_threads(threads)
    return per_step * steps_full, {"train_rows": n_train, "steps": steps_full, "seconds_per_step": per_step}
