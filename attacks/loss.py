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
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from attacks.registry import Knob

if TYPE_CHECKING:
    from attacks.base import AttackContext, QueryableModel


@dataclass(frozen=True)
class LossAttack:
    name: str = "loss"
    threat_model: str = (
        "Black-box: the attacker queries the target's output probabilities on a candidate with its "
        "true label and thresholds the loss (Yeom et al. 2018). No population data or reference models."
    )
    needs: ClassVar[frozenset[str]] = frozenset()
    knobs: ClassVar[tuple[Knob, ...]] = ()
    citation: ClassVar[str] = "Yeom et al. 2018"
    method_note: ClassVar[tuple[str, str]] = (
        "Loss threshold (black box)",
        (
            "The attacker can query the trained model and knows each candidate record with its label. It scores "
            "a candidate by minus the model's loss on it: training records tend to have lower loss, and a "
            "threshold on the loss separates members from non-members. No reference models, no knowledge of "
            "the training algorithm. Yeom, Giacomelli, Fredrikson, Jha 2018, \u201cPrivacy Risk in Machine "
            "Learning: Analyzing the Connection to Overfitting\u201d (arXiv 1709.01604)."
        ),
    )

    def scores(self, target: QueryableModel, context: AttackContext) -> np.ndarray:
        from attacks.model_outputs import logit_scaled_confidence

        logits = target.logits(context.candidate_features)
        return logit_scaled_confidence(logits, context.candidate_labels)
