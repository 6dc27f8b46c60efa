"""Label-only membership inference by noise robustness (Choquette-Choo, Tramèr, Carlini, Papernot
2021, "Label-Only Membership Inference Attacks", arXiv 2007.14321, §4: the data-augmentation /
random-noise attack, with the gap attack of §3 as its one-query special case).

Threat model: the attacker sees only the predicted class (no probabilities, no logits) for inputs
of its choice, and knows the candidate's true label. A model is more robust around its training
points: a member stays correctly classified under small perturbations more often than a
non-member. For each candidate x the attacker queries x itself and `label_only_queries` noisy
copies x + N(0, (s·σ_j)²) per feature j (σ_j the feature's standard deviation over the
candidates, s = `label_only_noise`), and scores the fraction classified as the true label.
No reference models, no population data.

The noise scale is fixed a priori (not tuned on the audit's own membership, which would bias the
bounds); the paper tunes it on shadow models, so this attack is a floor for label-only leakage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from attacks.registry import LABELS_ONLY, Knob

if TYPE_CHECKING:
    from attacks.base import AttackContext, QueryableModel


def predicted_labels(target: QueryableModel, features: np.ndarray) -> np.ndarray:
    """The target's predicted classes: `predict_labels` when it has one (label-only sources), else argmax logits."""
    predict = getattr(target, "predict_labels", None)
    if predict is not None:
        return np.asarray(predict(features), dtype=np.int64)
    return np.asarray(target.logits(features)).argmax(axis=-1)


def noise_robustness_scores(correct_clean: np.ndarray, correct_noisy: np.ndarray) -> np.ndarray:
    """Fraction of the 1 + Q queries (clean + noisy, (N,) and (Q, N) booleans) answered with the true label."""
    return (correct_clean.astype(np.float64) + correct_noisy.sum(axis=0)) / (1 + correct_noisy.shape[0])


@dataclass(frozen=True)
class LabelOnlyAttack:
    name: str = "label_only"
    threat_model: str = (
        "Label-only: the attacker sees only predicted classes; it queries each candidate and noisy copies "
        "of it and scores how often the true label survives (Choquette-Choo et al. 2021, noise robustness)."
    )
    needs: ClassVar[frozenset[str]] = frozenset({LABELS_ONLY})
    knobs: ClassVar[tuple[Knob, ...]] = (
        Knob("label_only_queries", int, 32, "noisy copies per candidate (label_only)", low=1, high=1_000),
        Knob(
            "label_only_noise",
            float,
            0.1,
            "their noise std, as a fraction of each feature's std",
            low=0.0,
            high=10.0,
            low_open=True,
        ),
    )
    citation: ClassVar[str] = "Choquette-Choo et al. 2021"
    method_note: ClassVar[tuple[str, str]] = (
        "Label-only, noise robustness (sees predicted classes only)",
        (
            "The attacker sees only the predicted class, never probabilities, and knows each candidate's true "
            "label. It queries the candidate and noisy copies of it (Gaussian noise at a fixed fraction of each "
            "feature's spread, chosen before the audit) and scores the fraction still given the true label: a "
            "model is more robust around its training records. The noise is not tuned as the paper tunes it on "
            "shadow models, so this is a floor for label-only leakage. Choquette-Choo, Tram\u00e8r, Carlini, "
            "Papernot 2021, \u201cLabel-Only Membership Inference Attacks\u201d (arXiv 2007.14321)."
        ),
    )

    def scores(self, target: QueryableModel, context: AttackContext) -> np.ndarray:
        X = np.asarray(context.candidate_features, dtype=np.float32)
        y = context.candidate_labels
        n_queries = context.options.label_only_queries
        spread = X.reshape(len(X), -1).std(axis=0).reshape(X.shape[1:])
        rng = np.random.default_rng([context.seed, 0x1AB0])
        noise = rng.standard_normal((n_queries, *X.shape)).astype(np.float32) * (
            context.options.label_only_noise * spread
        )
        noisy = (X[None] + noise).reshape(n_queries * len(X), *X.shape[1:])
        correct_clean = predicted_labels(target, X) == y
        correct_noisy = predicted_labels(target, noisy).reshape(n_queries, len(X)) == y[None]
        return noise_robustness_scores(correct_clean, correct_noisy)
