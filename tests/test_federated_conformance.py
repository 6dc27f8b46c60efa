"""Client-level DP-FedAvg checked by the conformance checks: the aggregator the federated targets
train with passes every check (rounds, Poisson client sampling at q, noise std σ·C on the sum,
independent noise, each client's update clipped to C); one whose noise is σ instead of σ·C fails;
the step functions of a trained federation claim what its client-level accountant composed."""

from __future__ import annotations

import numpy as np
import torch

from audit.demos.federated_aggregators import dp_fedavg, dp_fedavg_noise_sigma_not_sigma_c
from audit.dp_validation.conformance import CHECKS, conformance_checks


def test_the_dp_fedavg_aggregator_passes_every_conformance_check():
    checks = conformance_checks(dp_fedavg, seed=0)
    assert [c["check"] for c in checks] == list(CHECKS)
    assert all(c["passed"] for c in checks), [c for c in checks if not c["passed"]]


def test_noise_sigma_instead_of_sigma_c_fails_the_noise_check_and_only_it():
    checks = {c["check"]: c for c in conformance_checks(dp_fedavg_noise_sigma_not_sigma_c, seed=0)}
    assert not checks["noise_std"]["passed"]
    assert checks["noise_std"]["value"]["max"] < 0.5  # std σ where σ·C = 4σ was claimed: a quarter
    assert all(c["passed"] for name, c in checks.items() if name != "noise_std")


def test_a_trained_client_level_federation_claims_what_its_accountant_composed():
    from audit.federated.accounting import account_levels
    from audit.machinery.config import resolve_config
    from targets.federated import FederatedSpec, train_federation
    from targets.federated_step_functions import DPFedAvgStepFunctions

    rng = np.random.default_rng(0)
    clients = []
    for _ in range(6):
        x = rng.normal(size=(12, 4)).astype(np.float32)
        clients.append((x, (x[:, 0] > 0).astype(np.int64)))
    spec = FederatedSpec(
        hidden_sizes=[4],
        rounds=5,
        local_epochs=1,
        batch_size=8,
        lr=0.1,
        momentum=0.0,
        max_grad_norm=1.0,
        level="client",
        client_sample_rate=0.2,
        client_clip=0.7,
    )
    target = train_federation(
        clients,
        2,
        spec,
        epsilon=3.0,
        delta=1e-5,
        accountant="prv",
        seed=1,
        device=torch.device("cpu"),
        client_noise_multiplier=1.2,
    )  # σ given: no calibration
    steps = DPFedAvgStepFunctions.from_target(target)
    config = resolve_config("clients", overrides={"privacy": {"epsilons": [3.0], "delta": 1e-5}})
    level = account_levels(target, config)["client"]
    assert {
        "noise_multiplier": level["noise_multiplier"],
        "sample_rate": level["sample_rate"],
        "steps": level["rounds"],
        "delta": 1e-5,
    } == steps.CLAIM
    assert steps.max_grad_norm == level["clip"] == 0.7
    assert steps.noise_multiplier == 1.2 and target.round_log[-1]["round"] == steps.CLAIM["steps"]
    checks = conformance_checks(steps, seed=2)
    assert all(c["passed"] for c in checks), [c for c in checks if not c["passed"]]
