"""Federated targets: FedAvg with DP at the record level (local Opacus DP-SGD) or the client level
(DP-FedAvg), on non-IID client splits.

Why a plain FedAvg loop and not Flower's simulation engine: `flwr` 1.42's simulation runs every
client as a Ray actor (the `flwr[simulation]` extra pulls Ray) and its install pins other
versions of typer, rich and packaging than this package uses. On the 2-core CI machine a Ray
start-up alone costs more than a whole hospitals federation here, and an audit trains dozens of
federations (targets, reference federations, client-level runs). The loop below has the
semantics of Flower's `FedAvg` (weighted by client sample counts) and, at the client level, of
`DifferentialPrivacyServerSideFixedClipping` (clip each update to C, add Gaussian noise
σ·C to the sum) with two differences that the client-level accountant needs: clients are
sampled by independent coin flips with probability q (Flower samples a fixed number per round,
which a Poisson-sampling accountant does not describe), and the sum is divided by the expected
number qN rather than the number sampled (McMahan et al. 2018; see `dp_fedavg_aggregate`).

Two DP levels:

* record level (`level="record"`, the hospitals document): every client trains the global model
  locally with Opacus DP-SGD (Poisson sampling at q_k = 1/⌈n_k/B⌉, per-sample clipping to C,
  noise σ_k·C) for `local_epochs` per round; the server averages the local models weighted by
  n_k. Client k's records are protected by the composition of its own local steps over the
  rounds it took part in (server aggregation is post-processing).
* client level (`level="client"`, DP-FedAvg; McMahan, Ramage, Talwar, Zhang 2018, "Learning
  Differentially Private Recurrent Language Models", arXiv 1710.06963): each round the server
  samples every client independently with probability q; sampled clients train without noise,
  their update Δ_k = w_k − w is clipped to norm C, and the server adds N(0, σ²C²) to the sum and
  divides by the expected number of clients qN. A whole client's data is protected by the
  Poisson-subsampled Gaussian mechanism composed over the rounds. The server itself sees the
  clipped updates before the noise (central DP): it is trusted by this guarantee.

`level="none"` is the non-private FedAvg baseline: every client every round, plain SGD.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from targets.devices import torch_threads
from targets.models import MLP, build_mlp
from targets.training import predict_logits

LEVELS = ("none", "record", "client")


@dataclass(frozen=True)
class FederatedSpec:
    """How one federation trains. `local_epochs` passes over a client's data per round."""

    hidden_sizes: Sequence[int]
    rounds: int
    local_epochs: int
    batch_size: int
    lr: float
    momentum: float
    max_grad_norm: float  # record level: per-sample clipping norm of local DP-SGD
    level: str = "record"  # none | record | client
    client_sample_rate: float = 1.0  # client level: Poisson probability that a client joins a round
    client_clip: float = 1.0  # client level: clipping norm C of a client's update
    server_lr: float = 1.0

    def __post_init__(self):
        if self.level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {self.level!r}")


@dataclass
class ClientRecord:
    """What one client did: the numbers its record-level accounting needs."""

    n_train: int
    rounds_participated: int = 0
    local_steps: int = 0
    sample_rate: float | None = None  # record level: Poisson rate of local DP-SGD
    noise_multiplier: float | None = None  # record level: σ_k of local DP-SGD


@dataclass
class FederatedTarget:
    model: MLP
    spec: FederatedSpec
    epsilon_target: float | None
    delta: float
    clients: list[ClientRecord]
    client_noise_multiplier: float | None  # client level: σ of DP-FedAvg
    # The honest-but-curious server's view of `watched_client` in the last round it took part in:
    # the global model it sent and the local model it got back (None if it never took part).
    watched_client: int | None = None
    watched_before: dict[str, torch.Tensor] | None = None
    watched_after: dict[str, torch.Tensor] | None = None
    train_seconds: float = 0.0
    round_log: list[dict[str, float]] = field(default_factory=list)

    def logits(self, features: np.ndarray, batch_size: int = 8192) -> np.ndarray:
        return predict_logits(self.model, features, batch_size)


def local_seed(seed: int, round_index: int, client: int) -> int:
    """Seed of one client's local training in one round; one federation seed drives them all."""
    return int(np.random.SeedSequence([seed, 7, round_index, client]).generate_state(1)[0])


def client_sampling_seed(seed: int, round_index: int) -> int:
    return int(np.random.SeedSequence([seed, 11, round_index]).generate_state(1)[0])


# ------------------------------------------------------------------------------------------------
# Non-IID client splits
# ------------------------------------------------------------------------------------------------


def split_by_feature_ranges(values: np.ndarray, n_clients: int) -> np.ndarray:
    """Client of each row by quantile ranges of one feature (the hospitals' sites: e.g. one site
    sees the youngest patients, one the middle, one the oldest). Returns an int array of clients."""
    values = np.asarray(values, dtype=np.float64)
    if n_clients < 1:
        raise ValueError(f"n_clients must be ≥ 1, got {n_clients}")
    edges = np.quantile(values, np.linspace(0, 1, n_clients + 1)[1:-1])
    return np.searchsorted(edges, values, side="right").astype(np.int64)


def split_dirichlet(
    labels: np.ndarray, n_clients: int, alpha: float, seed: int, *, min_rows: int = 0, max_draws: int = 200
) -> np.ndarray:
    """Label-skewed split (Hsu, Qi, Brown 2019, arXiv 1909.06335): for each class, the shares of
    its rows going to each client are drawn from Dirichlet(α); small α = strongly non-IID.

    With `min_rows`, the whole split is drawn again (same seeded stream) until every client holds at
    least that many rows, up to `max_draws` draws; the last draw is returned either way and the caller
    checks it. Why redraw instead of topping up small clients: moving rows by hand would change the
    label skew α describes; a redraw keeps each accepted split a Dirichlet(α) split conditioned on the
    minimum (what Flower's DirichletPartitioner does with `min_partition_size`)."""
    if n_clients < 1 or not alpha > 0:
        raise ValueError(f"need n_clients ≥ 1 and α > 0, got {n_clients}, {alpha}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 13]))
    labels = np.asarray(labels)
    classes = np.unique(labels)
    client = np.empty(labels.size, dtype=np.int64)
    for _ in range(max(1, max_draws)):
        for cls in classes:
            rows = rng.permutation(np.flatnonzero(labels == cls))
            shares = rng.dirichlet(np.full(n_clients, alpha))
            cuts = (np.cumsum(shares)[:-1] * rows.size).astype(np.int64)
            for k, part in enumerate(np.split(rows, cuts)):
                client[part] = k
        if min_rows <= 0 or np.bincount(client, minlength=n_clients).min() >= min_rows:
            break
    return client


# ------------------------------------------------------------------------------------------------
# Client-level aggregation (DP-FedAvg)
# ------------------------------------------------------------------------------------------------


def sample_clients(n_clients: int, sample_rate: float, rng: np.random.Generator) -> np.ndarray:
    """The clients joining one round: each independently with probability q (Poisson sampling, the
    sampling the client-level accountant composes; a fixed number per round would not be)."""
    return rng.random(n_clients) < sample_rate


def clip_update(update: torch.Tensor, clip: float) -> torch.Tensor:
    """Scale a flat update to L2 norm at most `clip` (McMahan et al. 2018, flat clipping)."""
    norm = float(torch.linalg.vector_norm(update))
    return update * min(1.0, clip / norm) if norm > 0 else update


def dp_fedavg_aggregate(
    updates: Sequence[torch.Tensor],
    clip: float,
    noise_multiplier: float,
    expected_clients: float,
    generator: torch.Generator,
) -> torch.Tensor:
    """(Σ clip(Δ_k) + N(0, σ²C² I)) / (qN): the DP-FedAvg server step with the fixed denominator.

    With the denominator fixed to the expected number of clients qN (not the number actually
    sampled), adding or removing one client changes the sum by at most C, so the noise σ·C on the
    sum gives the Poisson-subsampled Gaussian mechanism with noise multiplier σ that the
    client-level accountant composes (McMahan et al. 2018, arXiv 1710.06963, Alg. 1).
    """
    if not updates:
        raise ValueError("at least one update's shape is needed; pass a zero update for an empty round")
    total = torch.zeros_like(updates[0])
    for update in updates:
        total += clip_update(update, clip)
    noise = torch.normal(0.0, noise_multiplier * clip, size=total.shape, generator=generator, dtype=total.dtype)
    return (total + noise) / expected_clients


def _flat(state: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([value.reshape(-1) for value in state.values()])


def _unflat(flat: torch.Tensor, like: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out, offset = {}, 0
    for key, value in like.items():
        out[key] = flat[offset : offset + value.numel()].reshape(value.shape).clone()
        offset += value.numel()
    return out


# ------------------------------------------------------------------------------------------------
# Local training
# ------------------------------------------------------------------------------------------------


def local_steps_per_epoch(n_rows: int, batch_size: int) -> int:
    return math.ceil(n_rows / batch_size)


@lru_cache(maxsize=512)
def _noise_multiplier(
    epsilon: float, delta: float, sample_rate: float, epochs: int | None, steps: int | None, accountant: str
) -> float:
    from targets.opacus_setups import noise_multiplier_for

    return noise_multiplier_for(epsilon, delta, sample_rate, accountant, epochs=epochs, steps=steps)


def record_level_noise_multiplier(
    epsilon: float, delta: float, n_rows: int, spec: FederatedSpec, accountant: str
) -> float:
    """σ_k that brings client k's local DP-SGD to (ε, δ) over all its rounds × local epochs.

    The same call Opacus's `make_private_with_epsilon` makes, with epochs = rounds × local epochs,
    so a one-client, one-round federation is exactly the centralized trainer.
    """
    return _noise_multiplier(
        epsilon,
        delta,
        1.0 / local_steps_per_epoch(n_rows, spec.batch_size),
        spec.rounds * spec.local_epochs,
        None,
        accountant,
    )


def client_level_noise_multiplier(epsilon: float, delta: float, spec: FederatedSpec, accountant: str) -> float:
    """σ of DP-FedAvg reaching (ε, δ) for a whole client: Poisson rate q over `rounds` rounds."""
    return _noise_multiplier(epsilon, delta, spec.client_sample_rate, None, spec.rounds, accountant)


def train_locally(
    global_state: dict[str, torch.Tensor],
    features: np.ndarray,
    labels: np.ndarray,
    n_classes: int,
    spec: FederatedSpec,
    *,
    noise_multiplier: float | None,
    seed: int,
    device: torch.device,
) -> tuple[dict[str, torch.Tensor], int]:
    """One client's local training from the global weights; returns (local weights, steps taken).

    `noise_multiplier=None` is ordinary SGD on shuffled batches; a number is Opacus DP-SGD with
    Poisson sampling and that σ, built exactly like `targets.training.train_target`.
    """
    torch.manual_seed(seed)  # Poisson sampling and Opacus noise draw from the global generator
    model = build_mlp(features.shape[1], spec.hidden_sizes, n_classes, seed=seed)
    model.load_state_dict(global_state)
    model = model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=spec.lr, momentum=spec.momentum)
    dataset = TensorDataset(torch.as_tensor(features), torch.as_tensor(labels))
    loader = DataLoader(
        dataset, batch_size=spec.batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed)
    )
    private = noise_multiplier is not None
    if noise_multiplier is not None:
        from targets.opacus_setups import private_at_sigma

        _, model, optimizer, loader = private_at_sigma(
            model, optimizer, loader, noise_multiplier=noise_multiplier, max_grad_norm=spec.max_grad_norm
        )
    criterion = nn.CrossEntropyLoss()
    steps = 0
    for _ in range(spec.local_epochs):
        model.train()
        for batch_features, batch_labels in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(model(batch_features.to(device)), batch_labels.to(device))
            loss.backward()
            optimizer.step()
            steps += 1
    plain = model._module if private else model  # Opacus's GradSampleModule wraps the model
    if not isinstance(plain, nn.Module):
        raise TypeError(f"expected the trained nn.Module, got {type(plain).__name__}")
    if private:
        model.remove_hooks()  # type: ignore[operator]  # GradSampleModule's (the static type is nn.Module)
    return {k: v.detach().cpu().clone() for k, v in plain.state_dict().items()}, steps


# ------------------------------------------------------------------------------------------------
# The federation
# ------------------------------------------------------------------------------------------------


def train_federation(
    client_data: Sequence[tuple[np.ndarray, np.ndarray]],
    n_classes: int,
    spec: FederatedSpec,
    *,
    epsilon: float,
    delta: float,
    accountant: str,
    seed: int,
    device: torch.device,
    watch_client: int | None = None,
    on_round: Callable[[int, int], None] | None = None,
    eval_data: tuple[np.ndarray, np.ndarray] | None = None,
    noise_multipliers: Sequence[float | None] | None = None,
    client_noise_multiplier: float | None = None,
    canary_clients=None,
) -> FederatedTarget:
    """Train one federation; `epsilon = inf` (or level "none") is the non-private FedAvg baseline.

    The initial global model is drawn from the first local stream (`local_seed(seed, 0, 0)`), so
    that with one client and one round the result is `train_target(..., seed=local_seed(seed, 0, 0))`.
    A client with no training rows (all its coins tails, or excluded) never takes part.
    `noise_multipliers` (record level, per client) and `client_noise_multiplier` (client level)
    replace the σ calibrated to `epsilon`: reference federations are trained with the target's σ.
    `canary_clients` (`targets.canary_clients.CanaryClients`, client level only): canary clients join
    the server's aggregation (the client-level one-run audit's twin federation).
    """
    private = math.isfinite(epsilon) and spec.level != "none"
    level = spec.level if private else "none"
    n_features = client_data[0][0].shape[1]
    global_model = build_mlp(n_features, spec.hidden_sizes, n_classes, seed=local_seed(seed, 0, 0))
    global_state = {k: v.detach().clone() for k, v in global_model.state_dict().items()}
    clients = [ClientRecord(n_train=len(y)) for _, y in client_data]
    active = [k for k, record in enumerate(clients) if record.n_train > 0]
    if not active:
        raise ValueError("no client holds any training row")
    client_sigma = None
    if level == "record":
        for k in active:
            given = noise_multipliers[k] if noise_multipliers is not None else None
            clients[k].noise_multiplier = (
                given
                if given is not None
                else record_level_noise_multiplier(epsilon, delta, clients[k].n_train, spec, accountant)
            )
            clients[k].sample_rate = 1.0 / local_steps_per_epoch(clients[k].n_train, spec.batch_size)
    elif level == "client":
        client_sigma = client_noise_multiplier or client_level_noise_multiplier(epsilon, delta, spec, accountant)
    expected_clients = spec.client_sample_rate * len(client_data)
    if canary_clients is not None:
        if level != "client":
            raise ValueError("canary clients need a client-level DP-FedAvg federation")
        canary_clients.start(_flat(global_state))
    watched_before = watched_after = None
    round_log = []
    started = time.perf_counter()
    with torch_threads(1 if device.type == "cpu" else None):
        for round_index in range(spec.rounds):
            if level == "client":
                rng = np.random.default_rng(client_sampling_seed(seed, round_index))
                joins = sample_clients(len(client_data), spec.client_sample_rate, rng)
                participants = [k for k in active if joins[k]]
            else:
                participants = list(active)
            local_states, weights = [], []
            for k in participants:
                x, y = client_data[k]
                sigma = clients[k].noise_multiplier if level == "record" else None
                state, steps = train_locally(
                    global_state,
                    x,
                    y,
                    n_classes,
                    spec,
                    noise_multiplier=sigma,
                    seed=local_seed(seed, round_index, k),
                    device=device,
                )
                clients[k].rounds_participated += 1
                clients[k].local_steps += steps
                if k == watch_client:
                    watched_before, watched_after = global_state, state
                local_states.append(state)
                weights.append(float(clients[k].n_train))
            global_state = _aggregate(
                global_state,
                local_states,
                weights,
                level,
                spec,
                client_sigma,
                expected_clients,
                seed,
                round_index,
                canary_clients,
            )
            entry = {"round": round_index + 1, "participants": float(len(participants))}
            if eval_data is not None:  # the global model's utility after each round (MLflow series)
                global_model.load_state_dict(global_state)
                predicted = predict_logits(global_model, eval_data[0]).argmax(axis=1)
                entry["test_accuracy"] = float((predicted == eval_data[1]).mean())
            round_log.append(entry)
            if on_round is not None:
                on_round(round_index + 1, spec.rounds)
    global_model.load_state_dict(global_state)
    if canary_clients is not None:
        canary_clients.finish(_flat(global_state))
    return FederatedTarget(
        model=global_model.eval(),
        spec=spec,
        epsilon_target=epsilon if private else None,
        delta=delta,
        clients=clients,
        client_noise_multiplier=client_sigma,
        watched_client=watch_client,
        watched_before=watched_before,
        watched_after=watched_after,
        train_seconds=time.perf_counter() - started,
        round_log=round_log,
    )


def _aggregate(
    global_state,
    local_states,
    weights,
    level,
    spec,
    client_sigma,
    expected_clients,
    seed,
    round_index,
    canary_clients=None,
):
    if level == "client":
        base = _flat(global_state)
        updates = [_flat(state) - base for state in local_states]
        if canary_clients is not None:  # they go through the server's own clipping, sum and noise
            updates += canary_clients.round_updates(spec.client_clip, base)
        updates = updates or [torch.zeros_like(base)]
        generator = torch.Generator().manual_seed(client_sampling_seed(seed, round_index) ^ 0x5EED)
        step = dp_fedavg_aggregate(updates, spec.client_clip, client_sigma, expected_clients, generator)
        if canary_clients is not None:
            canary_clients.observe(step * expected_clients, spec.client_clip)
        return _unflat(base + spec.server_lr * step, global_state)
    if not local_states:
        return global_state
    # FedAvg (McMahan et al. 2017, arXiv 1602.05629): average weighted by the clients' sample counts.
    total = sum(weights)
    return {key: sum((w / total) * state[key] for w, state in zip(weights, local_states)) for key in global_state}
