"""Shadow-model attack (Shokri, Stronati, Song, Shmatikov 2017, arXiv 1610.05820).

Threat model: black-box query access to the target's output probabilities, population data from
the same distribution (the pool, disjoint from candidates and test set), and knowledge of the
training algorithm: k shadow models are trained exactly like the target, each on its own random
IN subset of the pool, and one attack classifier per class learns to tell the shadows' outputs on
IN rows from those on OUT rows. The features are the sorted probability vector and the
probability of the true label. Applied to the target's outputs on the candidates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from attacks.registry import POPULATION, TRAINS_MODELS, Knob

if TYPE_CHECKING:
    from sklearn.ensemble import HistGradientBoostingClassifier

    from attacks.base import AttackContext, QueryableModel

TOP_K = 10
MIN_PER_SIDE = 20  # a class with fewer IN or OUT shadow rows shares the all-class classifier


def attack_features(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Sorted log-probabilities (top 10, descending) and the true label's log-probability."""
    from scipy.special import log_softmax

    from attacks.model_outputs import per_example_cross_entropy

    log_p = log_softmax(np.asarray(logits, dtype=np.float64), axis=-1)
    sorted_log_p = -np.sort(-log_p, axis=-1)[..., :TOP_K]
    return np.concatenate([sorted_log_p, -per_example_cross_entropy(logits, labels)[..., None]], axis=-1)


def _classifier(seed: int) -> HistGradientBoostingClassifier:
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(max_iter=100, learning_rate=0.1, random_state=seed)


@dataclass(frozen=True)
class ShadowAttack:
    name: str = "shadow"
    threat_model: str = (
        "Black-box probabilities, population data, and k shadow models trained exactly like the target; "
        "one attack classifier per class on sorted output probabilities (Shokri et al. 2017)."
    )
    needs: ClassVar[frozenset[str]] = frozenset({POPULATION, TRAINS_MODELS})
    knobs: ClassVar[tuple[Knob, ...]] = (
        Knob("n_shadow_models", int, 8, "Shokri shadow models per target", low=1, high=1_024, counts_models=True),
    )
    citation: ClassVar[str] = "Shokri et al. 2017"
    method_note: ClassVar[tuple[str, str]] = (
        "Shadow models (black box, knows the data distribution)",
        (
            "The attacker draws data from the same population (here: the disjoint pool, never the candidates), "
            "trains shadow models that imitate the target, and fits an attack classifier on the shadow models' "
            "outputs for their own members and non-members; that classifier then scores the candidates on the "
            "target's outputs. Shokri, Stronati, Song, Shmatikov 2017, \u201cMembership Inference Attacks "
            "against Machine Learning Models\u201d (arXiv 1610.05820)."
        ),
    )

    def scores(self, target: QueryableModel, context: AttackContext) -> np.ndarray:
        from attacks.reference_models import shadow_models

        shadows = shadow_models(context, context.training.train_size)
        k, n_pool = shadows.in_masks.shape
        pool_labels = np.broadcast_to(context.pool_labels, (k, n_pool)).reshape(-1)
        features = attack_features(shadows.pool_logits, context.pool_labels).reshape(k * n_pool, -1)
        is_in = shadows.in_masks.reshape(-1)
        fallback = _classifier(context.seed).fit(features, is_in)
        per_class = {}
        for label in range(context.n_classes):
            rows = pool_labels == label
            if is_in[rows].sum() >= MIN_PER_SIDE and (~is_in[rows]).sum() >= MIN_PER_SIDE:
                per_class[label] = _classifier(context.seed + 1 + label).fit(features[rows], is_in[rows])
        target_features = attack_features(target.logits(context.candidate_features), context.candidate_labels)
        scores = np.empty(len(target_features))
        for label in np.unique(context.candidate_labels):
            rows = context.candidate_labels == label
            model = per_class.get(int(label), fallback)
            scores[rows] = model.predict_proba(target_features[rows])[:, 1]
        return scores
