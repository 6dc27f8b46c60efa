"""The client-level DP-FedAvg server step as a step-function trainer, so that
`audit/dp_validation/conformance.py` checks the federated aggregator the audit trains with.

Conformance protocol (see that module): `CLAIM = {noise_multiplier, sample_rate, steps, delta}`,
`max_grad_norm`, `sample_batches(n, rng)` (one index array per step) and
`privatize_gradients(grads, rng, step)` (the noisy clipped SUM of per-example gradients).

At the client level a "record" is a client, a "step" is a round and a "per-example gradient" is a
client's update Δ_k: `sample_batches` draws each round's participants with `sample_clients`
(Poisson, probability q) and `privatize_gradients` flattens each client's update over all tensors
and calls `dp_fedavg_aggregate` (clip each Δ_k to C, add N(0, σ²C²) to the sum) — the very
functions `train_federation` uses, so the checks see the code that trains the targets. The
aggregator's fixed denominator qN is a constant (post-processing), so the step returns the sum
with the denominator 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from targets.federated import FederatedTarget, dp_fedavg_aggregate, sample_clients

__all__ = ["DPFedAvgStepFunctions"]


@dataclass
class DPFedAvgStepFunctions:
    """DP-FedAvg's client sampling and server aggregation over `rounds` rounds (McMahan et al. 2018,
    arXiv 1710.06963, Alg. 1), under the claim its client-level accountant is given."""

    noise_multiplier: float
    client_sample_rate: float
    rounds: int
    clip: float
    delta: float
    aggregate: Callable = dp_fedavg_aggregate  # (updates, clip, σ, expected clients, generator) -> step

    @classmethod
    def from_target(cls, target: FederatedTarget) -> DPFedAvgStepFunctions:
        """The step functions of a trained client-level federation, with the numbers its accountant
        composed (audit/federated/accounting.py: σ, q, rounds)."""
        if target.client_noise_multiplier is None:
            raise ValueError("not a client-level DP federation (no client noise multiplier)")
        spec = target.spec
        return cls(target.client_noise_multiplier, spec.client_sample_rate, spec.rounds, spec.client_clip, target.delta)

    @property
    def CLAIM(self) -> dict[str, float]:  # noqa: N802  (the protocol's name)
        return {
            "noise_multiplier": self.noise_multiplier,
            "sample_rate": self.client_sample_rate,
            "steps": self.rounds,
            "delta": self.delta,
        }

    @property
    def max_grad_norm(self) -> float:
        return self.clip

    def sample_batches(self, n: int, rng: np.random.Generator) -> list[np.ndarray]:
        return [np.flatnonzero(sample_clients(n, self.client_sample_rate, rng)) for _ in range(self.rounds)]

    def privatize_gradients(
        self, grads: dict[str, np.ndarray], rng: np.random.Generator, step: int
    ) -> dict[str, np.ndarray]:
        names = list(grads)
        batch = next(iter(grads.values())).shape[0]
        flat = np.concatenate([np.asarray(grads[k], dtype=np.float64).reshape(batch, -1) for k in names], axis=1)
        updates = [torch.from_numpy(row.copy()) for row in flat] or [torch.zeros(flat.shape[1], dtype=torch.float64)]
        generator = torch.Generator().manual_seed(int(rng.integers(2**63 - 1)))
        total = self.aggregate(updates, self.clip, self.noise_multiplier, 1.0, generator).numpy()
        out, offset = {}, 0
        for k in names:
            shape = grads[k].shape[1:]
            size = int(np.prod(shape))
            out[k] = total[offset : offset + size].reshape(shape)
            offset += size
        return out
