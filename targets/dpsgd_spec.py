"""What one DP-SGD training of `targets.vectorized_dpsgd` is: the hyper-parameters (σ, C, q, steps, lr,
momentum), checked when built, and Opacus's clipping constant the steps use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Opacus's clipping denominator: C / (norm + 1e-6), `DPOptimizer.clip_and_accumulate`.
OPACUS_CLIP_EPSILON = 1e-6


@dataclass(frozen=True)
class DPSGDSpec:
    """One DP-SGD configuration, shared by every model trained together.

    `noise_multiplier` σ is 0 and `max_grad_norm` C is None for non-private training; σ = 0 with a
    C is clip-only training (no privacy, ε = ∞). `sample_rate` q is each row's Poisson inclusion
    probability per step, relative to the model's own training set; `steps` is T.
    """

    noise_multiplier: float
    max_grad_norm: float | None
    sample_rate: float
    steps: int
    lr: float
    momentum: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.noise_multiplier) and self.noise_multiplier >= 0):
            raise ValueError(f"noise_multiplier must be a finite number >= 0, got {self.noise_multiplier!r}")
        if self.max_grad_norm is None:
            if self.noise_multiplier != 0:
                raise ValueError(
                    f"max_grad_norm is None (non-private) but noise_multiplier={self.noise_multiplier!r}; "
                    "noise needs a clipping norm"
                )
        elif not (math.isfinite(self.max_grad_norm) and self.max_grad_norm > 0):
            raise ValueError(f"max_grad_norm must be > 0 or None, got {self.max_grad_norm!r}")
        if not (0 < self.sample_rate <= 1):
            raise ValueError(f"sample_rate must be in (0, 1], got {self.sample_rate!r}")
        if isinstance(self.steps, bool) or not isinstance(self.steps, (int, np.integer)) or self.steps < 0:
            raise ValueError(f"steps must be an integer >= 0, got {self.steps!r}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be > 0, got {self.lr!r}")
        if not (0 <= self.momentum < 1):
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum!r}")

    @classmethod
    def for_epochs(
        cls,
        *,
        train_size: int,
        batch_size: int,
        epochs: int,
        noise_multiplier: float,
        max_grad_norm: float | None,
        lr: float,
        momentum: float = 0.0,
    ) -> DPSGDSpec:
        """The spec `make_private(poisson_sampling=True)` produces from a DataLoader.

        Opacus sets q = 1 / len(data_loader) = 1 / ceil(train_size / batch_size) and draws
        len(data_loader) batches per epoch.
        """
        if train_size <= 0:
            raise ValueError(f"train_size must be > 0, got {train_size!r}")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size!r}")
        if epochs < 0:
            raise ValueError(f"epochs must be >= 0, got {epochs!r}")
        batches_per_epoch = math.ceil(train_size / batch_size)
        return cls(
            noise_multiplier=noise_multiplier,
            max_grad_norm=max_grad_norm,
            sample_rate=1 / batches_per_epoch,
            steps=epochs * batches_per_epoch,
            lr=lr,
            momentum=momentum,
        )

    @property
    def private(self) -> bool:
        """True when the training is differentially private (σ > 0 with clipping)."""
        return self.max_grad_norm is not None and self.noise_multiplier > 0

    @property
    def accountant_inputs(self) -> tuple[float, float, int]:
        """(σ, q, T): one entry of an Opacus accountant's `history`."""
        return (float(self.noise_multiplier), float(self.sample_rate), int(self.steps))

    def epsilon(self, delta: float, accountant: str = "prv") -> float:
        """The accountant's ε at `delta` for this spec (∞ when not private)."""
        return accountant_epsilon(self.noise_multiplier, self.sample_rate, self.steps, delta, accountant)


def accountant_epsilon(
    noise_multiplier: float, sample_rate: float, steps: int, delta: float, accountant: str = "prv"
) -> float:
    """ε of T steps of the Poisson-subsampled Gaussian mechanism (σ, q), from an Opacus accountant.

    `accountant` is an `opacus.accountants` registry name ("rdp", "prv", "gdp"). The result is what
    `PrivacyEngine(accountant=...).get_epsilon(delta)` reports after T optimizer steps: the
    accountant's history is set to the single entry (σ, q, T). σ = 0 gives ∞; T = 0 gives 0.
    """
    from opacus.accountants import create_accountant

    if not (0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if noise_multiplier < 0:
        raise ValueError(f"noise_multiplier must be >= 0, got {noise_multiplier!r}")
    if not (0 < sample_rate <= 1):
        raise ValueError(f"sample_rate must be in (0, 1], got {sample_rate!r}")
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps!r}")
    if steps == 0:
        return 0.0
    if noise_multiplier == 0:
        return math.inf
    try:
        acc = create_accountant(accountant)
    except ValueError:
        raise ValueError(f"accountant must be an opacus accountant name (rdp, prv, gdp), got {accountant!r}") from None
    acc.history = [(float(noise_multiplier), float(sample_rate), int(steps))]
    return float(acc.get_epsilon(delta=delta))
