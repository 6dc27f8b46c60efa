"""The federated job's parallel work as executor tasks (audit/machinery/executors.py): module-level
functions, plain data in and out, each seeded from (config seed, task path) by `federation_seed`,
so `--executor local|processes|ray` and any `--workers` give the same numbers.

* `target_federation_task`: one target federation (one per ε of the sweep);
* `reference_confidences_task`: one LiRA-offline reference federation → its confidences on the candidates;
* `client_mia_run_task`: one client-level MIA federation (coin-flip participation) → its score per client.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from attacks.model_outputs import logit_scaled_confidence
from targets.devices import resolve_device
from targets.federated import ClientRecord, FederatedSpec, FederatedTarget, train_federation
from targets.models import build_mlp


def _numpy_state(state: dict[str, torch.Tensor] | None) -> dict[str, np.ndarray] | None:
    return None if state is None else {k: v.detach().cpu().numpy() for k, v in state.items()}


def _torch_state(state: dict[str, np.ndarray] | None) -> dict[str, torch.Tensor] | None:
    return None if state is None else {k: torch.as_tensor(v) for k, v in state.items()}


def target_to_plain(target: FederatedTarget) -> dict[str, Any]:
    """A trained federation as plain data (numpy states, dicts): what a task returns and a checkpoint holds."""
    return {
        "state": _numpy_state(target.model.state_dict()),
        "meta": {
            "epsilon_target": target.epsilon_target,
            "delta": target.delta,
            "clients": [asdict(c) for c in target.clients],
            "client_noise_multiplier": target.client_noise_multiplier,
            "watched_client": target.watched_client,
            "train_seconds": target.train_seconds,
            "round_log": target.round_log,
        },
        "watched_before": _numpy_state(target.watched_before),
        "watched_after": _numpy_state(target.watched_after),
    }


def target_from_plain(plain: dict[str, Any], spec: FederatedSpec, n_features: int, n_classes: int) -> FederatedTarget:
    model = build_mlp(n_features, spec.hidden_sizes, n_classes, seed=0)
    model.load_state_dict({k: torch.as_tensor(v) for k, v in plain["state"].items()})
    meta = plain["meta"]
    return FederatedTarget(
        model=model.eval(),
        spec=spec,
        epsilon_target=meta["epsilon_target"],
        delta=meta["delta"],
        clients=[ClientRecord(**c) for c in meta["clients"]],
        client_noise_multiplier=meta["client_noise_multiplier"],
        watched_client=meta["watched_client"],
        watched_before=_torch_state(plain.get("watched_before")),
        watched_after=_torch_state(plain.get("watched_after")),
        train_seconds=meta["train_seconds"],
        round_log=meta["round_log"],
    )


@dataclass(frozen=True)
class FederationSettings:
    """What every federation trained for one target shares: the clients' data, the classes, the spec, the
    claim (ε, δ, accountant) and the device (named by the caller, resolved in the worker). One task
    argument, so the tasks' signatures do not repeat it."""

    client_data: Sequence[tuple[np.ndarray, np.ndarray]]
    n_classes: int
    spec: FederatedSpec
    epsilon: float
    delta: float
    accountant: str
    device: str

    def train(
        self, seed: int, client_data: Sequence[tuple[np.ndarray, np.ndarray]] | None = None, **extra: Any
    ) -> FederatedTarget:
        """One federation trained inside a task (on `client_data` instead of the settings' when given)."""
        return train_federation(
            self.client_data if client_data is None else client_data,
            self.n_classes,
            self.spec,
            epsilon=self.epsilon,
            delta=self.delta,
            accountant=self.accountant,
            seed=seed,
            device=resolve_device(self.device),
            **extra,
        )


def target_federation_task(
    epsilon: float,
    seed: int,
    *,
    client_data,
    n_classes: int,
    spec: FederatedSpec,
    delta: float,
    accountant: str,
    device: str,
    watch_client: int | None,
    eval_data,
) -> dict[str, Any]:
    settings = FederationSettings(client_data, n_classes, spec, epsilon, delta, accountant, device)
    return target_to_plain(settings.train(seed, watch_client=watch_client, eval_data=eval_data))


def reference_confidences_task(
    seed: int,
    *,
    settings: FederationSettings,
    noise_multipliers: Sequence[float | None],
    client_noise_multiplier: float | None,
    features: np.ndarray,
    labels: np.ndarray,
) -> np.ndarray:
    reference = settings.train(
        seed, noise_multipliers=noise_multipliers, client_noise_multiplier=client_noise_multiplier
    )
    return logit_scaled_confidence(reference.logits(features), labels)


def client_mia_run_task(coin_seed: int, seed: int, *, settings: FederationSettings) -> tuple[list[float], list[bool]]:
    """One federation with every client's participation a fair coin (from `coin_seed`); the score of
    each client is the final model's mean logit-scaled confidence on its rows."""
    client_data = settings.client_data
    coins = np.random.default_rng(coin_seed).random(len(client_data)) < 0.5
    if not coins.any():
        coins[0] = True  # a federation needs one client; client 0 then is not a fair coin this run
    participating = [(x, y) if coins[k] else (x[:0], y[:0]) for k, (x, y) in enumerate(client_data)]
    federation = settings.train(seed, participating)
    scores = [
        float(np.mean(logit_scaled_confidence(federation.logits(x), y))) if len(y) else 0.0 for x, y in client_data
    ]
    return scores, [bool(c) for c in coins]
