"""What every language-model membership attack receives: the target's per-token statistics of
each candidate document (`attacks.text_outputs.TokenStatistics`) and the `TextAttackContext`.

The context's fields are the threat model: the candidate texts (zlib), a reference model's
statistics on the same candidates (reference ratio; None when the attacker has none), and the
min-k fraction. No attack sees membership.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from attacks.text_outputs import TokenStatistics


@dataclass(frozen=True)
class TextAttackContext:
    candidate_texts: list[str]
    reference: TokenStatistics | None = None  # a model trained on disjoint data, same candidates
    min_k_fraction: float = 0.2  # Shi et al. 2024 use k = 20 % as their default


class TextMembershipAttack(Protocol):
    name: str
    threat_model: str
    needs_reference: bool

    def scores(self, target: TokenStatistics, context: TextAttackContext) -> np.ndarray: ...


def lowest_k_mean(values: np.ndarray, fraction: float) -> np.ndarray:
    """Per row, the mean of the ⌊fraction × n_row⌋ smallest non-NaN values, at least one
    (NaN-padded rows). ⌊k·n⌋ is what both papers' code keeps (Shi et al. 2024's min-k % reference
    implementation, `int(len(x) * k)`; Zhang et al. 2024's min-k %++ and MIMIR alike), so the
    scores are comparable with theirs; the floor of one token keeps short documents scored."""
    if not 0 < fraction <= 1:
        raise ValueError(f"min-k fraction must be in (0, 1], got {fraction}")
    out = np.full(len(values), np.nan)
    for i, row in enumerate(values):
        row = row[~np.isnan(row)]
        if row.size:
            k = max(1, int(np.floor(fraction * row.size)))
            out[i] = np.sort(row)[:k].mean()
    return out
