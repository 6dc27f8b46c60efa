"""What every membership-inference attack receives and returns.

An attack turns (target model, candidates) into one membership score per candidate, higher =
more likely a member. Everything an attack may use beyond the target's outputs (population data
for shadows/references, how the target was trained) is in `AttackContext`, so the threat model of
each attack is visible in what it reads.
"""
from __future__ import annotations

from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from targets.training import TrainingSpec


class QueryableModel(Protocol):
    def logits(self, features: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class AttackOptions:
    """Attack knobs from the config's `attacks:` section (validated there)."""

    n_shadow_models: int = 8
    n_reference_models: int = 64
    lira_global_variance: str = "auto"  # auto | always | never; auto = global when fewer than 64 references
    rmia_a: float = 0.3
    rmia_gamma: float = 2.0
    rmia_population: int = 1000
    label_only_queries: int = 32  # noisy copies per candidate (label-only attack)
    label_only_noise: float = 0.1  # their noise scale, as a fraction of each feature's spread
    # Reference/shadow models per executor task; None = all of a target's models in one task.
    # Part of the numbers (float summation order of the vectorized trainer), not of the executor.
    models_per_task: int | None = None


class TaskRunner(Protocol):
    """Where model-training tasks run (an executor of the audit): results in task order."""

    def map(self, function, tasks, kwargs=None) -> list: ...


@dataclass(frozen=True)
class TargetTraining:
    """How the target was trained: reference and shadow models are trained exactly the same way."""

    spec: TrainingSpec
    noise_multiplier: float  # 0 for the non-private target
    max_grad_norm: float | None  # None for the non-private target
    sample_rate: float
    steps: int
    train_size: int  # rows in the target's training set


@dataclass(frozen=True)
class AttackContext:
    candidate_features: np.ndarray
    candidate_labels: np.ndarray
    n_classes: int
    # Population data the attacker may draw from (disjoint from candidates and the test set).
    pool_features: np.ndarray
    pool_labels: np.ndarray
    training: TargetTraining
    epsilon: float
    delta: float
    accountant: str
    seed: int
    device: torch.device
    options: AttackOptions = field(default_factory=AttackOptions)
    # What attacks train once per target (reference/shadow model outputs, as dicts of arrays),
    # shared between attacks and, in a `run`, checkpointed to disk for --resume.
    cache: MutableMapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # How reference/shadow models are trained when the target is not the harness's own MLP:
    # `train_models(features, labels, in_masks (K, n) bool, queries: list of arrays, seed)` returns,
    # per query set, a (K, n_query, C) array of model k's logits. None = the vectorized DP-SGD
    # trainer with `training` (σ, q, T, C) on `training.spec`'s architecture.
    train_models: Callable[..., list[np.ndarray]] | None = field(default=None, compare=False, repr=False)
    # How reference/shadow models are trained: None = here, in this process. `task_device` is the
    # device string the tasks resolve (default: `device`); a Ray cluster's GPU nodes resolve "auto".
    executor: TaskRunner | None = field(default=None, compare=False, repr=False)
    task_device: str | None = None
    # Not part of the threat model: `report_progress(what, done, total)` tells the caller how far
    # long pieces (training K reference or shadow models) have got; None = nobody is listening.
    report_progress: Callable[[str, float, int | None], None] | None = field(default=None, compare=False, repr=False)


class MembershipAttack(Protocol):
    name: str
    threat_model: str  # one sentence, copied into reports

    def scores(self, target: QueryableModel, context: AttackContext) -> np.ndarray: ...
