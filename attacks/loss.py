"""Loss-threshold membership inference (Yeom, Giacomelli, Fredrikson, Jha 2018, arXiv 1709.01604).

Threat model: black-box query access to the target's output probabilities and the candidate's
true label; no reference models. Training examples tend to have lower loss. The score is the
logit-scaled confidence φ = log p_y − log(1 − p_y), a strictly increasing function of −loss
(loss = log(1 + e^−φ)), so every threshold on the loss is a threshold on φ and the ROC and bounds
are those of the loss attack. φ is used because the loss itself underflows to exactly 0 for the
saturated logits (|z| ≫ 100) that DP-SGD noise often produces, which would tie the most
member-like candidates.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attacks.base import AttackContext, QueryableModel
from attacks.model_outputs import logit_scaled_confidence


@dataclass(frozen=True)
class LossAttack:
    name: str = "loss"
    threat_model: str = (
        "Black-box: the attacker queries the target's output probabilities on a candidate with its "
        "true label and thresholds the loss (Yeom et al. 2018). No population data or reference models."
    )

    def scores(self, target: QueryableModel, context: AttackContext) -> np.ndarray:
        logits = target.logits(context.candidate_features)
        return logit_scaled_confidence(logits, context.candidate_labels)
