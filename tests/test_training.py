"""Real Opacus training on small data: what the target rows of results.json claim must hold."""

import math

import numpy as np
import pytest
import torch

from audit.statistics.accountants import DPSGDEvent, epsilon_opacus, epsilon_pld, epsilons_for_event
from targets.datasets import make_default_tabular
from targets.training import TrainingSpec, train_target

SPEC = TrainingSpec(hidden_sizes=[32], epochs=3, batch_size=50, lr=0.1, momentum=0.9, max_grad_norm=1.0)


@pytest.fixture(scope="module")
def data():
    d = make_default_tabular(1000, seed=0)
    return d.features, d.labels


def _train(data, epsilon, seed=0, accountant="prv"):
    x, y = data
    return train_target(
        x, y, 2, SPEC, epsilon=epsilon, delta=1e-5, accountant=accountant, seed=seed, device=torch.device("cpu")
    )


@pytest.mark.parametrize("accountant", ["prv", "rdp"])
def test_a_dp_run_reports_epsilon_at_most_the_target_within_opacus_tolerance(data, accountant):
    target = _train(data, 2.0, accountant=accountant)
    assert target.accountant == accountant and target.poisson_sampling
    # Opacus searches σ until ε is within epsilon_tolerance = 0.01 below the target.
    assert 2.0 - 0.05 <= target.accountant_epsilon <= 2.0 + 1e-9
    assert target.steps == SPEC.epochs * round(1 / target.sample_rate)
    event = DPSGDEvent(target.noise_multiplier, target.sample_rate, target.steps)
    assert epsilon_opacus(event, 1e-5, accountant) == pytest.approx(target.accountant_epsilon, abs=0.02)


def test_the_non_private_run_has_no_accountant_and_no_noise(data):
    target = _train(data, math.inf)
    assert target.epsilon_target is None and target.accountant is None and target.accountant_epsilon is None
    assert target.noise_multiplier is None and target.max_grad_norm is None and not target.poisson_sampling


def test_the_same_seed_trains_identical_weights_on_cpu(data):
    a, b = _train(data, 4.0, seed=5), _train(data, 4.0, seed=5)
    for pa, pb in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(pa, pb)


def test_the_trained_model_is_a_plain_module_without_opacus_hooks(data):
    target = _train(data, 4.0)
    assert type(target.model).__name__ == "MLP"
    logits = target.logits(data[0][:10])
    assert logits.shape == (10, 2) and np.isfinite(logits).all()


@pytest.mark.parametrize("sigma, q, steps", [(1.0, 0.01, 1000), (0.8, 0.05, 300), (4.9, 0.05, 60), (2.0, 0.02, 2000)])
def test_pld_epsilon_never_exceeds_prv_beyond_tolerance(sigma, q, steps):
    eps = epsilons_for_event(DPSGDEvent(sigma, q, steps), 1e-5, "prv")
    assert eps["pld"] <= eps["prv"] + 0.05
    assert eps["pld"] <= eps["rdp"] + 1e-6  # RDP is the loosest of the three


def test_opacus_gdp_under_reports_against_the_tight_pld_value_from_stats_md():
    event = DPSGDEvent(1.0, 0.01, 1000)
    assert epsilon_opacus(event, 1e-5, "gdp") == pytest.approx(1.62, abs=0.01)
    assert epsilon_pld(event, 1e-5) == pytest.approx(1.83, abs=0.01)
