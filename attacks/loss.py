"""Loss-threshold membership inference (Yeom, Giacomelli, Fredrikson, Jha 2018, arXiv 1709.01604).

Threat model: black-box query access to the target's output probabilities and the candidate's
true label; no reference models. Training examples tend to have lower loss, so the score is the
negative per-example cross-entropy.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attacks.base import AttackContext, QueryableModel
from attacks.model_outputs import per_example_cross_entropy


@dataclass(frozen=True)
class LossAttack:
    name: str = "loss"
    threat_model: str = (
        "Black-box: the attacker queries the target's output probabilities on a candidate with its "
        "true label and thresholds the loss (Yeom et al. 2018). No population data or reference models."
    )

    def scores(self, target: QueryableModel, context: AttackContext) -> np.ndarray:
        logits = target.logits(context.candidate_features)
        return -per_example_cross_entropy(logits, context.candidate_labels)
