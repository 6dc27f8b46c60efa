"""Reference-model ratio (Carlini et al. 2021, arXiv 2012.07805, §5.2 "comparing to other neural
language models"; Mireshghallah, Goyal, Uniyal, Berg-Kirkpatrick, Shokri 2022, "Quantifying
Privacy Risks of Masked Language Models Using Membership Inference Attacks", arXiv 2203.03929).

Threat model: black-box token probabilities of the target, plus a reference model the attacker
trained on data from the same distribution that excludes the candidates. The score is the
target's mean token log-likelihood minus the reference's: how much more the target likes the
document than a model that never saw it — what is generically likely cancels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attacks.text_base import TextAttackContext
from attacks.text_outputs import TokenStatistics, document_mean_log_likelihood


def reference_ratio_scores(target: TokenStatistics, reference: TokenStatistics) -> np.ndarray:
    return document_mean_log_likelihood(target) - document_mean_log_likelihood(reference)


@dataclass(frozen=True)
class ReferenceRatioAttack:
    name: str = "reference_ratio"
    threat_model: str = (
        "Black-box token probabilities plus a reference model trained on disjoint data from "
        "the same distribution; log-likelihood ratio target / reference (Carlini et al. 2021)."
    )
    needs_reference: bool = True

    def scores(self, target: TokenStatistics, context: TextAttackContext) -> np.ndarray:
        if context.reference is None:
            raise ValueError("reference_ratio needs the reference model's statistics (context.reference)")
        return reference_ratio_scores(target, context.reference)
