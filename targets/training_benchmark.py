"""Throughput of vectorised many-model DP-SGD (`train_many`) against Opacus one model at a time.

Both trainers run in this process on the same device, data, MLP and DP-SGD settings (σ, C, q,
T, lr): Opacus through `PrivacyEngine.make_private(poisson_sampling=True)` over a DataLoader, a
few models in sequence, its per-model time extrapolated; `train_many` for all `n_models`. Each
is warmed up once on a tiny run first so that one-off costs (imports, kernel selection, CUDA
context) are not charged to either. The CLI's `privacy-audit bench` calls `benchmark_training`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence

import torch

from targets.devices import resolve_device
from targets.models import build_mlp
from targets.vectorized_dpsgd import DPSGDSpec, model_init_seed, train_many

DEFAULT_N_MODELS = 64
DEFAULT_N_ROWS = 1000  # training rows per model
DEFAULT_IN_FEATURES = 30
DEFAULT_HIDDEN_SIZES = (256, 256)
DEFAULT_N_CLASSES = 2
DEFAULT_BATCH_SIZE = 64  # expected Poisson batch size: q = 1 / ceil(n_rows / batch_size)
DEFAULT_EPOCHS = 2
DEFAULT_NOISE_MULTIPLIER = 1.0
DEFAULT_MAX_GRAD_NORM = 1.0
DEFAULT_LR = 0.1
DEFAULT_OPACUS_MODELS = 3  # sequential Opacus models timed; their mean time is extrapolated
DEFAULT_REPEATS = 3  # each path is timed this many times, alternating; the best time counts
DEFAULT_SEED = 0


def _synthetic_task(n_pool: int, in_features: int, n_classes: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    X = torch.randn(n_pool, in_features, generator=generator)
    w = torch.randn(in_features, n_classes, generator=generator)
    y = (X @ w + 0.5 * torch.randn(n_pool, n_classes, generator=generator)).argmax(dim=1)
    return X, y


def _member_masks(n_models: int, n_pool: int, n_rows: int, seed: int) -> torch.Tensor:
    # Each model trains on its own random n_rows of a pool of 2·n_rows, as shadow models do.
    generator = torch.Generator().manual_seed(seed + 1)
    masks = torch.zeros((n_models, n_pool), dtype=torch.bool)
    for k in range(n_models):
        masks[k, torch.randperm(n_pool, generator=generator)[:n_rows]] = True
    return masks


def _train_opacus_one(X, y, in_features, hidden_sizes, n_classes, spec, batch_size, epochs, seed, device):
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    model = build_mlp(in_features, hidden_sizes, n_classes, seed=seed).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=spec.lr, momentum=spec.momentum)
    loader = DataLoader(TensorDataset(X.to(device), y.to(device)), batch_size=batch_size)
    engine = PrivacyEngine(accountant="prv")
    criterion = torch.nn.CrossEntropyLoss()
    with warnings.catch_warnings():
        # Opacus warns about secure RNG being off and about full backward hooks on every model.
        warnings.simplefilter("ignore")
        model, optimizer, loader = engine.make_private(
            module=model,
            optimizer=optimizer,
            data_loader=loader,
            noise_multiplier=spec.noise_multiplier,
            max_grad_norm=spec.max_grad_norm,
            poisson_sampling=True,
            noise_generator=torch.Generator(device=device).manual_seed(seed),
        )
        model.train()
        for _ in range(epochs):
            for xb, yb in loader:
                optimizer.zero_grad(set_to_none=True)
                if len(xb):
                    criterion(model(xb), yb).backward()
                optimizer.step()
    return model


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def benchmark_training(
    n_models: int = DEFAULT_N_MODELS,
    device: str = "auto",
    n_rows: int = DEFAULT_N_ROWS,
    in_features: int = DEFAULT_IN_FEATURES,
    hidden_sizes: Sequence[int] = DEFAULT_HIDDEN_SIZES,
    epochs: int = DEFAULT_EPOCHS,
    *,
    n_classes: int = DEFAULT_N_CLASSES,
    batch_size: int = DEFAULT_BATCH_SIZE,
    noise_multiplier: float = DEFAULT_NOISE_MULTIPLIER,
    max_grad_norm: float = DEFAULT_MAX_GRAD_NORM,
    opacus_models: int = DEFAULT_OPACUS_MODELS,
    chunk_size: int | None = None,
    method: str = "auto",
    repeats: int = DEFAULT_REPEATS,
    seed: int = DEFAULT_SEED,
) -> dict:
    """Models per second of sequential Opacus and of `train_many`, and their ratio.

    Returns a JSON-ready dict: device, sizes and DP-SGD settings, `opacus_models_per_second`
    (from `opacus_models` models trained one after another), `vectorized_models_per_second`
    (`n_models` models in one `train_many` call), `speedup` (vectorised / Opacus), the best
    seconds behind each rate and every repeat's seconds (`*_seconds_all`). `method` and
    `chunk_size` are passed to `train_many` ("auto" / None: its defaults).
    """
    for name, value in (
        ("n_models", n_models),
        ("n_rows", n_rows),
        ("in_features", in_features),
        ("epochs", epochs),
        ("opacus_models", opacus_models),
        ("batch_size", batch_size),
        ("repeats", repeats),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    dev = resolve_device(device)
    hidden_sizes = tuple(int(h) for h in hidden_sizes)
    spec = DPSGDSpec.for_epochs(
        train_size=n_rows,
        batch_size=batch_size,
        epochs=epochs,
        noise_multiplier=noise_multiplier,
        max_grad_norm=max_grad_norm,
        lr=DEFAULT_LR,
    )
    n_pool = 2 * n_rows
    X, y = _synthetic_task(n_pool, in_features, n_classes, seed)
    masks = _member_masks(max(n_models, opacus_models), n_pool, n_rows, seed)

    # Warm-up: one short run of each path.
    warm_spec = DPSGDSpec(noise_multiplier, max_grad_norm, spec.sample_rate, 2, spec.lr)
    _train_opacus_one(
        X[masks[0]], y[masks[0]], in_features, hidden_sizes, n_classes, warm_spec, batch_size, 1, seed, dev
    )
    train_many(
        in_features,
        hidden_sizes,
        n_classes,
        X,
        y,
        masks[:2],
        warm_spec,
        seed=seed,
        device=dev,
        chunk_size=chunk_size,
        method=method,
    )

    # Alternate the two so that both see the same background load; keep each one's best time
    # (the usual estimate of the cost of the work itself on a shared machine).
    opacus_times, vectorized_times = [], []
    for _ in range(repeats):
        _synchronize(dev)
        start = time.perf_counter()
        for k in range(opacus_models):
            _train_opacus_one(
                X[masks[k]],
                y[masks[k]],
                in_features,
                hidden_sizes,
                n_classes,
                spec,
                batch_size,
                epochs,
                model_init_seed(seed, k),
                dev,
            )
        _synchronize(dev)
        opacus_times.append(time.perf_counter() - start)

        start = time.perf_counter()
        stacked = train_many(
            in_features,
            hidden_sizes,
            n_classes,
            X,
            y,
            masks[:n_models],
            spec,
            seed=seed,
            device=dev,
            chunk_size=chunk_size,
            method=method,
        )
        _synchronize(dev)
        vectorized_times.append(time.perf_counter() - start)
    opacus_seconds, vectorized_seconds = min(opacus_times), min(vectorized_times)

    opacus_rate = opacus_models / opacus_seconds
    vectorized_rate = n_models / vectorized_seconds
    return {
        "device": dev.type,
        "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "torch_threads": torch.get_num_threads(),
        "n_models": n_models,
        "n_rows": n_rows,
        "in_features": in_features,
        "hidden_sizes": list(hidden_sizes),
        "n_classes": n_classes,
        "n_params": sum(p[0].numel() for p in stacked.params.values()),
        "batch_size": batch_size,
        "epochs": epochs,
        "noise_multiplier": noise_multiplier,
        "max_grad_norm": max_grad_norm,
        "sample_rate": spec.sample_rate,
        "steps": spec.steps,
        "chunk_size": stacked.chunk_size,
        "method": stacked.method,
        "opacus_models_timed": opacus_models,
        "repeats": repeats,
        "opacus_seconds": opacus_seconds,
        "opacus_seconds_all": opacus_times,
        "opacus_models_per_second": opacus_rate,
        "vectorized_seconds": vectorized_seconds,
        "vectorized_seconds_all": vectorized_times,
        "vectorized_models_per_second": vectorized_rate,
        "speedup": vectorized_rate / opacus_rate,
    }


if __name__ == "__main__":  # pragma: no cover - manual use; the CLI is `privacy-audit bench`
    import json
    import sys

    n_models = int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_N_MODELS
    print(json.dumps(benchmark_training(n_models), indent=2))
