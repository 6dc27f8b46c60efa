"""The distance attack on a released synthetic table (Chen, Yu, Zhang, Fritz 2020, arXiv 1909.03935),
described for the registry; the search itself is `attacks.distance` (imported when it scores)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np


@dataclass(frozen=True)
class DistanceAttack:
    name: str = "distance"
    threat_model: str = (
        "Sees only the released synthetic rows; scores each candidate by minus its distance "
        "to the nearest synthetic row (Chen et al. 2020, GAN-Leaks)."
    )
    needs: ClassVar[frozenset[str]] = frozenset()
    citation: ClassVar[str] = "Chen et al. 2020"
    method_note: ClassVar[tuple[str, str]] = (
        "Distance to the synthetic data (sees only the released synthetic table)",
        (
            "The attacker sees only the released synthetic rows (no generator, no parameters) and scores each "
            "candidate record by minus its distance to the nearest synthetic row: a generator that memorises "
            "puts synthetic rows close to its training rows. Chen, Yu, Zhang, Fritz 2020, \u201cGAN-Leaks: A "
            "Taxonomy of Membership Inference Attacks against Generative Models\u201d (arXiv 1909.03935)."
        ),
    )

    def scores(self, candidates_encoded, synthetic_encoded) -> np.ndarray:
        from attacks.distance import distance_membership_scores

        return distance_membership_scores(candidates_encoded, synthetic_encoded)
