"""Demonstration trainers for `privacy-audit canary-audit`: one correct DP-SGD, two broken ones.

All three follow the documented trainer protocol `train(features, labels, seed) -> model` and
share this module's CLAIM, a DP-SGD configuration whose ε (PLD accountant, δ = 1e-5) is about 1:

    privacy-audit canary-audit --trainer audit.demos.dp_trainers:correct_dpsgd
    privacy-audit canary-audit --trainer audit.demos.dp_trainers:broken_no_clipping

Training is Opacus `PrivacyEngine.make_private` with Poisson sampling, flat per-sample
clipping, plain SGD, on a small MLP (32 hidden units): ~20 steps, well under a second on a CPU,
so an audit can train a hundred models. The sample rate is q = 1/STEPS_PER_EPOCH whatever the
number of rows: the batch size is ⌈n / STEPS_PER_EPOCH⌉, and Opacus takes q = 1/len(loader), so
adding a canary row does not change (q, T) and the claim holds for both neighbours.

The initial weights come from a fixed seed, not from `seed` (which drives Poisson sampling and
noise). DP-SGD's guarantee holds for any fixed initialisation, and an auditor may assume the
strongest adversary, who knows it (Nasr et al. 2021, arXiv 2101.04535); a random
initialisation only adds run-to-run variation that hides the canary without adding privacy
the accountant could count.

The broken trainers claim the same ε:
- `broken_no_clipping`: per-sample clipping effectively off (max_grad_norm = 1e6), the noise std
  kept at the claimed σ·C — the "clipping hurts accuracy, let's raise C" bug.
- `broken_low_noise`: noise multiplier divided by the expected batch size — the confusion of noise
  on the summed gradient (what Opacus's σ means) with noise on the averaged gradient.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from targets.models import build_mlp

NOISE_MULTIPLIER = 4.5
MAX_GRAD_NORM = 1.0
STEPS_PER_EPOCH = 4
EPOCHS = 5
DELTA = 1e-5
LEARNING_RATE = 2.0
HIDDEN_SIZES = (32,)
INIT_SEED = 0
UNCLIPPED_NORM = 1e6

CLAIM = {
    "noise_multiplier": NOISE_MULTIPLIER,
    "sample_rate": 1.0 / STEPS_PER_EPOCH,
    "steps": EPOCHS * STEPS_PER_EPOCH,
    "delta": DELTA,
}

__all__ = ["CLAIM", "broken_low_noise", "broken_no_clipping", "correct_dpsgd", "train_dpsgd"]


def train_dpsgd(
    features: np.ndarray, labels: np.ndarray, seed: int, *, noise_multiplier: float, max_grad_norm: float
) -> nn.Module:
    """DP-SGD with Opacus (Poisson sampling, q = 1/STEPS_PER_EPOCH, EPOCHS epochs); returns the
    plain MLP (logits).

    Runs single-threaded: a 32-unit MLP gains nothing from intra-op threads, and on a shared
    2-core machine they made each training ~40x slower (1.6 s instead of 35 ms, measured).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train_dpsgd(features, labels, seed, noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm)
    finally:
        torch.set_num_threads(threads)


def _train_dpsgd(features, labels, seed, *, noise_multiplier, max_grad_norm) -> nn.Module:
    from targets.opacus_setups import private_at_sigma

    X = torch.as_tensor(np.asarray(features, dtype=np.float32))
    y = torch.as_tensor(np.asarray(labels, dtype=np.int64))
    n_classes = int(y.max()) + 1
    torch.manual_seed(seed)  # Opacus's Poisson sampler and noise draw from the global generator
    model = build_mlp(X.shape[1], HIDDEN_SIZES, max(n_classes, 2), seed=INIT_SEED)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    loader = DataLoader(TensorDataset(X, y), batch_size=math.ceil(len(X) / STEPS_PER_EPOCH))
    _, private_model, optimizer, loader = private_at_sigma(
        model, optimizer, loader, noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm
    )
    criterion = nn.CrossEntropyLoss()
    private_model.train()
    with warnings.catch_warnings():
        # Opacus's hooks fire on the first layer, whose input needs no gradient: harmless, and
        # printing it every step costs more than the step.
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        for _ in range(EPOCHS):
            for batch_x, batch_y in loader:
                optimizer.zero_grad(set_to_none=True)
                if len(batch_x) > 0:  # an empty Poisson batch still takes a (pure-noise) step
                    criterion(private_model(batch_x), batch_y).backward()
                optimizer.step()
    private_model.remove_hooks()
    return private_model._module.eval()


def correct_dpsgd(features: np.ndarray, labels: np.ndarray, seed: int) -> nn.Module:
    """DP-SGD exactly as CLAIM says: σ = NOISE_MULTIPLIER, C = MAX_GRAD_NORM."""
    return train_dpsgd(features, labels, seed, noise_multiplier=NOISE_MULTIPLIER, max_grad_norm=MAX_GRAD_NORM)


def broken_no_clipping(features: np.ndarray, labels: np.ndarray, seed: int) -> nn.Module:
    """BROKEN: claims CLAIM, but clips at 1e6 (i.e. not at all) with noise std still σ·C."""
    return train_dpsgd(
        features,
        labels,
        seed,
        noise_multiplier=NOISE_MULTIPLIER * MAX_GRAD_NORM / UNCLIPPED_NORM,
        max_grad_norm=UNCLIPPED_NORM,
    )


def broken_low_noise(features: np.ndarray, labels: np.ndarray, seed: int) -> nn.Module:
    """BROKEN: claims CLAIM, but divides σ by the expected batch size (noise meant for the mean)."""
    expected_batch = max(1, int(len(features) / STEPS_PER_EPOCH))
    return train_dpsgd(
        features,
        labels,
        seed,
        noise_multiplier=NOISE_MULTIPLIER / expected_batch,
        max_grad_norm=MAX_GRAD_NORM,
    )
