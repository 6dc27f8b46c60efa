"""`conformance --factory`: the conformance checks through the user's OWN Opacus objects, in seconds.

The step-function checks (`conformance`) need code written to their protocol; a user of Opacus has
a DPOptimizer, a data loader and a PrivacyEngine instead. This module drives those objects
directly, with no training on data (what `--factory module:function` returns, as for
`whitebox-audit`):

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

import math
import random
from typing import Any

import numpy as np
from scipy import stats

from audit.dp_validation.conformance import _check, _inclusion_check
from audit.dp_validation.whitebox_audit import _unpack_setup
from audit.errors import AuditInputError
from audit.machinery.workers import run_isolated, user_code

__all__ = ["FACTORY_CHECKS", "opacus_conformance_task", "run_factory_conformance", "sampling_checks"]

FACTORY_CHECKS = ("steps", "accountant_sigma", "sampling_rate", "poisson_sampling", "independent_inclusion",
                  "noise_std", "noise_independence", "per_example_clipping")
STATISTICAL = 6  # checks with a false-alarm rate (Bonferroni divisor)
SAMPLING_TRAININGS = 20
SAMPLING_BATCH_LIMIT = 20_000  # batches drawn in all (a very long training is sampled in part)
NOISE_STEPS = 60
CLIPPING_STEPS = 200
HUGE_NORM = 1e6


def sampling_checks(trainings: list[list[np.ndarray]], n_records: int, q: float, a: float) -> list[dict[str, Any]]:
    """Rate, Poisson dispersion and independent inclusion of `trainings` (lists of index arrays)."""
    sizes = np.asarray([b.size for t in trainings for b in t], dtype=float)
    duplicates = sum(int(b.size != np.unique(b).size) for t in trainings for b in t)
    mean, binom_var = sizes.mean(), n_records * q * (1 - q)
    if binom_var > 0:
        z = (mean - n_records * q) / math.sqrt(binom_var / sizes.size)
    else:
        z = 0.0 if mean == n_records * q else math.inf
    p_rate = float(2 * stats.norm.sf(abs(z)))
    out = [_check("sampling_rate", p_rate > a, float(mean / n_records), q,
                  f"mean batch {mean:.2f} of n = {n_records} over {sizes.size} batches vs the accountant's q "
                  f"(z = {z:.2f})", p_rate)]
    if binom_var > 0:
        statistic = (sizes.size - 1) * sizes.var(ddof=1) / binom_var
        cdf = stats.chi2.cdf(statistic, sizes.size - 1)
        p_disp = float(2 * min(cdf, 1 - cdf))
    else:
        p_disp = 1.0 if sizes.var() == 0 else 0.0
    out.append(_check("poisson_sampling", p_disp > a and duplicates == 0, float(sizes.var(ddof=1)), binom_var,
                      f"batch-size variance vs Binomial(n, q)'s n·q·(1−q); {duplicates} batch(es) with a repeated index",
                      p_disp))
    inclusions = [(len(t), np.bincount(np.concatenate(t).astype(np.int64) if t else np.zeros(0, np.int64),
                                       minlength=n_records)) for t in trainings]
    out.append(_inclusion_check(inclusions, q, a))
    return out


class _Tap:
    """The privatised gradient of each step, read in the optimizer's step hook (after noise and
    scaling, before the inner optimizer), in units of the noisy SUM."""

    def __init__(self, optimizer):
        self.optimizer, self.last = optimizer, None
        self.params = [p for p in optimizer.params if p.requires_grad]
        inner = optimizer.step_hook

        def hook(opt):
            mean = getattr(opt, "loss_reduction", "mean") == "mean"
            factor = float(opt.expected_batch_size or 1) * float(getattr(opt, "accumulated_iterations", 1)) if mean else 1.0
            self.last = np.concatenate([p.grad.detach().double().cpu().reshape(-1).numpy() for p in self.params]) * factor
            if inner is not None:
                inner(opt)

        optimizer.step_hook = hook

    def step(self, rows: list) -> np.ndarray:
        """One user optimizer.step() on the given per-sample gradients {param index: (b, *shape)}."""
        self.optimizer.zero_grad()
        for p, g in zip(self.params, rows):
            p.grad_sample = g
        self.last = None
        self.optimizer.step()
        if self.last is None:
            raise AuditInputError("--factory", "optimizer.step() added no noise step (its pre_step skipped it): "
                                  "conformance --factory needs one noisy step per call")
        return self.last


def _zeros(params, b: int):
    import torch

    return [torch.zeros((b, *p.shape), dtype=p.dtype, device=p.device) for p in params]


def _build(function, name: str, seed: int):
    import torch

    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)
    with user_code(name):
        return _unpack_setup(function(), name)


def opacus_conformance_task(factory: str, seed: int, alpha: float) -> list[dict[str, Any]]:
    """A worker task: every check of the module docstring on fresh setups from the user's factory."""
    import warnings

    import torch

    from audit.machinery.user_code import load_user_function

    warnings.filterwarnings("ignore", message="divide by zero encountered in log", module=r"opacus\.")
    name = f"--factory {factory}"
    with user_code(name, "module"):
        function = load_user_function(factory, "--factory")
    a = alpha / STATISTICAL
    results: list[dict[str, Any]] = []
    model, optimizer, loader, engine, epochs, _ = _build(function, name, seed)
    tap = _Tap(optimizer)
    params = tap.params
    sigma, C = float(optimizer.noise_multiplier), float(optimizer.max_grad_norm)
    b = max(1, int(optimizer.expected_batch_size or 1))
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 41]))

    with user_code(name, "optimizer.step() on all-zero per-sample gradients"):
        noise = [tap.step(_zeros(params, b)) for _ in range(NOISE_STEPS)]
    d = noise[0].size
    p_steps, ratios = [], []
    for draw in noise:
        statistic = float(np.sum(draw**2) / (sigma * C) ** 2)
        cdf = stats.chi2.cdf(statistic, d)
        p_steps.append(2 * min(cdf, 1 - cdf))
        ratios.append(math.sqrt(statistic / d))
    worst = min(p_steps)
    results.append(_check("noise_std", worst > a / NOISE_STEPS, {"min": min(ratios), "max": max(ratios)}, 1.0,
                          f"measured std / (σ·C = {sigma * C:g}) of the user's optimizer on zero gradients, {NOISE_STEPS} "
                          f"steps × {d} coordinates (chi-square, Bonferroni over steps); smallest p = {worst:.2g}",
                          min(1.0, worst * NOISE_STEPS)))

    direction = rng.normal(size=d)
    direction /= np.linalg.norm(direction)
    rows, start = _zeros(params, b), 0
    for p, g in zip(params, rows):
        size = p.numel()
        g[0] = torch.as_tensor(direction[start:start + size] * HUGE_NORM * C, dtype=g.dtype).reshape(p.shape)
        start += size
    with user_code(name, "optimizer.step() on one huge per-sample gradient"):
        projections = np.array([tap.step([g.clone() for g in rows]) @ direction for _ in range(CLIPPING_STEPS)])
    se = float(projections.std(ddof=1) / math.sqrt(CLIPPING_STEPS)) or 1e-12
    z_clip = (float(projections.mean()) - C) / se
    p_clip = float(stats.norm.sf(z_clip))
    results.append(_check("per_example_clipping", p_clip > a, float(projections.mean()), C,
                          f"mean movement along one example's gradient of norm {HUGE_NORM:g}·C over {CLIPPING_STEPS} "
                          f"steps of the user's optimizer (one-sided z = {z_clip:.1f} against ≤ C)", p_clip))

    # Accountant: every step above must be in its history, at the optimizer's σ.
    taken = NOISE_STEPS + CLIPPING_STEPS
    accountant = getattr(engine, "accountant", None)
    history = [tuple(float(v) for v in h) for h in (getattr(accountant, "history", None) or [])]
    told = int(sum(h[2] for h in history))
    results.append(_check("steps", told == taken, told, taken,
                          f"steps in the accountant's history after {taken} calls of optimizer.step()"))
    sigmas = sorted({round(h[0], 12) for h in history})
    results.append(_check("accountant_sigma", sigmas == [round(sigma, 12)], sigmas, sigma,
                          "noise multipliers the accountant was told vs the optimizer's"))
    rates = sorted({h[1] for h in history})
    q_told = rates[0] if len(rates) == 1 else (float(getattr(loader, "sample_rate", float("nan"))))

    # Sampling: the loader's own batch sampler, whole trainings, no data loaded.
    n = len(loader.dataset)
    sampler = getattr(loader, "batch_sampler", None)
    if sampler is None:
        raise AuditInputError("--factory", "the data loader has no batch_sampler to draw batches from")
    per_training = max(1, len(sampler)) * int(epochs)
    count = max(2, min(SAMPLING_TRAININGS, SAMPLING_BATCH_LIMIT // per_training))
    trainings = []
    with user_code(name, "the data loader's batch sampler"):
        for _ in range(count):
            batches = [np.asarray(list(batch), dtype=np.int64) for _ in range(int(epochs)) for batch in sampler]
            trainings.append(batches[:per_training])
    if len(rates) > 1:
        results.append(_check("sampling_rate", False, rates, q_told, "the accountant was told several sampling rates"))
    results += sampling_checks(trainings, n, float(q_told), a)
    # Independence: consecutive steps, and a second setup built under another global seed; pooled
    # over steps (Σ ⟨n_t, n'_t⟩ / √(Σ‖n_t‖²·Σ‖n'_t‖²) is ≈ N(0, 1/(steps·d)) for independent noise).
    def pooled(first: list[np.ndarray], second: list[np.ndarray]) -> float:
        num = sum(float(x @ y) for x, y in zip(first, second))
        den = math.sqrt(sum(float(x @ x) for x in first) * sum(float(y @ y) for y in second))
        return num / den if den > 0 else (1.0 if all(np.array_equal(x, y) for x, y in zip(first, second)) else 0.0)

    r_steps = pooled(noise[:-1], noise[1:])
    _, optimizer_2, _, _, _, _ = _build(function, name, seed + 1)
    tap_2 = _Tap(optimizer_2)
    pairs = 10
    with user_code(name, "optimizer.step() of a second setup"):
        other = [tap_2.step(_zeros(tap_2.params, max(1, int(optimizer_2.expected_batch_size or 1)))) for _ in range(pairs)]
    r_runs = pooled(noise[:pairs], other) if other[0].size == d else 0.0
    z_steps, z_runs = abs(r_steps) * math.sqrt((len(noise) - 1) * d), abs(r_runs) * math.sqrt(pairs * d)
    p_ind = min(1.0, 2 * float(2 * stats.norm.sf(max(z_steps, z_runs))))
    results.append(_check("noise_independence", p_ind > a, {"consecutive_steps": r_steps, "two_setups": r_runs}, 0.0,
                          f"pooled correlation of the noise of consecutive steps ({len(noise) - 1} pairs) and of two "
                          f"setups built under different global seeds ({pairs} steps each; a reused generator seed "
                          "gives 1)", p_ind))
    order = {name_: i for i, name_ in enumerate(FACTORY_CHECKS)}
    return sorted(results, key=lambda c: order.get(c["check"], 99))


def run_factory_conformance(factory: str, *, seed: int = 0, alpha: float = 0.01, timeout: float | None = 600.0
                            ) -> dict[str, Any]:
    """`privacy-audit conformance --factory`: the checks in an isolated worker; `verdict` fail if any fails."""
    from audit.machinery.user_code import check_spec

    if not (0 < alpha < 1):
        raise AuditInputError("--alpha", f"must be in (0, 1), got {alpha!r}")
    check_spec(factory, "--factory")
    checks = run_isolated(opacus_conformance_task, factory, int(seed), float(alpha), name=f"--factory {factory}",
                          timeout=timeout, what=f"factory {factory}")
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
            "status": "fail" if failed else "pass", "passed": not failed, "decided_by": "built-in checks",
            "reasons": [f"{c['check']} failed: {c['detail']} (measured {c['value']}, expected {c['expected']})"
                        for c in failed] or [f"all {len(checks)} checks passed (family-wise α = {alpha:g})"],
        },
    }
