"""Planted bugs in real Opacus training setups (`--factory` protocol), for the one-run suite.

Each factory returns `targets.opacus_setups.tabular_mlp_setup(...)` (an MLP on the default table,
made private by Opacus, with a `test_loader` and a step count) and plants at most one slip, the
Opacus form of the step-function suite's classes (`audit.demos.planted_bugs`):

| name | class | what the code does |
|---|---|---|
| per_layer_clip | clipping wrong | clips each parameter tensor to C (total norm up to C·√tensors) |
| noise_without_c | noise scale wrong | noise std σ instead of σ·C (C = 2) |
| noise_missing_steps | noise missing | noise only on every 4th step |
| shuffled_batches | sampling not Poisson | `poisson_sampling=False`: fixed-size shuffled batches |
| accountant_half_q | accountant wrong q | the accountant is told q/2 |
| accountant_half_steps | accountant wrong T | the accountant records every other step |
| fixed_noise_seed | reused noise seed | the noise generator is seeded with a constant |

`CORRECT_EPSILONS` × seeds give correct setups (σ from Opacus's PRV accountant for the target ε).
`SIZE` ("tiny" for tests; "real" for the benchmark: 16 000 rows at batch 256 (q 0.02, T 200),
one plain run ≈ 15–16 s of CPU single-threaded as the audit's workers train, i.e. ≥ 10 s of wall
time on the idle 2-core machine (docs/one-run-audits.md); "full", 20 000 rows for 5 epochs) comes
from the environment variable PRIVACY_AUDIT_BUG_SIZE, read when a factory is called (worker
processes inherit it).
"""

from __future__ import annotations

import os
import types

import torch

from targets.opacus_setups import tabular_mlp_setup

SIZES = {
    "tiny": {"rows": 400, "hidden": (32,), "batch": 40, "epochs": 2},
    "real": {"rows": 16000, "hidden": (256, 256), "batch": 256, "epochs": 4},
    "full": {"rows": 20000, "hidden": (256, 256), "batch": 256, "epochs": 5},
}
MAX_GRAD_NORM = 2.0
BUG_NOISE_MULTIPLIER = 1.0
CORRECT_EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
DELTA = 1e-5


def _size() -> dict:
    return SIZES[os.environ.get("PRIVACY_AUDIT_BUG_SIZE", "tiny")]


def _spec(noise_multiplier: float, seed: int = 0) -> dict:
    size = _size()
    n_train = size["rows"] - int(round(0.2 * size["rows"]))
    q = size["batch"] / n_train
    steps = size["epochs"] * int(1 / q)
    return {
        "noise_multiplier": noise_multiplier,
        "sample_rate": q,
        "steps": steps,
        "max_grad_norm": MAX_GRAD_NORM,
        "rows": size["rows"],
        "hidden": size["hidden"],
        "seed": seed,
    }


def _setup(noise_multiplier: float = BUG_NOISE_MULTIPLIER, seed: int = 0, **kwargs) -> dict:
    return tabular_mlp_setup(**_spec(noise_multiplier, seed), **kwargs)


def correct_sigma(epsilon: float) -> float:
    from targets.opacus_setups import noise_multiplier_for

    spec = _spec(1.0)
    return noise_multiplier_for(epsilon, DELTA, spec["sample_rate"], "prv", steps=spec["steps"])


def correct(epsilon: float, seed: int):
    """A zero-argument factory of a correct setup at `epsilon` (σ calibrated), data and weights from `seed`."""

    def factory():
        return _setup(correct_sigma(epsilon), seed)

    return factory


def correct_baseline():
    return _setup()


# -- the bugs ----------------------------------------------------------------------------------


def _clip_per_tensor(self):
    for p in self.params:
        g = self._get_flat_grad_sample(p)
        norms = g.reshape(len(g), -1).norm(2, dim=-1)
        factor = (self.max_grad_norm / (norms + 1e-6)).clamp(max=1.0)
        grad = torch.einsum("i,i...", factor, g)
        p.summed_grad = grad if p.summed_grad is None else p.summed_grad + grad


def per_layer_clip():
    setup = _setup()
    setup["optimizer"].clip_and_accumulate = types.MethodType(_clip_per_tensor, setup["optimizer"])
    return setup


def _noise_std(std_of):
    def add_noise(self):
        for p in self.params:
            std = std_of(self)
            noise = torch.normal(0.0, std, size=p.summed_grad.shape) if std > 0 else torch.zeros_like(p.summed_grad)
            p.grad = (p.summed_grad + noise).view_as(p)
        self._bug_calls = getattr(self, "_bug_calls", 0) + 1

    return add_noise


def noise_without_c():
    setup = _setup()
    opt = setup["optimizer"]
    opt.add_noise = types.MethodType(_noise_std(lambda self: self.noise_multiplier), opt)
    return setup


def noise_missing_steps():
    setup = _setup()
    opt = setup["optimizer"]
    opt.add_noise = types.MethodType(
        _noise_std(
            lambda self: self.noise_multiplier * self.max_grad_norm if getattr(self, "_bug_calls", 0) % 4 == 0 else 0.0
        ),
        opt,
    )
    return setup


def shuffled_batches():
    def make_private(engine, model, optimizer, loader):
        return engine.make_private(
            module=model,
            optimizer=optimizer,
            data_loader=loader,
            noise_multiplier=BUG_NOISE_MULTIPLIER,
            max_grad_norm=MAX_GRAD_NORM,
            poisson_sampling=False,
        )

    return _setup(make_private=make_private)


def _rewire_accountant(setup, rate_factor: float = 1.0, every: int = 1):
    opt, engine = setup["optimizer"], setup["privacy_engine"]
    q = setup["data_loader"].sample_rate
    calls = {"n": 0}

    def hook(optimizer):
        calls["n"] += 1
        if calls["n"] % every == 0:
            engine.accountant.step(noise_multiplier=optimizer.noise_multiplier, sample_rate=q * rate_factor)

    opt.attach_step_hook(hook)
    return setup


def accountant_half_q():
    return _rewire_accountant(_setup(), rate_factor=0.5)


def accountant_half_steps():
    return _rewire_accountant(_setup(), every=2)


def fixed_noise_seed():
    setup = _setup()
    setup["optimizer"].generator = torch.Generator().manual_seed(1234)
    return setup


BUGS = (
    "per_layer_clip",
    "noise_without_c",
    "noise_missing_steps",
    "shuffled_batches",
    "accountant_half_q",
    "accountant_half_steps",
    "fixed_noise_seed",
)


def _register_correct() -> None:
    for eps in CORRECT_EPSILONS:
        for seed in range(4):
            globals()[f"correct_eps_{str(eps).replace('.', '_')}_seed_{seed}"] = correct(eps, seed)


_register_correct()
CORRECT = tuple(f"correct_eps_{str(e).replace('.', '_')}_seed_{s}" for e in CORRECT_EPSILONS for s in range(4))
