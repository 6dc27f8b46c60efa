"""A plug-in attack for tests/test_attack_plugin.py: the whole of what a new attack is — this one file
(a class that describes itself) and one `register_attack(EntropyAttack)` call, nothing else edited.

Entropy threshold (Salem, Zhang, Humbert, Berrang, Fritz, Backes 2019, "ML-Leaks", arXiv 1806.01246,
§6 "threshold choosing"): a model is more confident, its prediction entropy lower, on its training
records. The score is minus the entropy of the top-k predicted probabilities (renormalised)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from attacks.registry import Knob

SEEN_OPTIONS: list[int] = []  # the knob values the attack was run with (the test reads them)


@dataclass(frozen=True)
class EntropyAttack:
    name: str = "entropy"
    threat_model: str = (
        "Black-box probabilities only, no label, no population data: thresholds the entropy "
        "of the prediction (Salem et al. 2019)."
    )
    needs: ClassVar[frozenset[str]] = frozenset()
    knobs: ClassVar[tuple[Knob, ...]] = (
        Knob(
            "entropy_top_k",
            int,
            10,
            "classes whose probabilities enter the entropy (entropy attack)",
            low=1,
            high=1_000,
        ),
    )
    citation: ClassVar[str] = "Salem et al. 2019"
    method_note: ClassVar[tuple[str, str]] = (
        "Prediction entropy (black box, no labels)",
        (
            "The attacker queries the model and scores each candidate by minus the entropy of its predicted "
            "probabilities: models are more confident on their training records. Salem et al. 2019, ML-Leaks "
            "(arXiv 1806.01246)."
        ),
    )

    def scores(self, target, context) -> np.ndarray:
        top_k = context.options.entropy_top_k
        SEEN_OPTIONS.append(top_k)
        logits = np.asarray(target.logits(context.candidate_features), dtype=np.float64)
        logits = -np.sort(-logits, axis=-1)[:, :top_k]
        log_p = logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)
        return (np.exp(log_p) * log_p).sum(axis=-1)  # −entropy: higher = more confident = member
