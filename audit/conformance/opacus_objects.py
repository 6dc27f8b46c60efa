"""Conformance checks run on live Opacus objects (a DPOptimizer, its data loader, its accountant).

What `conformance --factory` runs on the user's setup and `run` on each DP target's own setup
(`object_checks`), with no training on data:

* `noisy_steps`: every call of `optimizer.step()` added noise and told the accountant (a
  `pre_step` that skips the noise on some steps is a failed check, a finding: exit 1);
* `steps`, `accountant_sigma`: after k calls of the optimizer's `step()` the accountant's history
  holds exactly k steps, at the optimizer's σ;
* `sampling_rate`, `poisson_sampling`, `independent_inclusion`: the loader's `batch_sampler` is
  drawn for `SAMPLING_TRAININGS` whole trainings (epochs × one pass, no data loaded); mean batch
  size vs the accountant's q·n (z-test), batch-size variance vs Binomial(n, q) (chi-square), each
  record's batch count over a training vs Binomial(T, q) (`inclusion_check`), no index twice in a batch;
* `noise_std`: all-zero per-sample gradients (an expected-size batch) set as `p.grad_sample`, then
  `optimizer.step()`; the privatised gradient (read in the step hook, times the expected batch size
  for mean reduction) is pure noise, whose std over all coordinates must be σ·C at EVERY step
  (chi-square, Bonferroni over `NOISE_STEPS` steps);
* `noise_independence`: the noise of consecutive steps, and of a second setup built under another
  seed, is uncorrelated (a reused generator seed makes it identical);
* `per_example_clipping`: one row of norm 10⁶·C along a random direction of all parameters, zeros
  for the rest of the batch: the mean movement along it over `CLIPPING_STEPS` steps is ≤ C
  (one-sided z-test; per-tensor, missing or post-noise clipping exceed it).

Family-wise false-alarm rate `alpha` over the statistical checks (Bonferroni over `STATISTICAL`);
the deterministic ones (step counts, σ, duplicates) fail only on an exact mismatch. The checks step
the optimizer: run them on a setup built for them, never on a model being trained.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import stats

from audit.errors import AuditInputError

__all__ = [
    "FACTORY_CHECKS",
    "SAMPLING_CHECKS",
    "STEP_CHECKS",
    "STATISTICAL",
    "Tap",
    "check",
    "inclusion_check",
    "is_ghost",
    "logical_sampler",
    "object_checks",
    "parameter_check",
    "sampling_checks",
]

# The checks both conformance modes run, in order: `sampling_checks`' three, then the noise and clipping checks.
SAMPLING_CHECKS = ("sampling_rate", "poisson_sampling", "independent_inclusion")
STEP_CHECKS = ("noise_std", "noise_independence", "per_example_clipping")
FACTORY_CHECKS = (
    "parameters",
    "one_poisson_batch_per_step",
    "noisy_steps",
    "steps",
    "accountant_sigma",
    *SAMPLING_CHECKS,
    *STEP_CHECKS,
)
STATISTICAL = 6  # checks with a false-alarm rate (Bonferroni divisor)
SAMPLING_TRAININGS = 20
SAMPLING_BATCH_LIMIT = 20_000  # batches drawn in all (a very long training is sampled in part)
NOISE_STEPS = 60
CLIPPING_STEPS = 200
HUGE_NORM = 1e6


def check(name: str, passed: bool, value, expected, detail: str, p_value: float | None = None) -> dict[str, Any]:
    return {
        "check": name,
        "passed": bool(passed),
        "value": value,
        "expected": expected,
        "p_value": None if p_value is None else float(p_value),
        "detail": detail,
    }


def inclusion_check(inclusions: list[tuple[int, np.ndarray]], q: float, a: float) -> dict[str, Any]:
    """Each record's count of batches over one training (t batches) is Binomial(t, q) under
    Poisson sampling, independently across records: Σ (c − t·q)² has mean Σ t·q·(1−q) and, term by
    term, variance μ₄ − σ⁴ with μ₄ = t·q·(1−q)·(1 + 3(t − 2)·q·(1 − q)) (the binomial's fourth
    central moment), so a z-test of the squared deviations holds even where counts are far from
    normal (small t·q). Shuffled epochs give too little spread, a reused batch far too much."""
    observed = expected = variance = 0.0
    for t, c in inclusions:
        pq = q * (1 - q)
        sigma2, mu4 = t * pq, t * pq * (1 + 3 * (t - 2) * pq)
        observed += float(np.sum((c - t * q) ** 2))
        expected += c.size * sigma2
        variance += c.size * max(mu4 - sigma2**2, 0.0)
    if variance > 0:
        z = (observed - expected) / math.sqrt(variance)
        p = float(2 * stats.norm.sf(abs(z)))
    else:  # q = 1 (or 0): every record in every batch (or none), nothing may vary
        z, p = (0.0, 1.0) if observed == 0 else (math.inf, 0.0)
    ratio = observed / expected if expected > 0 else (1.0 if observed == 0 else math.inf)
    return check(
        "independent_inclusion",
        p > a,
        float(ratio),
        1.0,
        f"variance of each record's batch count over one training / Binomial(T, q)'s T·q·(1−q), "
        f"{len(inclusions)} trainings (z = {z:.1f})",
        p,
    )


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
    out = [
        check(
            "sampling_rate",
            p_rate > a,
            float(mean / n_records),
            q,
            f"mean batch {mean:.2f} of n = {n_records} over {sizes.size} batches vs the accountant's q (z = {z:.2f})",
            p_rate,
        )
    ]
    if binom_var > 0:
        statistic = (sizes.size - 1) * sizes.var(ddof=1) / binom_var
        cdf = stats.chi2.cdf(statistic, sizes.size - 1)
        p_disp = float(2 * min(cdf, 1 - cdf))
    else:
        p_disp = 1.0 if sizes.var() == 0 else 0.0
    out.append(
        check(
            "poisson_sampling",
            p_disp > a and duplicates == 0,
            float(sizes.var(ddof=1)),
            binom_var,
            f"batch-size variance vs Binomial(n, q)'s n·q·(1−q); {duplicates} batch(es) with a repeated index",
            p_disp,
        )
    )
    inclusions = [
        (len(t), np.bincount(np.concatenate(t).astype(np.int64) if t else np.zeros(0, np.int64), minlength=n_records))
        for t in trainings
    ]
    out.append(inclusion_check(inclusions, q, a))
    return out


class Tap:
    """The privatised gradient of each step, read in the optimizer's step hook (after noise and
    scaling, before the inner optimizer), in units of the noisy SUM."""

    def __init__(self, optimizer):
        self.optimizer, self.last = optimizer, None
        self.params = [p for p in optimizer.params if p.requires_grad]
        self.calls = self.skipped = self.deferred = 0
        # Ghost clipping keeps no per-sample gradients: its criterion's double backward leaves the
        # clipped SUM in p.grad, which is what its optimizer noises (the rows are summed here).
        self.ghost = is_ghost(optimizer)
        inner = optimizer.step_hook

        def hook(opt):
            mean = getattr(opt, "loss_reduction", "mean") == "mean"
            factor = (
                float(opt.expected_batch_size or 1) * float(getattr(opt, "accumulated_iterations", 1)) if mean else 1.0
            )
            self.last = (
                np.concatenate([p.grad.detach().double().cpu().reshape(-1).numpy() for p in self.params]) * factor
            )
            if inner is not None:
                inner(opt)

        optimizer.step_hook = hook

    def step(self, rows: list) -> np.ndarray:
        """One user optimizer.step() on the given per-sample gradients {param index: (b, *shape)}."""
        self.optimizer.zero_grad()
        for p, g in zip(self.params, rows):
            if self.ghost:
                p.grad = g.sum(0)
            else:
                p.grad_sample = g
        self.last = None
        self.optimizer.step()
        self.calls += 1
        if self.last is None and getattr(self.optimizer, "_is_last_step_skipped", False) and self.deferred < 10**4:
            # The optimizer deferred this batch into its next noisy step on its own (no
            # BatchMemoryManager asked it to: this loop draws no batches): one noise for several
            # batches. Counted for `noisy_steps`; the next call (zero rows) gives the noisy step.
            self.deferred += 1
            return self.step([torch_zeros_like(g) for g in rows])
        if self.last is None:
            # No noisy step (its pre_step skipped the noise and the accountant): a finding, not bad
            # input — counted for the `noisy_steps` check; the missing noise reads as zero.
            self.skipped += 1
            return np.zeros(int(sum(p.numel() for p in self.params)))
        return self.last


def parameter_check(summary: dict[str, Any], steps: int) -> dict[str, Any]:
    """`parameters`: the training probe's parameter ledger (`dp_validation.training_watch`,
    `ParameterLedger.summary()`) after `steps` noisy steps of the setup's whole training: every
    parameter that changed was updated only by the DP optimizer's noisy step; frozen ones, and
    trainable ones in no optimizer that stayed unchanged, are listed."""
    updates = summary["non_private_updates"]
    frozen, unchanged = summary["frozen"], summary["not_privatised_unchanged"]
    listed = (
        f"{len(summary['privatised'])} privatised by the DP optimizer; frozen, unchanged: {', '.join(frozen) or 'none'}"
        + (f"; trainable but in no optimizer, unchanged: {', '.join(unchanged)}" if unchanged else "")
    )
    if updates:
        named = "; ".join(f"{u['parameter']}: {u['why']}" for u in updates)
        detail = (
            f"over one training of the setup ({steps} noisy steps), {len(updates)} parameter(s) were updated by "
            f"something other than the DP optimizer's noisy step — {named} ({listed})"
        )
    else:
        detail = (
            f"over one training of the setup ({steps} noisy steps), every parameter that changed was updated only "
            f"by the DP optimizer's noisy steps ({listed})"
        )
    return check("parameters", not updates, [u["parameter"] for u in updates], [], detail)


def logical_sampler(loader):
    """The Poisson sampler behind `loader`: a DPDataLoader's, or the one a BatchMemoryManager's
    loader splits into physical batches (its `BatchSplittingSampler` keeps it as `.sampler`; drawing
    from the splitter would also signal skipped steps to the optimizer); None for fixed batches."""
    sampler = getattr(loader, "batch_sampler", None)
    for candidate in (sampler, getattr(sampler, "sampler", None)):
        if candidate is not None and type(candidate).__name__ == "UniformWithReplacementSampler":
            return candidate
    return None


def is_ghost(optimizer) -> bool:
    """Opacus's ghost clipping optimizer (`grad_sample_mode="ghost"`): clipping lives in the criterion."""
    return "FastGradientClipping" in type(optimizer).__name__


def torch_zeros_like(g):
    import torch

    return torch.zeros_like(g)


def zero_rows(params, b: int):
    import torch

    return [torch.zeros((b, *p.shape), dtype=p.dtype, device=p.device) for p in params]


def object_checks(
    optimizer,
    loader,
    engine,
    epochs: int,
    *,
    seed: int,
    alpha: float,
    second_optimizer: Callable[[], Any] | None = None,
    guard: Callable[[str], Any] = lambda what: contextlib.nullcontext(),
    field: str = "factory",
) -> list[dict[str, Any]]:
    """Every check of the module docstring on a fresh setup (`optimizer` a DPOptimizer, `loader`
    its data loader, `engine` its PrivacyEngine, trained for `epochs`); `second_optimizer()` builds
    the optimizer of a second setup under another seed (noise independence; without it only
    consecutive steps are compared); `guard(what)` wraps each call into the setup's code (the
    user-code context of `conformance --factory`). Family-wise false-alarm rate `alpha`."""
    import torch

    a = alpha / STATISTICAL
    results: list[dict[str, Any]] = []
    tap = Tap(optimizer)
    params = tap.params
    sigma, C = float(optimizer.noise_multiplier), float(optimizer.max_grad_norm)
    b = max(1, int(optimizer.expected_batch_size or 1))
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 41]))

    with guard("optimizer.step() on all-zero per-sample gradients"):
        noise = [tap.step(zero_rows(params, b)) for _ in range(NOISE_STEPS)]
    d = noise[0].size
    p_steps, ratios = [], []
    for draw in noise:
        statistic = float(np.sum(draw**2) / (sigma * C) ** 2)
        cdf = stats.chi2.cdf(statistic, d)
        p_steps.append(2 * min(cdf, 1 - cdf))
        ratios.append(math.sqrt(statistic / d))
    worst = min(p_steps)
    results.append(
        check(
            "noise_std",
            worst > a / NOISE_STEPS,
            {"min": min(ratios), "max": max(ratios)},
            1.0,
            f"measured std / (σ·C = {sigma * C:g}) of the optimizer on zero gradients, {NOISE_STEPS} "
            f"steps × {d} coordinates (chi-square, Bonferroni over steps); smallest p = {worst:.2g}",
            min(1.0, worst * NOISE_STEPS),
        )
    )

    if not tap.ghost:  # ghost clipping clips in the criterion's backward, which no optimizer step reaches
        direction = rng.normal(size=d)
        direction /= np.linalg.norm(direction)
        rows, start = zero_rows(params, b), 0
        for p, g in zip(params, rows):
            size = p.numel()
            g[0] = torch.as_tensor(direction[start : start + size] * HUGE_NORM * C, dtype=g.dtype).reshape(p.shape)
            start += size
        with guard("optimizer.step() on one huge per-sample gradient"):
            projections = np.array([tap.step([g.clone() for g in rows]) @ direction for _ in range(CLIPPING_STEPS)])
        se = float(projections.std(ddof=1) / math.sqrt(CLIPPING_STEPS)) or 1e-12
        z_clip = (float(projections.mean()) - C) / se
        p_clip = float(stats.norm.sf(z_clip))
        results.append(
            check(
                "per_example_clipping",
                p_clip > a,
                float(projections.mean()),
                C,
                f"mean movement along one example's gradient of norm {HUGE_NORM:g}·C over {CLIPPING_STEPS} "
                f"steps of the optimizer (one-sided z = {z_clip:.1f} against ≤ C)",
                p_clip,
            )
        )

    noisy = tap.calls - tap.skipped - tap.deferred
    if tap.skipped:
        detail = (
            f"calls of optimizer.step() that added noise and told the accountant ({tap.skipped} skipped them: an "
            "update without noise is not private)"
        )
    elif tap.deferred:
        detail = (
            f"calls of optimizer.step() that added noise and told the accountant: {tap.deferred} call(s) deferred "
            "their batch into the next noisy step without a BatchMemoryManager splitting one Poisson batch — one "
            "noise for several batches, a true sampling rate above the accountant's q"
        )
    else:
        detail = "calls of optimizer.step() that added noise and told the accountant"
    results.append(check("noisy_steps", not (tap.skipped or tap.deferred), noisy, tap.calls, detail))
    # Accountant: every step above must be in its history, at the optimizer's σ.
    taken = noisy
    accountant = getattr(engine, "accountant", None)
    history = [tuple(float(v) for v in h) for h in (getattr(accountant, "history", None) or [])]
    told = int(sum(h[2] for h in history))
    results.append(
        check(
            "steps",
            told == taken,
            told,
            taken,
            f"steps in the accountant's history after {taken} calls of optimizer.step()",
        )
    )
    sigmas = sorted({round(h[0], 12) for h in history})
    results.append(
        check(
            "accountant_sigma",
            sigmas == [round(sigma, 12)],
            sigmas,
            sigma,
            "noise multipliers the accountant was told vs the optimizer's",
        )
    )
    rates = sorted({h[1] for h in history})
    q_told = rates[0] if len(rates) == 1 else (float(getattr(loader, "sample_rate", float("nan"))))

    # Sampling: the loader's own batch sampler, whole trainings, no data loaded.
    n = len(loader.dataset)
    sampler = logical_sampler(loader) or getattr(loader, "batch_sampler", None)
    if sampler is None:
        raise AuditInputError(field, "the data loader has no batch_sampler to draw batches from")
    per_training = max(1, len(sampler)) * int(epochs)
    count = max(2, min(SAMPLING_TRAININGS, SAMPLING_BATCH_LIMIT // per_training))
    trainings = []
    with guard("the data loader's batch sampler"):
        for _ in range(count):
            batches = [np.asarray(list(batch), dtype=np.int64) for _ in range(int(epochs)) for batch in sampler]
            trainings.append(batches[:per_training])
    if len(rates) > 1:
        results.append(check("sampling_rate", False, rates, q_told, "the accountant was told several sampling rates"))
    results += sampling_checks(trainings, n, float(q_told), a)

    # Independence: consecutive steps, and a second setup built under another global seed; pooled
    # over steps (Σ ⟨n_t, n'_t⟩ / √(Σ‖n_t‖²·Σ‖n'_t‖²) is ≈ N(0, 1/(steps·d)) for independent noise).
    def pooled(first: list[np.ndarray], second: list[np.ndarray]) -> float:
        num = sum(float(x @ y) for x, y in zip(first, second))
        den = math.sqrt(sum(float(x @ x) for x in first) * sum(float(y @ y) for y in second))
        return num / den if den > 0 else (1.0 if all(np.array_equal(x, y) for x, y in zip(first, second)) else 0.0)

    r_steps = pooled(noise[:-1], noise[1:])
    pairs = 10
    r_runs = 0.0
    if second_optimizer is not None:
        optimizer_2 = second_optimizer()
        tap_2 = Tap(optimizer_2)
        with guard("optimizer.step() of a second setup"):
            other = [
                tap_2.step(zero_rows(tap_2.params, max(1, int(optimizer_2.expected_batch_size or 1))))
                for _ in range(pairs)
            ]
        r_runs = pooled(noise[:pairs], other) if other[0].size == d else 0.0
    z_steps, z_runs = abs(r_steps) * math.sqrt((len(noise) - 1) * d), abs(r_runs) * math.sqrt(pairs * d)
    p_ind = min(1.0, 2 * float(2 * stats.norm.sf(max(z_steps, z_runs))))
    results.append(
        check(
            "noise_independence",
            p_ind > a,
            {"consecutive_steps": r_steps, "two_setups": r_runs},
            0.0,
            f"pooled correlation of the noise of consecutive steps ({len(noise) - 1} pairs) and of two "
            f"setups built under different global seeds ({pairs} steps each; a reused generator seed "
            "gives 1)",
            p_ind,
        )
    )
    order = {name_: i for i, name_ in enumerate(FACTORY_CHECKS)}
    return sorted(results, key=lambda c: order.get(c["check"], 99))
