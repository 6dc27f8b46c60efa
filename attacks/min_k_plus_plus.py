"""Min-k %++ (Zhang, Sun, Kang, Lu, Hou, Xiao 2024, "Min-K%++: Improved Baseline for Detecting
Pre-Training Data from Large Language Models", arXiv 2404.02936).

Threat model: black-box access to the full next-token distribution (logits). Training pushes a
member's tokens toward local maxima of the likelihood; each token's log-probability is therefore
standardised against the model's own distribution at that position,
(log p(x_t | x_<t) − μ_t) / σ_t with μ_t, σ_t the mean and SD of log p(z | x_<t) for z ~ p(· | x_<t)
(their eq. 3), and the score is the mean of the k % lowest standardised tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attacks.text_base import TextAttackContext, lowest_k_mean
from attacks.text_outputs import TokenStatistics

MIN_STD = 1e-6  # a position where the model is certain has σ = 0: the token is then its only choice


def min_k_plus_plus_scores(logprob: np.ndarray, mean: np.ndarray, std: np.ndarray, fraction: float) -> np.ndarray:
    standardised = (logprob - mean) / np.maximum(std, MIN_STD)
    return lowest_k_mean(standardised, fraction)


@dataclass(frozen=True)
class MinKPlusPlusAttack:
    name: str = "min_k_plus_plus"
    threat_model: str = (
        "Black-box next-token distributions; min-k % of token log-probabilities standardised "
        "by the model's own mean and SD at each position (Zhang et al. 2024)."
    )
    needs_reference: bool = False

    def scores(self, target: TokenStatistics, context: TextAttackContext) -> np.ndarray:
        return min_k_plus_plus_scores(target.logprob, target.mean, target.std, context.min_k_fraction)
