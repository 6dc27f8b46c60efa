"""`conformance --factory`: the conformance checks through the user's OWN Opacus objects, in seconds.

The step-function checks (`conformance`) need code written to their protocol; a user of Opacus has
a DPOptimizer, a data loader and a PrivacyEngine instead. This module drives those objects
directly (what `--factory module:function` returns, as for `whitebox-audit`); only the training
probe trains, once:

* `parameters`, `one_poisson_batch_per_step` (`training_probe`): one whole training of a fresh
  setup in the tool's loop (no canaries, the loop of `whitebox-audit --mode one-run`) under
  `training_watch.TrainingWatch`: every parameter of the released model and every tensor, module
  or optimizer the factory returned (declared in `extra_parameters` or not) is privatised by the
  DP optimizer or unchanged — a parameter stepped by a second optimizer, by the inner optimizer
  without a noisy step (a non-private epoch) or edited in place fails, named; frozen ones are
  listed; and each noisy step privatised one Poisson batch (real rows vs q·n);
* `noisy_steps`: every call of `optimizer.step()` added noise and told the accountant (a
  `pre_step` that skips the noise on some steps is a failed check, a finding: exit 1);
* `steps`, `accountant_sigma`: after k calls of the user's `optimizer.step()` the accountant's
  history holds exactly k steps, at the optimizer's σ;
* `sampling_rate`, `poisson_sampling`, `independent_inclusion`: the user's loader's
  `batch_sampler` is drawn for `SAMPLING_TRAININGS` whole trainings (epochs × one pass, no data
  loaded); mean batch size vs the accountant's q·n (z-test), batch-size variance vs
  Binomial(n, q) (chi-square), each record's batch count over a training vs Binomial(T, q)
  (`conformance._inclusion_check`), no index twice in a batch;
* `noise_std`: all-zero per-sample gradients (an expected-size batch) set as `p.grad_sample`,
  then the user's `optimizer.step()`; the privatised gradient (read in the step hook, times the
  expected batch size for mean reduction) is pure noise, whose std over all coordinates must be
  σ·C at EVERY step (chi-square, Bonferroni over `NOISE_STEPS` steps: noise missing on some steps,
  or scaled wrongly, shows);
* `noise_independence`: the noise of consecutive steps, and of two setups the factory built under
  different global seeds, is uncorrelated (a reused generator seed makes it identical);
* `per_example_clipping`: one row of norm 10⁶·C along a random direction of all parameters, zeros
  for the rest of the batch: the mean movement along it over `CLIPPING_STEPS` steps is ≤ C
  (one-sided z-test; per-tensor, missing or post-noise clipping exceed it).

Family-wise false-alarm rate `alpha` over the statistical checks (Bonferroni); the deterministic
ones (step counts, σ, duplicates) fail only on an exact mismatch.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from audit.conformance.opacus_objects import (  # noqa: F401 (the shared core; names kept for callers)
    CLIPPING_STEPS,
    FACTORY_CHECKS,
    HUGE_NORM,
    NOISE_STEPS,
    SAMPLING_BATCH_LIMIT,
    SAMPLING_TRAININGS,
    STATISTICAL,
    check,
    is_ghost,
    logical_sampler,
    object_checks,
    parameter_check,
    sampling_checks,
)
from audit.dp_validation.whitebox_audit import _unpack_setup
from audit.errors import AuditInputError
from audit.machinery.audit_results import ConformanceResult
from audit.machinery.workers import run_isolated, user_code

__all__ = ["FACTORY_CHECKS", "opacus_conformance_task", "run_factory_conformance", "sampling_checks"]


def torch_seed(seed: int) -> None:
    import torch

    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


def _build(function, name: str, seed: int):
    torch_seed(seed)
    with user_code(name):
        return _unpack_setup(function(), name)


def training_probe(made, name: str, seed: int) -> list[dict[str, Any]]:
    """`parameters` and `one_poisson_batch_per_step`: one whole training of a fresh setup in the
    tool's loop (`one_run_whitebox.train_loop`, no canaries) under `training_watch.TrainingWatch`:
    every parameter the setup holds — the model's and every tensor, module or optimizer the
    factory returned, declared or not — is either privatised or unchanged, and each noisy step
    privatised one Poisson batch."""
    from audit.dp_validation.one_run_whitebox import train_loop
    from audit.dp_validation.training_watch import (
        ParameterLedger,
        TrainingWatch,
        dataset_size,
        released_parameters,
        rows_check,
    )

    model, optimizer, loader, _, epochs, loss = _unpack_setup(made, name)
    max_steps = made.get("steps") if isinstance(made, dict) else None
    with user_code(name, "the training probe (one training in the tool's loop)"):
        ledger = ParameterLedger(optimizer, model, released_parameters(made, model, optimizer))
        watch = TrainingWatch(optimizer, ledger).start()
        try:
            train_loop(model, optimizer, loader, epochs, loss, max_steps=max_steps)
        finally:
            watch.stop()
        ledger.finish()
    poisson = logical_sampler(loader)
    q = float(poisson.sample_rate if poisson is not None else getattr(loader, "sample_rate", 0) or 0)
    settings = {"rows_per_noisy_step": watch.rows_mean(), "sample_rate": q, "steps": watch.noisy_steps}
    n = dataset_size(loader)
    rows = rows_check(settings, n, name)
    if rows:
        mean = float(settings["rows_per_noisy_step"] or 0.0)
        rows_row = check(
            "one_poisson_batch_per_step",
            not rows[0].failed,
            mean,
            (n or 0) * q,
            "real rows per noisy step over the training probe vs q·n: " + rows[0].message,
        )
    else:
        rows_row = check(
            "one_poisson_batch_per_step",
            True,
            None,
            None,
            "not measured: the probe saw no per-sample rows (ghost clipping), no noisy step or no sized dataset",
        )
    return [parameter_check(ledger.summary(), watch.noisy_steps), rows_row]


def opacus_conformance_task(factory: str, seed: int, alpha: float) -> dict[str, Any]:
    """A worker task: every check of the module docstring on fresh setups from the user's factory:
    {"checks": [...], "not_checked": [{"check", "why"}]} (what these setups cannot reach)."""
    import warnings

    from audit.machinery.user_code import load_user_function

    warnings.filterwarnings("ignore", message="divide by zero encountered in log", module=r"opacus\.")
    name = f"--factory {factory}"
    with user_code(name, "module"):
        function = load_user_function(factory, "factory")
    torch_seed(seed + 2)
    with user_code(name):
        probed = training_probe(function(), name, seed)
    torch_seed(seed)
    with user_code(name):
        made = function()
    _, optimizer, loader, engine, epochs, _ = _unpack_setup(made, name)
    checks = object_checks(
        optimizer,
        loader,
        engine,
        epochs,
        seed=seed,
        alpha=alpha,
        second_optimizer=lambda: _build(function, name, seed + 1)[1],
        guard=lambda what: user_code(name, what),
    )
    not_checked = (
        [
            {
                "check": "per_example_clipping",
                "why": "ghost clipping clips inside its criterion's double backward, which stepping the optimizer "
                "does not reach; the one-run audit's canaries go through it (whitebox-audit --mode one-run)",
            }
        ]
        if is_ghost(optimizer)
        else []
    )
    return {"checks": [*probed, *checks], "not_checked": not_checked}


def run_factory_conformance(
    factory: str, *, seed: int = 0, alpha: float = 0.01, timeout: float | None = 600.0
) -> dict[str, Any]:
    """`privacy-audit conformance --factory`: the checks in an isolated worker; `verdict` fail if any fails."""
    from audit.machinery.user_code import check_spec

    if not (0 < alpha < 1):
        raise AuditInputError("alpha", f"must be in (0, 1), got {alpha!r}")
    check_spec(factory, "factory")
    found = run_isolated(
        opacus_conformance_task,
        factory,
        int(seed),
        float(alpha),
        name=f"--factory {factory}",
        timeout=timeout,
        what=f"factory {factory}",
    )
    return ConformanceResult.decided(
        "conformance checks through the user's own Opacus objects (DPOptimizer, data loader, accountant)",
        trainer=f"--factory {factory}",
        seed=seed,
        alpha=alpha,
        checks=found["checks"],
        factory=factory,
        not_checked=found["not_checked"],
    ).to_json()
