"""Loss (perplexity) attack on a language model (Yeom et al. 2018, arXiv 1709.01604; as applied to
language models by Carlini et al. 2021, arXiv 2012.07805).

Threat model: black-box access to the model's token probabilities on the candidate document. The
score is the mean token log-likelihood, −log(perplexity): documents seen in training are more
likely under the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attacks.text_base import TextAttackContext
from attacks.text_outputs import TokenStatistics, document_mean_log_likelihood


@dataclass(frozen=True)
class LanguageModelLossAttack:
    name: str = "lm_loss"
    threat_model: str = (
        "Black-box token probabilities; the document's mean token log-likelihood "
        "(−log perplexity) is thresholded (Yeom et al. 2018; Carlini et al. 2021)."
    )
    needs_reference: bool = False

    def scores(self, target: TokenStatistics, context: TextAttackContext) -> np.ndarray:
        return document_mean_log_likelihood(target)
