"""The run's executor tasks: module-level functions that take plain data and return plain data.

They run wherever the executor puts them (this process, a child process, a Ray worker); each is
seeded by its arguments only (the target's seed comes from (config seed, target index)), so the
numbers do not depend on the executor or the number of workers. Nothing here writes files or
talks to MLflow: the driver checkpoints and logs what the tasks return.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from targets.devices import resolve_device
from targets.training import TrainingSpec, train_target


def train_target_task(
    epsilon: float,
    seed: int,
    *,
    features: np.ndarray,
    labels: np.ndarray,
    n_classes: int,
    spec: TrainingSpec,
    delta: float,
    accountant: str,
    device: str,
    secure_mode: bool,
) -> dict[str, Any]:
    """Train one target; returns {"meta": TrainedTarget's fields but the model, "state": numpy state_dict}. In a
    worker it reports its epochs through the worker's progress channel."""
    from audit.machinery.workers import report_task_progress

    trained = train_target(
        features,
        labels,
        n_classes,
        spec,
        epsilon=epsilon,
        delta=delta,
        accountant=accountant,
        seed=seed,
        device=resolve_device(device),
        secure_mode=secure_mode,
        on_epoch=report_task_progress,
    )
    return {
        "meta": {k: v for k, v in trained.__dict__.items() if k != "model"},
        "state": {name: tensor.detach().cpu().numpy() for name, tensor in trained.model.state_dict().items()},
    }
