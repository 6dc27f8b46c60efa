"""What every membership-inference attack receives and returns.

An attack turns (target model, candidates) into one membership score per candidate, higher =
more likely a member. Everything an attack may use beyond the target's outputs (population data
for shadows/references, how the target was trained) is in `AttackContext`, so the threat model of
each attack is visible in what it reads.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from targets.training import TrainingSpec


class QueryableModel(Protocol):
    def logits(self, features: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class AttackContext:
    candidate_features: np.ndarray
    candidate_labels: np.ndarray
    n_classes: int
    # Population data the attacker may draw from (disjoint from candidates and the test set).
    pool_features: np.ndarray
    pool_labels: np.ndarray
    # How the target was trained, for attacks that train shadow/reference models "like the target".
    training: TrainingSpec
    epsilon: float
    delta: float
    accountant: str
    seed: int
    device: torch.device


class MembershipAttack(Protocol):
    name: str
    threat_model: str  # one sentence, copied into reports

    def scores(self, target: QueryableModel, context: AttackContext) -> np.ndarray: ...
