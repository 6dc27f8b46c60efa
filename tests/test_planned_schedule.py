"""A target's σ, q, T and C known before it trains (targets.training.planned_schedule): the run queues its reference
and shadow models with them (audit.sweep.target_audit.submit_side_work), so they must be what training gives, to
the last bit; and a σ handed to another process (remember_noise_multiplier) is taken as it is, not searched again."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from targets.opacus_setups import calibrated_noise_multiplier, remember_noise_multiplier
from targets.training import TrainingSpec, planned_schedule, train_target

SPEC = TrainingSpec(hidden_sizes=(8,), epochs=2, batch_size=16, lr=0.1, momentum=0.9, max_grad_norm=1.0)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("n_rows", "epsilon", "accountant"), [(200, 2.0, "rdp"), (203, 4.0, "prv"), (200, math.inf, "prv")]
)
def test_the_planned_schedule_is_what_training_gives(n_rows, epsilon, accountant):
    rng = np.random.default_rng(0)
    features, labels = rng.normal(size=(n_rows, 4)).astype(np.float32), rng.integers(0, 2, n_rows)
    plan = planned_schedule(n_rows, SPEC, epsilon=epsilon, delta=1e-5, accountant=accountant)
    trained = train_target(
        features,
        labels,
        2,
        SPEC,
        epsilon=epsilon,
        delta=1e-5,
        accountant=accountant,
        seed=3,
        device=torch.device("cpu"),
    )
    assert plan.matches(trained)
    trained.steps += 1  # one step more: the banks would be another schedule's
    assert not plan.matches(trained)
    trained.steps -= 1
    assert (plan.noise_multiplier, plan.sample_rate, plan.steps, plan.max_grad_norm) == (
        trained.noise_multiplier,
        trained.sample_rate,
        trained.steps,
        trained.max_grad_norm,
    )
    assert (plan.sigma_key is None) == math.isinf(epsilon)


def test_a_sigma_handed_over_is_taken_without_a_search():
    # arguments no run uses (ε 123.25): a σ nobody could have calibrated, so the answer can only be the handed float
    key = (123.25, 1e-5, 0.125, 3, "rdp")
    remember_noise_multiplier(*key, 0.4321)
    assert calibrated_noise_multiplier(*key) == 0.4321
