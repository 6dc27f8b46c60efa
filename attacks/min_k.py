"""Min-k % probability (Shi, Ajith, Xia, Huang, Liu, Blevins, Chen, Zettlemoyer 2024, "Detecting
Pretraining Data from Large Language Models", arXiv 2310.16789).

Threat model: black-box token probabilities. A non-member tends to contain a few outlier tokens
of very low probability; a member fewer. The score is the mean log-probability of the k % least
likely tokens of the document (k = 20 % by default).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attacks.text_base import TextAttackContext, lowest_k_mean
from attacks.text_outputs import TokenStatistics


def min_k_scores(logprob: np.ndarray, fraction: float) -> np.ndarray:
    return lowest_k_mean(logprob, fraction)


@dataclass(frozen=True)
class MinKAttack:
    name: str = "min_k"
    threat_model: str = (
        "Black-box token probabilities; mean log-probability of the document's k % least "
        "likely tokens (Shi et al. 2024)."
    )
    needs_reference: bool = False

    def scores(self, target: TokenStatistics, context: TextAttackContext) -> np.ndarray:
        return min_k_scores(target.logprob, context.min_k_fraction)
