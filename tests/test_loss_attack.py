import numpy as np
import pytest
import torch

from attacks import ATTACKS, AttackContext, get_attack
from attacks.model_outputs import per_example_cross_entropy
from audit.errors import AuditInputError
from audit.statistics.attack_evaluation import evaluate_attack
from targets.training import TrainingSpec


class _TableModel:
    """A 'model' whose logits are fixed per row: lets a test decide exactly how members look."""

    def __init__(self, logits):
        self._logits = logits

    def logits(self, features):
        return self._logits[features[:, 0].astype(int)]


def _context(n, labels):
    features = np.arange(n, dtype=np.float32)[:, None]
    spec = TrainingSpec([8], 1, 10, 0.1, 0.0, 1.0)
    return AttackContext(features, labels, 2, features[:0], labels[:0], spec, 1.0, 1e-5, "prv", 0, torch.device("cpu"))


def test_cross_entropy_is_stable_for_extreme_logits():
    logits = np.array([[1000.0, -1000.0], [0.0, 0.0]])
    loss = per_example_cross_entropy(logits, np.array([1, 0]))
    assert np.allclose(loss, [2000.0, np.log(2)])


def test_tiny_losses_of_confident_members_stay_distinct_instead_of_rounding_to_zero():
    logits = np.array(
        [
            [40.0, 0.0],
            [50.0, 0.0],
            [
                3.0,
                1.0,
            ],
        ]
    )
    loss = per_example_cross_entropy(logits, np.array([0, 0, 0]))
    assert 0 < loss[1] < loss[0] < loss[2]
    assert loss[0] == pytest.approx(np.exp(-40.0), rel=1e-9)


def test_the_loss_score_orders_candidates_exactly_as_minus_the_loss_even_when_the_loss_underflows():
    rng = np.random.default_rng(2)
    logits = rng.normal(0, 3, (500, 3))
    labels = rng.integers(0, 3, 500)
    scores = get_attack("loss").scores(_TableModel(logits), _context(500, labels))
    assert np.array_equal(
        np.argsort(scores, kind="stable"), np.argsort(-per_example_cross_entropy(logits, labels), kind="stable")
    )
    saturated = np.array([[800.0, 0.0], [900.0, 0.0]])  # loss underflows to 0.0 for both
    assert np.all(per_example_cross_entropy(saturated, np.array([0, 0])) == 0.0)
    s = get_attack("loss").scores(_TableModel(saturated), _context(2, np.array([0, 0])))
    assert s[1] > s[0]


def test_members_with_lower_loss_get_higher_scores_and_a_positive_bound():
    rng = np.random.default_rng(0)
    n = 2000
    members = rng.random(n) < 0.5
    labels = rng.integers(0, 2, n)
    margin = np.where(members, 6.0, 0.5) + rng.normal(0, 0.5, n)  # members fitted confidently
    logits = np.zeros((n, 2))
    logits[np.arange(n), labels] = margin
    scores = get_attack("loss").scores(_TableModel(logits), _context(n, labels))
    result = evaluate_attack(
        "loss", scores, members, labels, delta=1e-5, confidence=0.95, threshold_seed=0, accountant_epsilon=1.0
    )
    assert result["auc"] > 0.95
    assert result["epsilon_lb"]["clopper_pearson"] > 1.0


def test_a_model_that_ignores_membership_gives_auc_near_half_and_zero_bound():
    rng = np.random.default_rng(1)
    n = 2000
    members = rng.random(n) < 0.5
    labels = rng.integers(0, 2, n)
    logits = rng.normal(0, 1, (n, 2))
    scores = get_attack("loss").scores(_TableModel(logits), _context(n, labels))
    result = evaluate_attack(
        "loss", scores, members, labels, delta=1e-5, confidence=0.95, threshold_seed=0, accountant_epsilon=1.0
    )
    assert result["auc_ci"][0] < 0.5 < result["auc_ci"][1]
    assert result["epsilon_lb"] == {"clopper_pearson": 0.0, "one_run": 0.0}


def test_unknown_attack_names_list_the_available_ones():
    assert "loss" in ATTACKS
    with pytest.raises(AuditInputError, match="attacks.names.*available: .*loss"):
        get_attack("magic")
