"""Reference-model attacks: LiRA (online/offline), RMIA, shadow models — on controlled inputs and real models."""

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from attacks import AttackContext, AttackOptions, TargetTraining, get_attack
from attacks.lira import lira_offline_scores, lira_online_scores
from attacks.model_outputs import logit_scaled_confidence
from attacks.reference_models import balanced_in_masks, reference_bank
from attacks.rmia import offline_marginal, rmia_scores
from audit.errors import AuditInputError
from targets.datasets import make_default_tabular
from targets.training import TrainingSpec, train_target


def _lira_world(n=1000, k=32, signal=2.0, seed=0):
    """φ of references: N(signal, 1) when IN, N(0, 1) when OUT, with a per-candidate offset."""
    rng = np.random.default_rng(seed)
    offset = rng.normal(0, 3, n)  # candidates differ in difficulty: the reason LiRA calibrates per example
    masks = balanced_in_masks(k, n, rng)
    reference_phi = offset + signal * masks + rng.normal(0, 1, (k, n))
    members = rng.random(n) < 0.5
    target_phi = offset + signal * members + rng.normal(0, 1, n)
    return target_phi, reference_phi, masks, members, offset


def test_each_candidate_is_in_exactly_half_of_the_references():
    masks = balanced_in_masks(16, 500, np.random.default_rng(0))
    assert (masks.sum(axis=0) == 8).all()


def test_lira_separates_members_that_a_global_threshold_cannot():
    target_phi, reference_phi, masks, members, _ = _lira_world()
    online = lira_online_scores(target_phi, reference_phi, masks, global_variance=False)
    offline = lira_offline_scores(target_phi, reference_phi, masks, global_variance=False)
    assert roc_auc_score(members, online) > 0.8
    assert roc_auc_score(members, offline) > 0.8
    assert roc_auc_score(members, target_phi) < 0.7  # the raw confidence is swamped by per-example offsets


def test_lira_global_variance_works_with_few_references():
    target_phi, reference_phi, masks, members, _ = _lira_world(k=4)
    assert roc_auc_score(members, lira_online_scores(target_phi, reference_phi, masks, global_variance=True)) > 0.75


def test_lira_on_a_target_that_ignores_membership_is_at_chance():
    target_phi, reference_phi, masks, members, offset = _lira_world(signal=0.0)
    scores = lira_online_scores(target_phi, reference_phi, masks, global_variance=False)
    assert abs(roc_auc_score(members, scores) - 0.5) < 0.06


def test_logit_scaled_confidence_is_finite_for_saturated_softmax():
    phi = logit_scaled_confidence(np.array([[300.0, -300.0]]), np.array([0]))
    assert phi[0] == pytest.approx(600.0)


def test_rmia_counts_dominated_population_samples_like_the_pairwise_definition():
    rng = np.random.default_rng(1)
    n, z, k = 200, 150, 8
    masks = balanced_in_masks(k, n, rng)
    ref_x, ref_z = rng.random((k, n)), rng.random((k, z))
    target_x, target_z = rng.random(n), rng.random(z)
    scores = rmia_scores(target_x, ref_x, ~masks, target_z, ref_z, a=0.3, gamma=2.0)
    out_mean = np.where(~masks, ref_x, 0).sum(0) / (~masks).sum(0)
    ratio_x = target_x / offline_marginal(out_mean, 0.3)
    ratio_z = target_z / offline_marginal(ref_z.mean(0), 0.3)
    brute = (ratio_x[:, None] / ratio_z[None, :] > 2.0).mean(axis=1)
    assert np.allclose(scores, brute)
    assert ((scores >= 0) & (scores <= 1)).all()


@pytest.fixture(scope="module")
def overfit_target():
    """A real non-private MLP that memorises, and the context an attacker would have."""
    data = make_default_tabular(1500, seed=3)
    rng = np.random.default_rng(0)
    order = rng.permutation(data.n_rows)
    cand, pool = order[:600], order[600:]
    members = rng.random(600) < 0.5
    spec = TrainingSpec(hidden_sizes=[64, 64], epochs=25, batch_size=32, lr=0.1, momentum=0.9, max_grad_norm=1.0)
    train = cand[members]
    target = train_target(
        data.features[train],
        data.labels[train],
        2,
        spec,
        epsilon=float("inf"),
        delta=1e-5,
        accountant="prv",
        seed=0,
        device=torch.device("cpu"),
    )
    context = AttackContext(
        candidate_features=data.features[cand],
        candidate_labels=data.labels[cand],
        n_classes=2,
        pool_features=data.features[pool],
        pool_labels=data.labels[pool],
        training=TargetTraining(spec, 0.0, None, target.sample_rate, target.steps, len(train)),
        epsilon=float("inf"),
        delta=1e-5,
        accountant="prv",
        seed=0,
        device=torch.device("cpu"),
        options=AttackOptions(n_shadow_models=4, n_reference_models=16, rmia_population=300),
    )
    return target, context, members


# shadow trains its own shadow models one by one: the slow one (the reference bank of lira / rmia is vectorized).
@pytest.mark.parametrize(
    "name", ["loss", pytest.param("shadow", marks=pytest.mark.slow), "lira", "lira_offline", "rmia"]
)
def test_every_attack_finds_membership_in_a_model_that_memorises(overfit_target, name):
    target, context, members = overfit_target
    scores = get_attack(name).scores(target, context)
    assert scores.shape == members.shape and np.isfinite(scores).all()
    assert roc_auc_score(members, scores) > 0.55


def test_reference_models_are_trained_once_per_target_and_shared(overfit_target):
    _, context, _ = overfit_target
    first = reference_bank(context)
    assert "reference_bank" in context.cache
    assert np.array_equal(first.candidate_logits, reference_bank(context).candidate_logits)


def test_reference_models_are_refused_when_the_pool_cannot_supply_the_population(overfit_target):
    _, context, _ = overfit_target
    small = AttackContext(
        **{**context.__dict__, "cache": {}, "options": AttackOptions(n_reference_models=4, rmia_population=10_000)}
    )
    with pytest.raises(AuditInputError, match="rmia_population"):
        reference_bank(small)


def test_shadow_models_are_refused_when_the_pool_is_smaller_than_a_training_set(overfit_target):
    target, context, _ = overfit_target
    tiny_pool = AttackContext(
        **{
            **context.__dict__,
            "cache": {},
            "pool_features": context.pool_features[:100],
            "pool_labels": context.pool_labels[:100],
        }
    )
    with pytest.raises(AuditInputError, match="shadow pool"):
        get_attack("shadow").scores(target, tiny_pool)
