"""Training one audit target: DP-SGD through Opacus at a target ε, or ordinary SGD for ε = ∞.

The private path is Opacus `make_private_with_epsilon` with Poisson sampling (the sampling its
accountants assume), flat per-sample clipping to `max_grad_norm` and the noise multiplier that
the selected accountant says reaches the target ε over the configured epochs. The non-private
path trains the same architecture with the same optimizer, epochs and batch size on shuffled
fixed-size batches, so the two differ only in clipping, noise and sampling.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from targets.devices import torch_threads
from targets.models import MLP, build_model

# Opacus's hooks fire on the first layer, whose input needs no gradient; harmless and noisy.
warnings.filterwarnings("ignore", message="Full backward hook is firing")


@dataclass(frozen=True)
class TrainingSpec:
    hidden_sizes: Sequence[int]
    epochs: int
    batch_size: int
    lr: float
    momentum: float
    max_grad_norm: float
    architecture: str = "mlp"  # "mlp" | "cnn" (targets.models.ARCHITECTURES)


@dataclass
class DPTrainingRecord:
    """What every trained target records about its (DP-SGD or plain) training: the fields the tabular
    (`TrainedTarget`) and text (`targets.text_models.TrainedTextTarget`) targets share, in this order."""

    model: nn.Module  # plain module (Opacus wrapper removed), on the CPU
    epsilon_target: float | None  # None = non-private
    delta: float
    noise_multiplier: float | None
    sample_rate: float
    steps: int
    max_grad_norm: float | None
    accountant: str | None
    accountant_epsilon: float | None  # what the PrivacyEngine's own accountant reports after training


@dataclass
class TrainedTarget(DPTrainingRecord):
    model: MLP  # plain module (Opacus wrapper removed), on the CPU
    poisson_sampling: bool
    train_seconds: float
    canaries: object = None  # targets.canaries.GradientCanaries of a run trained with canaries, else None
    # The PrivacyEngine accountant's history after training: [(σ, q, steps), …] (empty when non-private).
    accountant_history: tuple = ()

    def logits(self, features: np.ndarray, batch_size: int = 8192) -> np.ndarray:
        return predict_logits(self.model, features, batch_size)


@torch.no_grad()
def predict_logits(model: nn.Module, features: np.ndarray, batch_size: int = 8192) -> np.ndarray:
    model.eval()
    device = next(model.parameters()).device
    outputs = [
        model(torch.as_tensor(features[i : i + batch_size], device=device)).float().cpu()
        for i in range(0, len(features), batch_size)
    ]
    return torch.cat(outputs).numpy()


def private_setup(
    features: np.ndarray,
    labels: np.ndarray,
    n_classes: int,
    spec: TrainingSpec,
    *,
    epsilon: float,
    delta: float,
    accountant: str,
    seed: int,
    device: torch.device,
    secure_mode: bool = False,
):
    """(model, DPOptimizer, DPDataLoader, PrivacyEngine) exactly as `train_target` builds them for a
    finite ε, untrained: what the main job's conformance checks step (audit.conformance)."""
    if not math.isfinite(epsilon):
        raise ValueError("a private setup needs a finite ε")
    return _setup(
        features,
        labels,
        n_classes,
        spec,
        epsilon=epsilon,
        delta=delta,
        accountant=accountant,
        seed=seed,
        device=device,
        secure_mode=secure_mode,
    )


def _setup(features, labels, n_classes, spec, *, epsilon, delta, accountant, seed, device, secure_mode):
    torch.manual_seed(seed)  # Poisson sampling and Opacus noise draw from the global generator
    model = build_model(spec.architecture, features.shape[1], spec.hidden_sizes, n_classes, seed=seed).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=spec.lr, momentum=spec.momentum)
    dataset = TensorDataset(torch.as_tensor(features), torch.as_tensor(labels))
    loader_seed = torch.Generator().manual_seed(seed)
    loader = DataLoader(dataset, batch_size=spec.batch_size, shuffle=True, generator=loader_seed)
    private = math.isfinite(epsilon)
    engine = None
    if private:
        from targets.opacus_setups import private_at_epsilon

        engine, model, optimizer, loader = private_at_epsilon(
            model,
            optimizer,
            loader,
            epsilon=epsilon,
            delta=delta,
            epochs=spec.epochs,
            max_grad_norm=spec.max_grad_norm,
            accountant=accountant,
            secure_mode=secure_mode,
        )
    return model, optimizer, loader, engine


def train_target(
    features: np.ndarray,
    labels: np.ndarray,
    n_classes: int,
    spec: TrainingSpec,
    *,
    epsilon: float,
    delta: float,
    accountant: str,
    seed: int,
    device: torch.device,
    on_epoch: Callable[[int, int], None] | None = None,
    secure_mode: bool = False,
    canaries: dict | None = None,
) -> TrainedTarget:
    """Train one model (`spec.architecture`) on (features, labels); `epsilon = inf` means ordinary training.

    `secure_mode` makes Opacus draw noise and Poisson samples from a cryptographically secure
    generator (needs the `torchcsprng` package); the run is then not reproducible from `seed`.
    `canaries` ({"m": int or None, "seed": int}, private targets only): gradient canaries of the
    one-run white-box audit (`targets.canaries`) go into every step; `TrainedTarget.canaries` holds them.
    """
    model, optimizer, loader, engine = _setup(
        features,
        labels,
        n_classes,
        spec,
        epsilon=epsilon,
        delta=delta,
        accountant=accountant,
        seed=seed,
        device=device,
        secure_mode=secure_mode,
    )
    private = math.isfinite(epsilon)
    sample_rate = 1.0 / len(loader)
    probes = None
    if private and canaries is not None:
        from targets.canaries import canary_count_for, make_canaries

        n_parameters = sum(p.numel() for p in optimizer.params if p.requires_grad)
        m = canaries.get("m") or canary_count_for(n_parameters)
        probes = make_canaries(
            n_parameters,
            m,
            kind="auto",
            sample_rate=sample_rate,
            seed=int(canaries.get("seed", seed)),
            noise_multiplier=float(optimizer.noise_multiplier),
        )
        probes.attach(optimizer)
    criterion = nn.CrossEntropyLoss()
    steps = 0
    started = time.perf_counter()
    with torch_threads(1 if device.type == "cpu" else None):
        for epoch in range(spec.epochs):
            model.train()
            for batch_features, batch_labels in loader:
                optimizer.zero_grad(set_to_none=True)
                loss = criterion(model(batch_features.to(device)), batch_labels.to(device))
                loss.backward()
                if probes is not None:
                    probes.insert()
                optimizer.step()
                steps += 1
            if on_epoch is not None:
                on_epoch(epoch + 1, spec.epochs)
    train_seconds = time.perf_counter() - started

    plain = model._module if private else model
    plain = plain.cpu().eval()
    if private:
        model.remove_hooks()  # inference on the plain module must not collect per-sample gradients
    accountant_epsilon = None
    noise_multiplier = None
    if private:
        noise_multiplier = float(optimizer.noise_multiplier)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            accountant_epsilon = float(engine.get_epsilon(delta))
    history = tuple(tuple(float(v) for v in h) for h in getattr(engine.accountant, "history", ())) if private else ()
    return TrainedTarget(
        model=plain,
        epsilon_target=epsilon if private else None,
        delta=delta,
        noise_multiplier=noise_multiplier,
        sample_rate=sample_rate,
        steps=steps,
        max_grad_norm=spec.max_grad_norm if private else None,
        accountant=accountant if private else None,
        accountant_epsilon=accountant_epsilon,
        poisson_sampling=private,
        train_seconds=train_seconds,
        canaries=probes,
        accountant_history=history,
    )


@dataclass(frozen=True)
class PlannedSchedule:
    """What `train_target` will give a target before it is trained: its σ (None for ε = ∞), q, T and C, and the
    key of σ's calibration (`targets.opacus_setups.calibrated_noise_multiplier`'s arguments; None for ε = ∞).
    Reference and shadow models are trained with these, so a run can start them while the target trains;
    `matches` checks them against the trained target (a run that finds them different trains its banks again)."""

    noise_multiplier: float | None
    sample_rate: float
    steps: int
    max_grad_norm: float | None
    sigma_key: tuple[float, float, float, int, str] | None

    def matches(self, trained: DPTrainingRecord) -> bool:
        return (
            self.noise_multiplier == trained.noise_multiplier
            and self.sample_rate == trained.sample_rate
            and self.steps == trained.steps
            and self.max_grad_norm == trained.max_grad_norm
        )


def planned_schedule(
    n_train: int, spec: TrainingSpec, *, epsilon: float, delta: float, accountant: str
) -> PlannedSchedule:
    """The schedule `train_target` gives `n_train` rows at `epsilon`, computed as it computes it (the loader's
    length, Opacus's Poisson sampler's batches per epoch, the cached σ calibration) without training."""
    batches = -(-n_train // spec.batch_size)  # len() of `_setup`'s DataLoader (drop_last False)
    if not math.isfinite(epsilon):
        return PlannedSchedule(None, 1.0 / batches, spec.epochs * batches, None, None)
    from opacus.accountants import create_accountant
    from opacus.utils.uniform_sampler import UniformWithReplacementSampler

    sample_rate = 1 / batches  # what DPDataLoader.from_data_loader sets
    per_epoch = len(UniformWithReplacementSampler(num_samples=n_train, sample_rate=sample_rate))
    mechanism = create_accountant(accountant).mechanism()
    key = (float(epsilon), float(delta), float(sample_rate), int(spec.epochs), mechanism)
    from targets.opacus_setups import calibrated_noise_multiplier

    sigma = calibrated_noise_multiplier(*key)
    return PlannedSchedule(sigma, sample_rate, spec.epochs * per_epoch, spec.max_grad_norm, key)
