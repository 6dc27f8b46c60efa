"""Conformance checks of a step-function DP-SGD implementation: deterministic, seconds, no training.

A black-box canary audit sees only final models, so a bug that leaks "only" ε ≈ 6 where 1 is
claimed (noise std σ instead of σ·C, noise missing on some steps, fixed-size batches) can hide in
the run-to-run noise. These checks instead call the two pieces every DP-SGD step is made of and
test each against what the accountant was told (its CLAIM: σ, q, T, δ, and C):

* `steps`: the number of batches one training draws equals T;
* `sampling_rate`: the mean batch size is q·n (z-test);
* `poisson_sampling`: batch sizes vary like Binomial(n, q) (chi-square test of the variance; a
  shuffled fixed-size batcher has none), with no index twice in a batch;
* `independent_inclusion`: over one training, the number of batches each record joins varies like
  Binomial(T, q) (z-test of its variance with the binomial's fourth moment): shuffled epochs put
  every record in exactly T·q batches (too little), one Poisson batch drawn once and reused at
  every step puts a record in 0 or T (far too much), and the batch sizes alone see neither;
* `noise_std`: with all-zero gradients the output is pure noise; at every step its std lies in
  the chi-square interval around σ·C (Bonferroni over the steps);
* `noise_independence`: noise drawn from two different generators is uncorrelated (a constant
  seed makes it identical);
* `per_example_clipping`: one example with a huge gradient spread over all parameter tensors and
  zeros for the rest of an expected-size batch: the mean output along its direction is ≤ C
  (one-sided z-test against the noise); batch-level, post-noise or per-tensor clipping exceed it.

Protocol (what `--trainer module:object` names): an object with `CLAIM = {noise_multiplier,
sample_rate, steps, delta}`, `max_grad_norm`, `sample_batches(n, rng) -> list of index arrays`
(one per step) and `privatize_gradients(grads, rng, step) -> {name: array}` where `grads` is
{parameter name: (batch, *shape) per-example gradients} and the result is the noisy clipped SUM
(Opacus's layout and meaning: noise std σ·C on the sum). `audit.demos.planted_bugs` implements it.
The family-wise false-alarm rate of all checks together is `alpha` (Bonferroni); each check
reports its measured value, the expected one and its p-value or interval.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

from audit.conformance.opacus_objects import SAMPLING_CHECKS, STEP_CHECKS, sampling_checks
from audit.conformance.opacus_objects import check as _check  # the shared core
from audit.errors import AuditInputError
from audit.machinery.audit_results import ConformanceResult
from audit.machinery.workers import user_code

__all__ = ["CHECKS", "conformance_checks", "conformance_task", "run_conformance"]

CHECKS = ("steps", *SAMPLING_CHECKS, *STEP_CHECKS)
N_RECORDS = 256
SAMPLING_REPEATS = 50
NOISE_DRAWS_PER_STEP = 50
CLIPPING_DRAWS = 4000
HUGE_NORM = 1e6


def _claim_of(recipe) -> tuple[float, float, int, float, float]:
    claim = getattr(recipe, "CLAIM", None)
    if not isinstance(claim, dict) or not {"noise_multiplier", "sample_rate", "steps", "delta"} <= set(claim):
        raise AuditInputError(
            "trainer", "a step-function trainer needs CLAIM = {noise_multiplier, sample_rate, steps, delta}"
        )
    from audit.machinery.input_files import check_number

    where = "trainer: CLAIM"  # validated like any input: no coercion of "4.5", 20.9 steps or δ = True
    sigma = check_number(claim["noise_multiplier"], f"{where}['noise_multiplier']", low=0, low_open=True, high=1e6)
    q = check_number(claim["sample_rate"], f"{where}['sample_rate']", low=0, low_open=True, high=1)
    steps = claim["steps"]
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 10**7:
        raise AuditInputError(f"{where}['steps']", f"expected an integer in [1, 10⁷], got {steps!r}"[:200])
    delta = check_number(claim["delta"], f"{where}['delta']", low=0, low_open=True, high=1, high_open=True)
    C = check_number(getattr(recipe, "max_grad_norm", None), "trainer: max_grad_norm", low=0, low_open=True, high=1e6)
    T = int(steps)
    for name in ("sample_batches", "privatize_gradients"):
        if not callable(getattr(recipe, name, None)):
            raise AuditInputError("trainer", f"a step-function trainer needs a method {name}(...)")
    return sigma, q, T, delta, C


def _privatize(recipe, grads, rng, step) -> np.ndarray:
    out = recipe.privatize_gradients({k: v.copy() for k, v in grads.items()}, rng, step)
    if not isinstance(out, dict) or set(out) != set(grads):
        raise AuditInputError("trainer", f"privatize_gradients must return a dict with keys {sorted(grads)}")
    try:
        flat = np.concatenate([np.asarray(out[k], dtype=np.float64).ravel() for k in grads])
    except (TypeError, ValueError) as exc:
        raise AuditInputError(
            "trainer", f"privatize_gradients returned values that are not arrays of numbers ({str(exc)[:120]})"
        ) from None
    if not np.all(np.isfinite(flat)):  # NaN / inf noise: the trainer's fault, never a crash of the checks
        raise AuditInputError("trainer", f"privatize_gradients returned NaN or infinite values at step {step}")
    return flat


def conformance_checks(
    recipe, *, seed: int = 0, alpha: float = 0.01, n_records: int = N_RECORDS
) -> list[dict[str, Any]]:
    """Run every check of the module docstring on `recipe`; family-wise false-alarm rate `alpha`."""
    sigma, q, T, _, C = _claim_of(recipe)
    a = alpha / len(CHECKS)
    streams = np.random.SeedSequence(int(seed)).spawn(5)
    results: list[dict[str, Any]] = []

    # Sampling: steps, rate, Poisson dispersion, independent inclusion across steps.
    rng = np.random.default_rng(streams[0])
    trainings: list[list[np.ndarray]] = []
    for _ in range(SAMPLING_REPEATS):
        batches = [np.asarray(batch).ravel() for batch in recipe.sample_batches(n_records, rng)]
        joined = np.concatenate(batches).astype(np.int64) if batches else np.zeros(0, np.int64)
        if joined.size and (joined.min() < 0 or joined.max() >= n_records):
            raise AuditInputError(
                "trainer",
                f"sample_batches(n={n_records}, rng) returned an index outside "
                f"[0, {n_records}): {int(joined.min())}..{int(joined.max())}",
            )
        trainings.append(batches)
    counts = [len(batches) for batches in trainings]
    results.append(
        _check(
            "steps",
            all(c == T for c in counts),
            int(max(counts)),
            T,
            f"batches per training over {SAMPLING_REPEATS} draws: {sorted(set(counts))}",
        )
    )
    # Rate, Poisson dispersion and independent inclusion: the same tests as on live Opacus objects.
    results.extend(sampling_checks(trainings, n_records, q, a))

    # Noise: zero gradients, one expected-size batch, every step.
    b = max(1, round(q * n_records))
    zeros = {"weight": np.zeros((b, 8, 4)), "bias": np.zeros((b, 4))}
    rng = np.random.default_rng(streams[1])
    ratios, worst_p = [], 1.0
    per_step_a = a / T
    for step in range(T):
        draws = np.concatenate([_privatize(recipe, zeros, rng, step) for _ in range(NOISE_DRAWS_PER_STEP)])
        N = draws.size
        statistic = float(np.sum(draws**2) / (sigma * C) ** 2)  # ~ χ²(N) when the std is σ·C
        cdf = stats.chi2.cdf(statistic, N)
        worst_p = min(worst_p, 2 * min(cdf, 1 - cdf))
        ratios.append(math.sqrt(statistic / N))
    results.append(
        _check(
            "noise_std",
            worst_p > per_step_a,
            {"min": min(ratios), "max": max(ratios)},
            1.0,
            f"measured std / (σ·C = {sigma * C:g}) over {T} steps × {NOISE_DRAWS_PER_STEP} draws "
            f"(chi-square, Bonferroni over steps); smallest p = {worst_p:.2g}",
            worst_p * T,
        )
    )

    # Independence: the same step with two different generators.
    rng_a, rng_b = np.random.default_rng(streams[2]), np.random.default_rng(streams[3])
    draws_a = np.concatenate([_privatize(recipe, zeros, rng_a, 0) for _ in range(NOISE_DRAWS_PER_STEP)])
    draws_b = np.concatenate([_privatize(recipe, zeros, rng_b, 0) for _ in range(NOISE_DRAWS_PER_STEP)])
    if draws_a.std() == 0 or draws_b.std() == 0:
        r, p_ind = (
            (1.0 if np.array_equal(draws_a, draws_b) else 0.0),
            (0.0 if np.array_equal(draws_a, draws_b) else 1.0),
        )
    else:
        r = float(np.corrcoef(draws_a, draws_b)[0, 1])
        p_ind = 2 * stats.norm.sf(abs(r) * math.sqrt(draws_a.size))
    results.append(
        _check(
            "noise_independence",
            p_ind > a,
            r,
            0.0,
            "correlation of the noise drawn with two different generators (a reused seed gives 1)",
            p_ind,
        )
    )

    # Clipping: one huge example over both tensors, an expected-size batch of zeros otherwise.
    rng = np.random.default_rng(streams[4])
    direction = {"weight": rng.normal(size=(3, 2)), "bias": rng.normal(size=(2,))}
    norm = math.sqrt(sum(float(np.sum(v**2)) for v in direction.values()))
    grads = {k: np.zeros((b, *v.shape)) for k, v in direction.items()}
    for k, v in direction.items():
        grads[k][0] = v / norm * HUGE_NORM * C
    u = np.concatenate([direction[k].ravel() for k in grads]) / norm
    projections = np.array([_privatize(recipe, grads, rng, 0) @ u for _ in range(CLIPPING_DRAWS)])
    mean_proj = float(projections.mean())
    se = float(projections.std(ddof=1) / math.sqrt(CLIPPING_DRAWS)) or 1e-12
    z_clip = (mean_proj - C) / se
    p_clip = float(stats.norm.sf(z_clip))
    results.append(
        _check(
            "per_example_clipping",
            p_clip > a,
            mean_proj,
            C,
            f"mean movement along one example's gradient of norm {HUGE_NORM:g}·C, "
            f"{CLIPPING_DRAWS} draws (one-sided z = {z_clip:.1f} against ≤ C)",
            p_clip,
        )
    )
    return results


def conformance_task(trainer, seed: int, alpha: float) -> list[dict[str, Any]]:
    """A worker task: load the user's step-function trainer and run the checks (user code inside)."""
    if isinstance(trainer, str):
        from audit.machinery.user_code import load_user_function

        with user_code("--trainer", f"module of trainer {trainer}"):
            trainer = load_user_function(trainer, "trainer", require_callable=False)  # an object: CLAIM + methods
    with user_code("--trainer", f"step functions of {trainer!r}"[:120]):
        return conformance_checks(trainer, seed=seed, alpha=alpha)


def run_conformance(
    trainer, *, seed: int = 0, alpha: float = 0.01, timeout: float | None = 600.0, pool=None
) -> dict[str, Any]:
    """`privacy-audit conformance`: the checks in an isolated worker; `verdict` fail if any fails."""
    if not (0 < alpha < 1):
        raise AuditInputError("alpha", f"must be in (0, 1), got {alpha!r}")
    if pool is None:
        from audit.machinery.workers import run_isolated

        checks = run_isolated(
            conformance_task,
            trainer,
            int(seed),
            float(alpha),
            name="--trainer",
            timeout=timeout,
            what=f"trainer {trainer}",
        )
    else:
        (checks,) = pool.map(conformance_task, [(trainer, int(seed), float(alpha))])
    return ConformanceResult.decided(
        "conformance checks of a step-function DP-SGD implementation",
        trainer=trainer if isinstance(trainer, str) else repr(trainer),
        seed=seed,
        alpha=alpha,
        checks=checks,
    ).to_json()
