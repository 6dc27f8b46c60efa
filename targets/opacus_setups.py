"""Opacus training setups built by the harness: what a user's `--factory` would return, for `--builtin`,
and the one Opacus call every trained target goes through (`make_private_with_epsilon`'s, its σ cached).

`private_at_epsilon` wraps (model, optimizer, loader) with Opacus at a target ε (Poisson sampling,
flat clipping, σ from the chosen accountant) and turns Opacus's "cannot calibrate" errors into a
bad-input error naming `privacy.epsilons` (or `privacy.secure_mode` when torchcsprng is missing).

`tabular_mlp_setup` makes an MLP on the default synthetic table private with Opacus
(`PrivacyEngine.make_private`, Poisson sampling at rate q, flat clipping to C, noise σ·C) and
returns the `--factory` protocol's dict, plus a held-out `test_loader` for accuracy and `steps`
(the loop stops there).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from targets.datasets import make_default_tabular
from targets.models import build_model

__all__ = [
    "calibrated_noise_multiplier",
    "private_at_epsilon",
    "private_at_sigma",
    "remember_noise_multiplier",
    "tabular_mlp_setup",
]

TEST_SHARE = 0.2


# σ calibrated elsewhere (the run's driver) and handed to this process with the task (`remember_noise_multiplier`):
# key (ε, δ, q, epochs, accountant) → σ, the same float the search returns there.
_KNOWN_SIGMAS: dict[tuple[float, float, float, int, str], float] = {}


@functools.lru_cache(maxsize=256)
def calibrated_noise_multiplier(
    epsilon: float, delta: float, sample_rate: float, epochs: int, accountant: str
) -> float:
    """Opacus's σ for (ε, δ) over `epochs` at Poisson rate `sample_rate` under `accountant` (its
    `get_noise_multiplier`, as `make_private_with_epsilon` calls it), cached per process; a σ another process
    calibrated for the same arguments and handed over (`remember_noise_multiplier`) is taken as it is."""
    known = _KNOWN_SIGMAS.get((float(epsilon), float(delta), float(sample_rate), int(epochs), accountant))
    if known is not None:
        return known
    return noise_multiplier_for(epsilon, delta, sample_rate, accountant, epochs=epochs)


def remember_noise_multiplier(
    epsilon: float, delta: float, sample_rate: float, epochs: int, accountant: str, sigma: float
) -> None:
    """Record σ that `calibrated_noise_multiplier` returned for these arguments in another process (the run's
    driver), so this one does not search again: the search is deterministic, so the float is the one it would
    find (1–6 s of CPU per ε with PRV at the default run's settings)."""
    _KNOWN_SIGMAS[(float(epsilon), float(delta), float(sample_rate), int(epochs), accountant)] = float(sigma)


def noise_multiplier_for(
    epsilon: float,
    delta: float,
    sample_rate: float,
    accountant: str,
    *,
    epochs: int | None = None,
    steps: int | None = None,
) -> float:
    """Opacus's `get_noise_multiplier` for (ε, δ) over `epochs` (or `steps`) at Poisson rate `sample_rate`,
    its warnings silenced (RDP's "optimal order is the largest alpha": the PLD and PRV columns say it)."""
    from opacus.accountants.utils import get_noise_multiplier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(
            get_noise_multiplier(
                target_epsilon=epsilon,
                target_delta=delta,
                sample_rate=sample_rate,
                epochs=epochs,
                steps=steps,
                accountant=accountant,
            )
        )


def _make_private(engine, model, optimizer, loader, noise_multiplier, max_grad_norm, grad_sample_mode="hooks"):
    """Opacus's `make_private` as every harness setup calls it: Poisson sampling, flat clipping, σ given."""
    return engine.make_private(
        module=model,
        optimizer=optimizer,
        data_loader=loader,
        noise_multiplier=noise_multiplier,
        max_grad_norm=max_grad_norm,
        poisson_sampling=True,
        grad_sample_mode=grad_sample_mode,
    )


def private_at_sigma(
    model, optimizer, loader, *, noise_multiplier: float, max_grad_norm: float, accountant: str = "prv"
):
    """(engine, model, optimizer, loader) made private by Opacus at noise multiplier `noise_multiplier` (Poisson
    sampling at 1 / len(loader), flat clipping to `max_grad_norm`, noise σ·C), Opacus's warnings silenced
    (its non-secure RNG notice: not what is audited)."""
    from opacus import PrivacyEngine

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = PrivacyEngine(accountant=accountant)
        model, optimizer, loader = _make_private(engine, model, optimizer, loader, noise_multiplier, max_grad_norm)
    return engine, model, optimizer, loader


def private_at_epsilon(
    model,
    optimizer,
    loader,
    *,
    epsilon: float,
    delta: float,
    epochs: int,
    max_grad_norm: float,
    accountant: str,
    secure_mode: bool = False,
    what: str = "data size",
    grad_sample_mode: str = "hooks",
) -> tuple:
    """(engine, model, optimizer, loader) made private by Opacus to reach `epsilon` at `delta` over
    `epochs` passes of `loader` (Poisson sampling at 1 / len(loader), clipping to `max_grad_norm`).
    `what` names, in the error, what the schedule was calibrated for ("corpus", "data size");
    `grad_sample_mode` is Opacus's ("functorch" for layers it has no hook rule for)."""
    from opacus import PrivacyEngine

    from audit.errors import AuditInputError

    with warnings.catch_warnings():
        # Opacus warns about secure_mode and its RNG on every call; the README documents the choice.
        warnings.simplefilter("ignore")
        try:
            engine = PrivacyEngine(accountant=accountant, secure_mode=secure_mode)
        except ImportError as exc:
            raise AuditInputError("privacy.secure_mode", f"needs the torchcsprng package ({exc})") from None
        try:
            # What make_private_with_epsilon does (opacus 1.6), with σ's calibration cached: a run builds the same
            # setup four times per target (the target, its canary twin, two conformance setups) and each
            # calibration is a binary search over the accountant (seconds with PRV); a deterministic function of
            # its arguments, so the cache changes no number.
            noise_multiplier = calibrated_noise_multiplier(
                epsilon, delta, 1 / len(loader), epochs, engine.accountant.mechanism()
            )
            model, optimizer, loader = _make_private(
                engine, model, optimizer, loader, noise_multiplier, max_grad_norm, grad_sample_mode
            )
        except ValueError as exc:  # "privacy budget is too low", "floating point errors will dominate"
            raise AuditInputError(
                "privacy.epsilons",
                f"Opacus cannot calibrate noise for ε={epsilon:g}, "
                f"δ={delta:g} with this {what} and schedule ({str(exc)[:120]})",
            ) from None
    return engine, model, optimizer, loader


def tabular_mlp_setup(
    *,
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    max_grad_norm: float,
    rows: int = 2000,
    hidden: Sequence[int] = (256, 256),
    lr: float = 0.1,
    momentum: float = 0.0,
    seed: int = 0,
    accountant: str = "prv",
    make_private=None,
    device: str | None = None,
) -> dict:
    """A private MLP on `rows` rows of the default table (80 % train, 20 % test), model and data on
    `device` (None: the CPU; the caller resolves "auto" with `targets.devices.resolve_device`). `make_private`
    (engine, model, optimizer, loader) -> (model, optimizer, loader) replaces the usual
    `engine.make_private` call (the planted-bug setups use it)."""
    from opacus import PrivacyEngine

    data = make_default_tabular(int(rows), int(seed))
    X = data.features.astype(np.float32)
    y = data.labels.astype(np.int64)
    n_test = int(round(TEST_SHARE * len(y)))
    place = torch.device(device or "cpu")
    train = TensorDataset(torch.as_tensor(X[n_test:], device=place), torch.as_tensor(y[n_test:], device=place))
    test = DataLoader(
        TensorDataset(torch.as_tensor(X[:n_test], device=place), torch.as_tensor(y[:n_test], device=place)),
        batch_size=4096,
    )
    n_train = len(train)
    batch = max(1, int(round(float(sample_rate) * n_train)))
    model = build_model("mlp", X.shape[1], list(hidden), int(y.max()) + 1, seed=int(seed)).to(place)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    loader = DataLoader(train, batch_size=batch, shuffle=True)
    if make_private is None:
        engine, model, optimizer, loader = private_at_sigma(
            model,
            optimizer,
            loader,
            noise_multiplier=float(noise_multiplier),
            max_grad_norm=float(max_grad_norm),
            accountant=accountant,
        )
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Opacus's non-secure RNG warning: not what is audited
            engine = PrivacyEngine(accountant=accountant)
            model, optimizer, loader = make_private(engine, model, optimizer, loader)
    per_epoch = max(1, len(loader))
    return {
        "model": model,
        "optimizer": optimizer,
        "data_loader": loader,
        "privacy_engine": engine,
        "epochs": int(math.ceil(int(steps) / per_epoch)),
        "steps": int(steps),
        "test_loader": test,
    }
