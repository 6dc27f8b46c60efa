"""Opacus training set-ups for `whitebox-audit`: the one you ship, and one whose noise forgot the clipping norm.

    privacy-audit whitebox-audit --factory opacus_setup:correct --runs 200

A factory takes no arguments and returns what your training script builds before its loop, made
private by Opacus: model, optimizer, data loader and privacy engine (plus `epochs`). The audit runs
the loop itself, puts a Dirac gradient canary into every step and watches every iterate (Nasr et
al. 2023, arXiv 2302.07956). It calls the factory once per run in isolated worker processes and
seeds torch's global generator per run, so draw data and weights from it.

Full batch (q = 1), σ = 2, C = 2, 4 steps: μ = √T/σ = 1, ε ≈ 4.4 at δ = 1e-5.
"""

from __future__ import annotations

import types
import warnings

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

ROWS, NOISE_MULTIPLIER, MAX_GRAD_NORM, EPOCHS = 16, 2.0, 2.0, 4


def _setup():
    from opacus import PrivacyEngine

    features = torch.randn(ROWS, 4)
    labels = (features[:, 0] > 0).long()
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(features, labels), batch_size=ROWS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus's warning about its non-secure RNG
        engine = PrivacyEngine(accountant="prv")
        model, optimizer, loader = engine.make_private(
            module=model,
            optimizer=optimizer,
            data_loader=loader,
            noise_multiplier=NOISE_MULTIPLIER,
            max_grad_norm=MAX_GRAD_NORM,
            poisson_sampling=True,
        )
    return {"model": model, "optimizer": optimizer, "data_loader": loader, "privacy_engine": engine, "epochs": EPOCHS}


def correct():
    """Opacus as shipped."""
    return _setup()


def _add_noise_forgetting_clip_norm(self):
    # The bug: noise N(0, σ²) where Opacus adds N(0, σ²C²). With C = 2 half the noise the accountant counts.
    for p in self.params:
        noise = torch.normal(0.0, self.noise_multiplier, size=p.summed_grad.shape, device=p.summed_grad.device)
        p.grad = (p.summed_grad + noise).view_as(p)


def broken():
    """A customised optimizer whose noise forgot the clipping norm: true μ = C·√T/σ = 2, claimed 1."""
    setup = _setup()
    setup["optimizer"].add_noise = types.MethodType(_add_noise_forgetting_clip_norm, setup["optimizer"])
    return setup
