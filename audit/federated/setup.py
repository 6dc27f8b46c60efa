"""What every part of the federated job shares: the seeds, the client of each row, the spec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from audit.errors import AuditInputError
from audit.machinery.config import AuditConfig, FederatedConfig
from targets.datasets import TabularData
from targets.federated import FederatedSpec, split_by_feature_ranges, split_dirichlet
from targets.splits import AuditSplits


def federation_seed(config_seed: int, *path: int) -> int:
    """Seed of one federation of the job (target, reference j, client-MIA run j): one config seed drives all."""
    return int(np.random.SeedSequence([config_seed, 23, *path]).generate_state(1)[0])


def federated_section(config: AuditConfig) -> FederatedConfig:
    """The config's `federated:` section; the federated job is only started for a config with one."""
    if config.federated is None:
        raise AuditInputError("config", "has no 'federated' section")
    return config.federated


@dataclass
class FederationInputs:
    config: AuditConfig
    data: TabularData
    splits: AuditSplits
    client_of_row: np.ndarray  # client of every row of the dataset
    spec: FederatedSpec
    device: torch.device
    executor: Any = None  # audit.machinery.executors: where the federations train (None: here, in order)
    task_device: str = "cpu"  # the device string the executor's tasks resolve

    @property
    def watch_client(self) -> int:
        """The client whose update the server attacks: as configured, else the one with most candidates."""
        watch = federated_section(self.config).watch_client
        if watch is not None:
            return watch
        counts = np.bincount(self.client_of_row[self.splits.candidate_idx], minlength=self.n_clients)
        return int(np.argmax(counts))

    @property
    def n_clients(self) -> int:
        return federated_section(self.config).n_clients

    def client_data(self, rows: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Rows (e.g. the training members, or the pool) handed out to the clients."""
        return [
            (
                self.data.features[rows[self.client_of_row[rows] == k]],
                self.data.labels[rows[self.client_of_row[rows] == k]],
            )
            for k in range(self.n_clients)
        ]


def assign_clients(config: AuditConfig, data: TabularData) -> np.ndarray:
    """Each row's client; every client must hold ≥ MIN_CLIENT_ROWS rows (checked before training:
    an empty client used to crash a round late, exit 3)."""
    from audit.machinery.limits import MIN_CLIENT_ROWS

    fed = federated_section(config)
    if fed.n_clients * MIN_CLIENT_ROWS > len(data.labels):
        raise AuditInputError(
            "federated.n_clients",
            f"{fed.n_clients} clients need ≥ {MIN_CLIENT_ROWS} rows each, the data has {len(data.labels)} rows",
        )
    if fed.partition == "feature_ranges":
        if fed.partition_feature >= data.features.shape[1]:
            raise AuditInputError(
                "federated.partition_feature", f"must be < the number of feature columns ({data.features.shape[1]})"
            )
        client_of_row = split_by_feature_ranges(data.features[:, fed.partition_feature], fed.n_clients)
        field = "federated.n_clients"
    else:
        client_of_row = split_dirichlet(
            data.labels, fed.n_clients, fed.dirichlet_alpha, seed=config.seed, min_rows=MIN_CLIENT_ROWS
        )
        field = "federated.dirichlet_alpha"
    counts = np.bincount(np.asarray(client_of_row, dtype=np.int64), minlength=fed.n_clients)
    if counts.min() < MIN_CLIENT_ROWS:
        raise AuditInputError(
            field,
            f"the {fed.partition} split leaves client {int(counts.argmin())} with "
            f"{int(counts.min())} rows (< {MIN_CLIENT_ROWS})"
            + (" in 200 seeded draws" if fed.partition == "dirichlet" else "")
            + "; use fewer clients"
            + (" or a larger dirichlet_alpha" if fed.partition == "dirichlet" else ""),
        )
    return client_of_row


def check_client_split(config: AuditConfig) -> None:
    """`run --dry-run` on a federated config: the client split the run would make (same data, same
    seed) must give every client its minimum, so a split that fails is refused before any work."""
    assign_clients(config, config.load_data())


def federated_spec(config: AuditConfig, level: str | None = None) -> FederatedSpec:
    t, fed = config.training, federated_section(config)
    return FederatedSpec(
        hidden_sizes=list(t.hidden_sizes),
        rounds=fed.rounds,
        local_epochs=t.epochs,
        batch_size=t.batch_size,
        lr=t.lr,
        momentum=t.momentum,
        max_grad_norm=t.max_grad_norm,
        level=level or fed.level,
        client_sample_rate=fed.client_sample_rate,
        client_clip=fed.client_clip,
        server_lr=fed.server_lr,
    )
