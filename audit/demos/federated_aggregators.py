"""Client-level DP-FedAvg aggregators for `privacy-audit conformance` (the step-function protocol):

    privacy-audit conformance --trainer audit.demos.federated_aggregators:dp_fedavg
    privacy-audit conformance --trainer audit.demos.federated_aggregators:dp_fedavg_noise_sigma_not_sigma_c

`dp_fedavg` is the aggregator the federated targets train with (targets/federated.py, C = 0.5);
the second plants the noise-scale slip of the documents' DP-FedAvg code: with C = 4 it adds noise
of std σ where the accountant assumes σ·C, four times too little (its true ε is far above the
claim). Both claim σ = 1.1, q = 0.1 of the clients per round, 20 rounds, δ = 1e-5.
"""

from __future__ import annotations

from typing import Any

from targets.federated import dp_fedavg_aggregate
from targets.federated_step_functions import DPFedAvgStepFunctions

__all__ = ["dp_fedavg", "dp_fedavg_noise_sigma_not_sigma_c"]

CLAIM_ARGS: dict[str, Any] = dict(noise_multiplier=1.1, client_sample_rate=0.1, rounds=20, delta=1e-5)


def _noise_sigma_not_sigma_c(updates, clip, noise_multiplier, expected_clients, generator):
    # The slip: the noise std is σ, as if C were 1 (the real aggregator with σ/C as its multiplier).
    return dp_fedavg_aggregate(updates, clip, noise_multiplier / clip, expected_clients, generator)


dp_fedavg = DPFedAvgStepFunctions(clip=0.5, **CLAIM_ARGS)
dp_fedavg_noise_sigma_not_sigma_c = DPFedAvgStepFunctions(clip=4.0, aggregate=_noise_sigma_not_sigma_c, **CLAIM_ARGS)
