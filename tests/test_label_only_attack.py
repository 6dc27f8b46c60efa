"""The label-only attack (Choquette-Choo et al. 2021): reference values, a memorising model is caught,
and a model that never saw the candidates gives no ε lower bound."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier

from attacks import AttackContext, AttackOptions, TargetTraining, get_attack
from attacks.label_only import noise_robustness_scores
from audit.statistics.attack_evaluation import evaluate_attack
from targets.datasets import make_default_tabular
from targets.model_sources import live_query
from targets.training import TrainingSpec


def _context(features, labels, seed=0) -> AttackContext:
    spec = TrainingSpec(hidden_sizes=[8], epochs=1, batch_size=8, lr=0.1, momentum=0.0, max_grad_norm=1.0)
    return AttackContext(
        candidate_features=features,
        candidate_labels=labels,
        n_classes=2,
        pool_features=features[:0],
        pool_labels=labels[:0],
        training=TargetTraining(
            spec=spec, noise_multiplier=0.0, max_grad_norm=None, sample_rate=0.1, steps=1, train_size=len(labels)
        ),
        epsilon=float("inf"),
        delta=1e-5,
        accountant="prv",
        seed=seed,
        device=torch.device("cpu"),
        options=AttackOptions(label_only_queries=16),
    )


def test_score_is_the_fraction_of_queries_answered_with_the_true_label():
    clean = np.array([True, False, True])
    noisy = np.array([[True, False, False], [True, False, True], [False, False, True]])
    np.testing.assert_allclose(noise_robustness_scores(clean, noisy), [3 / 4, 0 / 4, 3 / 4])


def test_a_memorising_label_only_model_is_caught():
    data = make_default_tabular(800, seed=1)
    X, y = data.features[:400], data.labels[:400]
    members = np.random.default_rng(0).random(400) < 0.5
    one_nn = KNeighborsClassifier(n_neighbors=1).fit(X[members], y[members])
    query = live_query(one_nn, output="labels")  # predict only: classes, no scores
    scores = get_attack("label_only").scores(query, _context(X, y))
    record = evaluate_attack(
        "label_only", scores, members, y, delta=1e-5, confidence=0.95, threshold_seed=0, accountant_epsilon=None
    )
    assert record["auc"] > 0.7


def test_a_model_that_never_saw_the_candidates_gives_no_lower_bound():
    """Null data: membership coins are independent of the model, so no bound above 0 (≥ 95 % of repeats)."""
    data = make_default_tabular(1200, seed=2)
    model = LogisticRegression(max_iter=200).fit(data.features[:600], data.labels[:600])
    query = live_query(model, output=None)
    X, y = data.features[600:], data.labels[600:]
    scores = get_attack("label_only").scores(query, _context(X, y))
    positive = 0
    for repeat in range(20):
        members = np.random.default_rng(repeat).random(len(y)) < 0.5
        record = evaluate_attack(
            "label_only",
            scores,
            members,
            y,
            delta=1e-5,
            confidence=0.95,
            threshold_seed=repeat,
            accountant_epsilon=None,
        )
        positive += max(record["epsilon_lb"].values(), key=lambda v: v or 0) > 0
    assert positive <= 1
