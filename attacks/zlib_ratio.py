"""zlib-ratio attack (Carlini, Tramèr, Wallace, Jagielski, Herbert-Voss, Lee, Roberts, Brown, Song,
Erlingsson, Oprea, Raffel 2021, "Extracting Training Data from Large Language Models", arXiv
2012.07805, §5.2).

Threat model: black-box token probabilities and the candidate's text. Text that is merely easy
(repetitive, formulaic) has low perplexity whether or not it was trained on; zlib's compressed
length measures that easiness without the model. The score is −(log-perplexity) / (zlib bits):
a document more likely under the model than its compressibility explains looks like a member.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from attacks.text_base import TextAttackContext
from attacks.text_outputs import TokenStatistics, document_mean_log_likelihood


def zlib_entropy_bits(text: str) -> float:
    """Bits of zlib's (level 9) compression of the UTF-8 text."""
    return 8.0 * len(zlib.compress(text.encode("utf-8"), 9))


def zlib_ratio_scores(mean_log_likelihood: np.ndarray, texts: list[str]) -> np.ndarray:
    bits = np.array([zlib_entropy_bits(t) for t in texts])
    return mean_log_likelihood / bits * 1000.0  # log-perplexity is ≤ 0: dividing keeps "higher = member"


@dataclass(frozen=True)
class ZlibRatioAttack:
    name: str = "zlib_ratio"
    threat_model: str = (
        "Black-box token probabilities plus the text; log-perplexity divided by the "
        "text's zlib entropy (Carlini et al. 2021)."
    )
    needs_reference: bool = False

    def scores(self, target: TokenStatistics, context: TextAttackContext) -> np.ndarray:
        return zlib_ratio_scores(document_mean_log_likelihood(target), context.candidate_texts)
