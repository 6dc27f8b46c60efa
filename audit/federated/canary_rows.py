"""The federated job's canary-client row: one twin federation with canary clients, one client-level bound.

For a client-level DP-FedAvg target (Andrew et al. 2023, "One-shot Empirical Privacy Estimation for
Federated Learning", arXiv 2302.03098): the federation is trained once more — same clients, seed,
σ, q, rounds — with m canary clients (`targets.canary_clients`: random unit directions, each in by a
fair coin, then joining each round with probability q like a real client). From the canaries'
scores summed over every round (the server's privatised sums, white-box): Steinke et al.'s
client-level one-run bound (sound, arXiv 2305.08846) and the f-DP test of the client-level curve
(sound, arXiv 2410.22235) decide; Andrew et al.'s ε estimate (Gaussian fits, no confidence
interval) and the Gaussian-sum estimate are shown, labelled estimates. The row is in the verdict's
Holm family with the client-level membership rows (`audit.machinery.verdict`); the released model
is the target federation, without canaries.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from audit.statistics.one_run_power import one_run_row
from targets.canary_clients import CanaryClients
from targets.federated import FederatedTarget, train_federation

__all__ = ["ROW_FAMILY", "DEFAULT_CANARY_CLIENTS", "canary_client_entry"]

ROW_FAMILY = "canary clients (one-run)"
DEFAULT_CANARY_CLIENTS = 1000
_CANARY_STREAM = 79


def canary_client_entry(client_data, n_classes: int, spec, *, target: FederatedTarget, claim: float, delta: float,
                        accountant: str, seed: int, device, confidence: float, test_features: np.ndarray,
                        test_labels: np.ndarray, target_accuracy: float, m: int | None = None) -> dict[str, Any]:
    """Train the twin federation with canary clients and audit the client-level claim `claim`."""
    n_parameters = sum(int(p.numel()) for p in target.model.state_dict().values())
    canary_seed = int(np.random.SeedSequence([int(seed), _CANARY_STREAM]).generate_state(1)[0])
    canaries = CanaryClients(n_parameters, int(m or DEFAULT_CANARY_CLIENTS), spec.client_sample_rate, canary_seed)
    twin = train_federation(client_data, n_classes, spec, epsilon=float(target.epsilon_target), delta=delta,
                            accountant=accountant, seed=seed, device=device,
                            client_noise_multiplier=target.client_noise_multiplier, canary_clients=canaries)
    accuracy = float((twin.logits(test_features).argmax(axis=1) == test_labels).mean())
    row = one_run_row(canaries.scores("all"), canaries.scores("final"), canaries.coins.copy(), claim=float(claim),
                      delta=float(delta), noise_multiplier=float(target.client_noise_multiplier),
                      sample_rate=float(spec.client_sample_rate), steps=int(spec.rounds), confidence=confidence)
    return {
        "family": ROW_FAMILY,
        "level": "client",
        "paper": "Andrew et al. 2023, arXiv 2302.03098; Steinke, Nasr, Jagielski 2023, arXiv 2305.08846; "
                 "Mahloujifar, Melis, Chaudhuri 2024, arXiv 2410.22235",
        **row,
        "kind": "random-direction canary clients",
        "canary_rows_inserted": int(canaries.joined),
        "andrew_note": "Andrew et al.'s estimate: Gaussian fits to in- and out-canary scores; an estimate, not a bound",
        "twin_matches_target": True,
        "test_accuracy_with_canaries": accuracy,
        "test_accuracy_target": float(target_accuracy),
        "train_seconds_with_canaries": float(twin.train_seconds),
        "train_seconds_target": float(target.train_seconds),
    }
