"""`conformance --factory`: the conformance checks through the user's OWN Opacus objects, in seconds.

The step-function checks (`conformance`) need code written to their protocol; a user of Opacus has
a DPOptimizer, a data loader and a PrivacyEngine instead. This module drives those objects
directly, with no training on data (what `--factory module:function` returns, as for
`whitebox-audit`):

* `parameters`: every trainable parameter of the released model (and the factory's
  `extra_parameters`, released tensors outside it) is privatised by the DP optimizer; frozen
  ones are listed;
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
    object_checks,
    parameter_check,
    sampling_checks,
)
from audit.dp_validation.whitebox_audit import _unpack_setup
from audit.errors import AuditInputError
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


def opacus_conformance_task(factory: str, seed: int, alpha: float) -> list[dict[str, Any]]:
    """A worker task: every check of the module docstring on fresh setups from the user's factory."""
    import warnings

    from audit.machinery.user_code import load_user_function

    warnings.filterwarnings("ignore", message="divide by zero encountered in log", module=r"opacus\.")
    name = f"--factory {factory}"
    with user_code(name, "module"):
        function = load_user_function(factory, "--factory")
    torch_seed(seed)
    with user_code(name):
        made = function()
    model, optimizer, loader, engine, epochs, _ = _unpack_setup(made, name)
    extra = made.get("extra_parameters") if isinstance(made, dict) else None
    with user_code(name, "the model's parameters"):
        covered = parameter_check(model, optimizer, extra)
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
    return [covered, *checks]


def run_factory_conformance(
    factory: str, *, seed: int = 0, alpha: float = 0.01, timeout: float | None = 600.0
) -> dict[str, Any]:
    """`privacy-audit conformance --factory`: the checks in an isolated worker; `verdict` fail if any fails."""
    from audit.machinery.user_code import check_spec

    if not (0 < alpha < 1):
        raise AuditInputError("--alpha", f"must be in (0, 1), got {alpha!r}")
    check_spec(factory, "--factory")
    checks = run_isolated(
        opacus_conformance_task,
        factory,
        int(seed),
        float(alpha),
        name=f"--factory {factory}",
        timeout=timeout,
        what=f"factory {factory}",
    )
    failed = [c for c in checks if not c["passed"]]
    return {
        "audit": "conformance checks through the user's own Opacus objects (DPOptimizer, data loader, accountant)",
        "trainer": f"--factory {factory}",
        "factory": factory,
        "seed": int(seed),
        "alpha": float(alpha),
        "checks": checks,
        "passed": not failed,
        "violation": bool(failed),
        "verdict": {
            "status": "fail" if failed else "pass",
            "passed": not failed,
            "decided_by": "built-in checks",
            "reasons": [
                f"{c['check']} failed: {c['detail']} (measured {c['value']}, expected {c['expected']})" for c in failed
            ]
            or [f"all {len(checks)} checks passed (family-wise α = {alpha:g})"],
        },
    }
