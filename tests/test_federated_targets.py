"""Federated targets: a one-client federation is the centralized DP-SGD trainer; DP-FedAvg's noise
is calibrated to σ·C on the sum of clipped updates; the non-IID splits do what they say."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from targets.federated import (
    FederatedSpec,
    dp_fedavg_aggregate,
    local_seed,
    split_by_feature_ranges,
    split_dirichlet,
    train_federation,
)
from targets.training import TrainingSpec, train_target


def _data(n=240, d=6, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (x[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(np.int64)
    return x, y


@pytest.mark.parametrize("epsilon", [2.0, math.inf])
def test_one_client_one_round_federated_dpsgd_is_the_centralized_trainer(epsilon):
    x, y = _data()
    spec = FederatedSpec(
        hidden_sizes=[16],
        rounds=1,
        local_epochs=3,
        batch_size=32,
        lr=0.1,
        momentum=0.9,
        max_grad_norm=1.0,
        level="record",
    )
    federated = train_federation(
        [(x, y)], 2, spec, epsilon=epsilon, delta=1e-5, accountant="prv", seed=5, device=torch.device("cpu")
    )
    central = train_target(
        x,
        y,
        2,
        TrainingSpec([16], 3, 32, 0.1, 0.9, 1.0),
        epsilon=epsilon,
        delta=1e-5,
        accountant="prv",
        seed=local_seed(5, 0, 0),
        device=torch.device("cpu"),
    )
    for key, value in central.model.state_dict().items():
        assert torch.equal(federated.model.state_dict()[key], value), key
    client = federated.clients[0]
    assert client.local_steps == central.steps
    if math.isfinite(epsilon):
        assert client.noise_multiplier == pytest.approx(central.noise_multiplier)
        assert client.sample_rate == pytest.approx(central.sample_rate)


def test_dp_fedavg_noise_has_std_sigma_c_on_the_sum_and_updates_are_clipped():
    sigma, clip, expected = 1.7, 0.5, 4.0
    zero = [torch.zeros(20000) for _ in range(3)]
    step = dp_fedavg_aggregate(zero, clip, sigma, expected, torch.Generator().manual_seed(0))
    noise_on_sum = step * expected
    # std of 20000 draws: relative standard error ≈ 1/sqrt(2·20000) = 0.5 %; allow 3 %.
    assert float(noise_on_sum.std()) == pytest.approx(sigma * clip, rel=0.03)
    assert abs(float(noise_on_sum.mean())) < 5 * sigma * clip / math.sqrt(20000)
    huge = [torch.full((100,), 1e3), torch.full((100,), -1e3), torch.full((100,), 1e3)]
    clipped_sum = dp_fedavg_aggregate(huge, clip, 0.0, 1.0, torch.Generator().manual_seed(0))
    # three updates clipped to norm C: +C, −C, +C along one direction → sum has norm exactly C
    assert float(torch.linalg.vector_norm(clipped_sum)) == pytest.approx(clip, rel=1e-5)


def test_client_level_federation_calibrates_sigma_to_the_target_epsilon():
    from audit.statistics.accountants import DPSGDEvent, epsilon_opacus

    x, y = _data(400)
    parts = split_dirichlet(y, 8, 1.0, seed=0)
    clients = [(x[parts == k], y[parts == k]) for k in range(8)]
    spec = FederatedSpec(
        hidden_sizes=[8],
        rounds=6,
        local_epochs=1,
        batch_size=32,
        lr=0.1,
        momentum=0.0,
        max_grad_norm=1.0,
        level="client",
        client_sample_rate=0.5,
        client_clip=0.5,
    )
    target = train_federation(
        clients, 2, spec, epsilon=3.0, delta=1e-5, accountant="prv", seed=1, device=torch.device("cpu")
    )
    eps = epsilon_opacus(DPSGDEvent(target.client_noise_multiplier, 0.5, 6), 1e-5, "prv")
    assert eps == pytest.approx(3.0, abs=0.05)
    assert sum(c.rounds_participated for c in target.clients) < 8 * 6  # Poisson: not every client every round


def test_feature_range_sites_are_ordered_and_dirichlet_splits_are_label_skewed():
    values = np.arange(300, dtype=float)
    sites = split_by_feature_ranges(values, 3)
    assert np.bincount(sites).tolist() == [100, 100, 100]
    assert values[sites == 0].max() < values[sites == 1].min() < values[sites == 2].min()
    labels = np.repeat([0, 1], 500)
    parts = split_dirichlet(labels, 10, 0.1, seed=0)
    shares = np.array([labels[parts == k].mean() for k in range(10) if np.any(parts == k)])
    assert np.mean((shares < 0.1) | (shares > 0.9)) > 0.5  # most clients hold mostly one class


def test_dirichlet_split_with_a_minimum_redraws_until_every_client_has_it_and_stays_skewed():
    labels = np.repeat([0, 1], 1200)
    plain = split_dirichlet(labels, 20, 0.5, seed=0)
    assert np.bincount(plain, minlength=20).min() < 8  # the clients preset's split, drawn once, starves a client
    parts = split_dirichlet(labels, 20, 0.5, seed=0, min_rows=8)
    assert np.bincount(parts, minlength=20).min() >= 8
    assert np.array_equal(parts, split_dirichlet(labels, 20, 0.5, seed=0, min_rows=8))  # seeded: reproducible
    shares = np.array([labels[parts == k].mean() for k in range(20)])
    assert np.mean((shares < 0.2) | (shares > 0.8)) > 0.2  # a redraw is still a label-skewed Dirichlet(0.5) split


def test_the_clients_preset_splits_with_every_client_at_its_minimum():
    from audit.federated.setup import check_client_split
    from audit.machinery.config import resolve_config

    check_client_split(resolve_config("clients"))  # raised "client 7 with 0 rows" before the redraw
