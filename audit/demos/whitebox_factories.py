"""Opacus training setups for `privacy-audit whitebox-audit --factory` (a correct one and a buggy one).

A factory takes no arguments and returns what a user's training script builds before its loop:
`{"model", "optimizer", "data_loader", "privacy_engine", "epochs"}` (or the 4-tuple without epochs),
made private by `PrivacyEngine.make_private`. The audit runs the loop itself (cross-entropy, every
batch, `epochs` times) and inserts its Dirac gradient canary into the per-sample gradients.

Both use a full batch (Poisson sampling at q = 1: batch_size = the dataset), σ = 2, C = 2 and
T = 4 steps, which the accountant knows: μ = √T/σ = 1, ε(δ = 1e-5) ≈ 4.38.
"""
from __future__ import annotations

import types
import warnings

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

NOISE_MULTIPLIER = 2.0
MAX_GRAD_NORM = 2.0
EPOCHS = 4
ROWS = 16


def _setup(noise_multiplier: float = NOISE_MULTIPLIER):
    from opacus import PrivacyEngine

    # Data and weights come from the global RNG, which the audit seeds per run.
    features = torch.randn(ROWS, 4)
    labels = (features[:, 0] > 0).long()
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(features, labels), batch_size=ROWS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus warns about its non-secure RNG: not what is audited here
        engine = PrivacyEngine(accountant="prv")
        model, optimizer, loader = engine.make_private(module=model, optimizer=optimizer, data_loader=loader,
                                                       noise_multiplier=noise_multiplier, max_grad_norm=MAX_GRAD_NORM,
                                                       poisson_sampling=True)
    return {"model": model, "optimizer": optimizer, "data_loader": loader, "privacy_engine": engine, "epochs": EPOCHS}


def correct_opacus():
    """Opacus as shipped: per-sample clipping to C, noise N(0, σ²C²), averaging by the expected batch."""
    return _setup()


def _add_noise_without_clip_norm(self):
    # The planted bug: noise std σ instead of σ·C (the clipping norm forgotten), so with C = 2 the
    # mechanism adds half the noise the accountant was told about.
    for p in self.params:
        noise = torch.normal(0.0, self.noise_multiplier, size=p.summed_grad.shape, device=p.summed_grad.device)
        p.grad = (p.summed_grad + noise).view_as(p)


def noise_not_scaled_by_clip_norm():
    """Buggy: the optimizer's noise is N(0, σ²), not N(0, σ²C²) — true μ = C·√T/σ = 2, the claim says 1."""
    setup = _setup()
    optimizer = setup["optimizer"]
    optimizer.add_noise = types.MethodType(_add_noise_without_clip_norm, optimizer)
    return setup


def accountant_told_wrong_sigma():
    """Buggy: trains with σ/2 but the accountant's hook records σ (it reads a stale noise multiplier)."""
    setup = _setup()
    optimizer = setup["optimizer"]
    told = optimizer.noise_multiplier
    hook = optimizer.step_hook

    def stale_hook(opt):
        actual = opt.noise_multiplier
        opt.noise_multiplier = told
        try:
            hook(opt)
        finally:
            opt.noise_multiplier = actual

    optimizer.attach_step_hook(stale_hook)
    optimizer.noise_multiplier = told / 2
    return setup


# --------------------------------------------------------------------------------------------------
# One-run setups (`whitebox-audit --mode one-run`): a wider model, so that Dirac canaries have
# coordinates of their own (m ≤ 10 % of the 28 674 trainable coordinates), same claim (μ = 1).
# --------------------------------------------------------------------------------------------------

WIDE_HIDDEN = 4096


def _wide_setup(noise_multiplier: float = NOISE_MULTIPLIER):
    from opacus import PrivacyEngine

    features = torch.randn(ROWS, 4)
    labels = (features[:, 0] > 0).long()
    model = nn.Sequential(nn.Linear(4, WIDE_HIDDEN), nn.ReLU(), nn.Linear(WIDE_HIDDEN, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(features, labels), batch_size=ROWS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = PrivacyEngine(accountant="prv")
        model, optimizer, loader = engine.make_private(module=model, optimizer=optimizer, data_loader=loader,
                                                       noise_multiplier=noise_multiplier, max_grad_norm=MAX_GRAD_NORM,
                                                       poisson_sampling=True)
    return {"model": model, "optimizer": optimizer, "data_loader": loader, "privacy_engine": engine, "epochs": EPOCHS}


def wide_correct_opacus():
    """Opacus as shipped, on the wide model (one-run audits)."""
    return _wide_setup()


def wide_noise_not_scaled_by_clip_norm():
    """Buggy like `noise_not_scaled_by_clip_norm`, on the wide model: true μ = 2, the claim says 1."""
    setup = _wide_setup()
    setup["optimizer"].add_noise = types.MethodType(_add_noise_without_clip_norm, setup["optimizer"])
    return setup
