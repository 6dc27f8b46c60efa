"""ε per level of a trained federation: record level per client (its local DP-SGD steps over the
rounds it joined) and client level (the Poisson-subsampled Gaussian of DP-FedAvg over rounds)."""

from __future__ import annotations

from typing import Any

from audit.machinery.config import AuditConfig
from audit.statistics.accountants import DPSGDEvent, epsilons_for_event
from targets.federated import FederatedTarget


def _worst(per_client: list[dict[str, float]]) -> dict[str, float]:
    keys = set().union(*per_client) if per_client else set()
    return {k: max(e[k] for e in per_client if k in e) for k in sorted(keys)}


def account_levels(target: FederatedTarget, config: AuditConfig) -> dict[str, Any]:
    """ε per level. Record level: each client's local DP-SGD steps over the rounds it joined
    (Poisson rate q_k, σ_k). Client level: the Poisson-subsampled Gaussian over the rounds."""
    delta, accountant = config.privacy.delta, config.privacy.accountant
    clients = []
    for k, client in enumerate(target.clients):
        row: dict[str, Any] = {
            "client": k,
            "n_train": client.n_train,
            "rounds_participated": client.rounds_participated,
            "local_steps": client.local_steps,
            "sample_rate": client.sample_rate,
            "noise_multiplier": client.noise_multiplier,
            "epsilon": {},
        }
        if client.noise_multiplier is not None and client.sample_rate is not None and client.local_steps > 0:
            row["epsilon"] = epsilons_for_event(
                DPSGDEvent(client.noise_multiplier, client.sample_rate, client.local_steps), delta, accountant
            )
        clients.append(row)
    level = target.spec.level if target.epsilon_target is not None else "none"
    client_level: dict[str, Any] | None = None
    if level == "client":
        sigma = target.client_noise_multiplier
        if sigma is None:  # a client-level DP target is trained with a client noise multiplier, always
            raise ValueError("a client-level target has no client noise multiplier")
        event = DPSGDEvent(sigma, target.spec.client_sample_rate, target.spec.rounds)
        client_level = {
            "noise_multiplier": target.client_noise_multiplier,
            "sample_rate": target.spec.client_sample_rate,
            "rounds": target.spec.rounds,
            "clip": target.spec.client_clip,
            "epsilon": epsilons_for_event(event, delta, accountant),
            "mechanism": "Poisson-subsampled Gaussian over rounds (DP-FedAvg, fixed denominator qN)",
        }
    record_worst = _worst([c["epsilon"] for c in clients if c["epsilon"]])
    if client_level is not None:  # level "client"
        # A client-level guarantee covers any change to a client's data, so one record too.
        record_level = {"epsilon": client_level["epsilon"], "from": "client-level guarantee (covers any one record)"}
    elif level == "record":
        record_level = {"epsilon": record_worst, "from": "worst client's local DP-SGD (PLD and Opacus accountants)"}
    else:
        record_level = {"epsilon": {}, "from": "non-private"}
    return {"level": level, "clients": clients, "record": record_level, "client": client_level}
