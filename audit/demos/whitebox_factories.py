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

from targets.opacus_setups import private_at_sigma

NOISE_MULTIPLIER = 2.0
MAX_GRAD_NORM = 2.0
EPOCHS = 4
ROWS = 16


def _setup(noise_multiplier: float = NOISE_MULTIPLIER, hidden: int = 8):
    """ROWS rows, a 4 → `hidden` → 2 MLP, full batch, made private by Opacus at σ = `noise_multiplier`, C = 2."""
    # Data and weights come from the global RNG, which the audit seeds per run.
    features = torch.randn(ROWS, 4)
    labels = (features[:, 0] > 0).long()
    model = nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(features, labels), batch_size=ROWS)
    engine, model, optimizer, loader = private_at_sigma(
        model, optimizer, loader, noise_multiplier=noise_multiplier, max_grad_norm=MAX_GRAD_NORM
    )
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


def wide_correct_opacus():
    """Opacus as shipped, on the wide model (one-run audits)."""
    return _setup(hidden=WIDE_HIDDEN)


def wide_noise_not_scaled_by_clip_norm():
    """Buggy like `noise_not_scaled_by_clip_norm`, on the wide model: true μ = 2, the claim says 1."""
    setup = _setup(hidden=WIDE_HIDDEN)
    setup["optimizer"].add_noise = types.MethodType(_add_noise_without_clip_norm, setup["optimizer"])
    return setup


# --------------------------------------------------------------------------------------------------
# Opacus as it is used (issue #38): the wide model, 400 rows, logical batches of 40 (q 0.1) for 2
# epochs, σ from make_private_with_epsilon(ε 2). Correct ones must hold, broken ones be refuted.
# --------------------------------------------------------------------------------------------------

USAGE_ROWS, USAGE_BATCH, USAGE_PHYSICAL, USAGE_EPOCHS, USAGE_EPSILON = 400, 40, 10, 2, 2.0


def _usage_setup(
    *,
    frozen: bool = False,
    groups: bool = False,
    poisson: bool = True,
    **private,
):
    """The usage model made private with `make_private_with_epsilon`; `private` passes Opacus's own
    options (grad_sample_mode, clipping, ...)."""
    from opacus import PrivacyEngine

    features = torch.randn(USAGE_ROWS, 4)
    labels = (features[:, 0] > 0).long()
    model = nn.Sequential(nn.Linear(4, WIDE_HIDDEN), nn.ReLU(), nn.Linear(WIDE_HIDDEN, 2))
    if frozen:  # partial fine-tuning: the output layer is frozen
        model[2].requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(
        [{"params": params[:1], "lr": 0.05}, {"params": params[1:], "lr": 0.1}] if groups else params, lr=0.1
    )
    loader = DataLoader(TensorDataset(features, labels), batch_size=USAGE_BATCH, shuffle=not poisson)
    ghost = private.get("grad_sample_mode") == "ghost"
    if private.get("clipping") == "per_layer":
        private["max_grad_norm"] = [MAX_GRAD_NORM / len(params) ** 0.5] * len(params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = PrivacyEngine(accountant="prv")
        made = engine.make_private_with_epsilon(
            module=model,
            optimizer=optimizer,
            data_loader=loader,
            target_epsilon=USAGE_EPSILON,
            target_delta=1e-5,
            epochs=USAGE_EPOCHS,
            poisson_sampling=poisson,
            **({"criterion": nn.CrossEntropyLoss()} if ghost else {}),
            **{"max_grad_norm": MAX_GRAD_NORM, **private},
        )
    setup = {"privacy_engine": engine, "epochs": USAGE_EPOCHS}
    if ghost:  # ghost clipping returns the criterion whose backward does the two passes
        setup["model"], setup["optimizer"], setup["loss"], setup["data_loader"] = made
    else:
        setup["model"], setup["optimizer"], setup["data_loader"] = made
    return setup


def usage_batch_memory_manager():
    """Correct: logical batches of 40 through Opacus's BatchMemoryManager, physical batches of 10
    (the loop sees the manager's loader; the skipped physical steps are no steps of the accountant)."""
    from opacus.utils.batch_memory_manager import BatchMemoryManager

    setup = _usage_setup()
    manager = BatchMemoryManager(
        data_loader=setup["data_loader"], max_physical_batch_size=USAGE_PHYSICAL, optimizer=setup["optimizer"]
    )
    setup["data_loader"] = manager.__enter__()  # what `with BatchMemoryManager(...) as loader` gives
    return setup


def usage_frozen_param_groups():
    """Correct: partial fine-tuning (the output layer frozen) and two param groups."""
    return _usage_setup(frozen=True, groups=True)


def usage_ghost_clipping():
    """Correct: Opacus's ghost clipping (`grad_sample_mode="ghost"`, the criterion it returns as `loss`)."""
    return _usage_setup(grad_sample_mode="ghost")


def usage_functorch():
    """Correct: per-sample gradients through functorch (`grad_sample_mode="functorch"`)."""
    return _usage_setup(grad_sample_mode="functorch")


def usage_per_layer_clipping():
    """Correct: per-layer clipping (`clipping="per_layer"`, C_k = C/√tensors, total C)."""
    return _usage_setup(clipping="per_layer")


def _chain_after_step(optimizer, after) -> None:
    # The tool's loop calls optimizer.step(); a factory can only reach its other updates through it.
    step = optimizer.step

    def stepped(*args, **kwargs):
        out = step(*args, **kwargs)
        after()
        return out

    optimizer.step = stepped


class _WithOffset(nn.Module):
    """The released model: the private network plus a learnable logit offset outside it."""

    def __init__(self, private):
        super().__init__()
        self.net = private
        self.logit_offset = nn.Parameter(torch.zeros(2))

    def forward(self, x):
        return self.net(x) + self.logit_offset


def usage_parameter_outside():
    """Broken: a learnable logit offset outside the module given to make_private, released with it
    and trained by a second, plain SGD after every step (not declared anywhere: true ε = ∞)."""
    setup = _usage_setup()
    released = _WithOffset(setup["model"])
    plain = torch.optim.SGD([released.logit_offset], lr=0.1)
    _chain_after_step(setup["optimizer"], plain.step)
    dp_zero_grad = setup["optimizer"].zero_grad

    def zero_grad(*args, **kwargs):
        plain.zero_grad()
        return dp_zero_grad(*args, **kwargs)

    setup["optimizer"].zero_grad = zero_grad
    setup["model"] = released
    return setup


def usage_non_private_epoch():
    """Broken: the last epoch steps the original (non-private) optimizer on the plain gradient."""
    setup = _usage_setup()
    optimizer, steps_per_epoch = setup["optimizer"], len(setup["data_loader"])
    dp_step, calls = optimizer.step, {"n": 0}

    def step(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] <= steps_per_epoch * (USAGE_EPOCHS - 1):
            return dp_step(*args, **kwargs)
        return optimizer.original_optimizer.step()  # the bug: no clipping, no noise, no accountant

    optimizer.step = step
    return setup


def usage_tenth_q():
    """Broken: the accountant is told the sampling rate of a 10× larger dataset (q/10)."""
    setup = _usage_setup()
    optimizer, engine = setup["optimizer"], setup["privacy_engine"]
    optimizer.attach_step_hook(
        engine.accountant.get_optimizer_hook_fn(sample_rate=setup["data_loader"].sample_rate / 10)
    )
    return setup


def usage_accumulate_poisson_batches():
    """Broken gradient accumulation: every other step is deferred (`signal_skip_step`), so one noise
    covers two separate Poisson batches — a true rate of about 2q, the accountant told q."""
    setup = _usage_setup()
    optimizer = setup["optimizer"]
    dp_step, calls = optimizer.step, {"n": 0}

    def step(*args, **kwargs):
        calls["n"] += 1
        optimizer.signal_skip_step(calls["n"] % 2 == 1)
        return dp_step(*args, **kwargs)

    optimizer.step = step
    return setup


def skip_noise_every(optimizer, every: int = 4):
    """The planted bug of `usage_noise_skipped`, on any Opacus DP optimizer: every `every`-th step()
    clips but adds no noise and tells the accountant nothing (tests plant it in their own loops too)."""
    real, calls = optimizer.pre_step, {"n": 0}

    def pre_step(closure=None):
        calls["n"] += 1
        if calls["n"] % every:
            return real()
        optimizer.clip_and_accumulate()  # the bug: clipped, then stepped without noise or accountant
        for p in optimizer.params:
            p.grad = p.summed_grad.view_as(p) / optimizer.expected_batch_size
        return True

    optimizer.pre_step = pre_step
    return optimizer


def usage_noise_skipped():
    """Broken: every 4th optimizer.step() clips but adds no noise and tells the accountant nothing."""
    setup = _usage_setup()
    skip_noise_every(setup["optimizer"])
    return setup


def usage_shuffled_batches():
    """Broken for the accountant: poisson_sampling=False (fixed shuffled batches), which Opacus's
    accountant does not model (it assumes Poisson sampling)."""
    return _usage_setup(poisson=False)
