"""The planted-bug suite through the DEFAULT `canary-audit` (black-box) and `conformance` checks.

    python benchmarks/bench_planted_bugs.py [--seeds 4] [--bug-seeds 1] [--models N] [--workers N] [--only NAME,...] [--opacus]

For every planted bug of `audit.demos.planted_bugs` (seeds 0 .. `--bug-seeds` − 1) and every correct recipe there (ε 0.5
to 8, `--seeds` seeds each: 6 × 4 = 24 audits by default): the default black-box canary audit
(`run_canary_audit` with its defaults: profile mode, 48000 independent runs + 12000 pilot runs,
tested against the claim's trade-off curve) and the conformance checks. `--opacus` adds the Opacus
trainers of `audit.demos.dp_trainers` (slow: ~40 ms per run). Prints one Markdown table row per
audit: the bug's true ε where an accountant can state it, the claim, the verdict, the p-value of
the exact curve test, the attack's error rates against the claimed floor, the (ε, δ) bound and
the one-run bound of the same runs, wall seconds. Then the canary design the pilot chose for each
audit (with every design's pilot AUC and anticipated margin below the claim's curve) and the final-model analysis of
`shuffled_batches` (why no final-model audit can flag it). Wall time is on whatever machine runs
it (say which, and how loaded, when you quote it).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.demos import planted_bugs  # noqa: E402
from audit.dp_validation.canary_audit import run_canary_audit  # noqa: E402
from audit.dp_validation.conformance import run_conformance  # noqa: E402
from audit.machinery.workers import WorkerPool, default_workers  # noqa: E402
from audit.statistics.accountants import DPSGDEvent, epsilon_pld  # noqa: E402
from audit.statistics.tradeoff_curves import (  # noqa: E402
    SELECTION_FPR_RANGE,
    curve_slope,
    dpsgd_privacy_profile,
    gdp_tradeoff,
    tradeoff_from_profile,
)

SIGMA, Q, T, DELTA = planted_bugs.NOISE_MULTIPLIER, planted_bugs.SAMPLE_RATE, planted_bugs.STEPS, planted_bugs.DELTA


def true_epsilon(name: str) -> str:
    """The bug's ε at δ 1e-5 where an accountant can state it (PLD), else why not."""
    exact = {
        "per_layer_clip": DPSGDEvent(SIGMA / math.sqrt(2), Q, T),  # sensitivity √2·C, noise σ·C
        "sigma_not_sigma_c": DPSGDEvent(SIGMA / 4.0, Q, T),  # noise σ for sensitivity C = 4
        "wrong_steps": DPSGDEvent(SIGMA, Q, 4 * T),
        # In all T steps with probability q, else in none: the T noisy sums of the canary's steps
        # are one Gaussian of μ = √T/σ, subsampled once.
        "batch_reused": DPSGDEvent(SIGMA / math.sqrt(T), Q, 1),
    }
    if name in exact:
        return f"{epsilon_pld(exact[name], DELTA):.2f}"
    return {
        "batch_clip": "≫ 100",
        "clip_after_noise": "∞ (unclipped)",
        "noise_divided_twice": "≈ 1400",
        "noise_missing_steps": "∞ (noiseless steps)",
        "fixed_noise_seed": "∞ (same noise)",
        "shuffled_batches": "no Poisson accountant applies",
    }.get(
        name,
        f"{epsilon_pld(DPSGDEvent(planted_bugs.CORRECT[name].noise_multiplier, Q, T), DELTA):.2f}"
        if name in planted_bugs.CORRECT
        else "?",
    )


def shuffled_batches_analysis() -> str:
    """Final model of shuffled batches: the canary is in exactly T·q batches, so the worst-case
    observation is N(T·q·C, T·σ²C²) — μ-GDP with μ = Tq/(σ√T) — compared with the claim's curve."""
    mu = T * Q / (SIGMA * math.sqrt(T))
    alpha = np.linspace(1e-6, 1 - 1e-6, 100001)
    gap = tradeoff_from_profile(dpsgd_privacy_profile(SIGMA, Q, T), alpha) - gdp_tradeoff(mu, alpha)
    return (
        f"shuffled_batches, final model: worst-case observation N({T * Q:g}·C, {T}·σ²C²) is μ-GDP with μ = {mu:.3f}; "
        f"max over α of f_claim(α) − G_μ(α) = {gap.max():.2g} (≤ 0: its curve never lies below the claim's, "
        "so no final-model audit can refute the claim; the conformance check of the batch sizes does)"
    )


def batch_reused_analysis(runs_per_side: int = 24000) -> str:
    """Batch reused at every step: the canary is in all T steps with probability q, else in none, so
    even with every iterate seen its curve is one subsampled Gaussian of μ = √T/σ — the bug's true
    curve. How far it lies below the claim's, and where, against the audit's sampling error there."""
    alpha = np.linspace(1e-4, 1 - 1e-4, 20001)
    claim = tradeoff_from_profile(dpsgd_privacy_profile(SIGMA, Q, T), alpha)
    bug = tradeoff_from_profile(dpsgd_privacy_profile(SIGMA / math.sqrt(T), Q, 1), alpha)
    gap = claim - bug
    i = int(np.argmax(gap))
    low, high = SELECTION_FPR_RANGE
    in_range = (alpha >= low) & (alpha <= high)
    j = int(np.flatnonzero(in_range)[np.argmax(gap[in_range])])
    slope = float(curve_slope(dpsgd_privacy_profile(SIGMA, Q, T), alpha[j]))
    se = math.sqrt((bug[j] * (1 - bug[j]) + slope**2 * alpha[j] * (1 - alpha[j])) / runs_per_side)
    return (
        f"batch_reused, worst case (all iterates): its curve lies at most {gap[i]:.3f} below the claim's (at FPR "
        f"{alpha[i]:.3f}), at most {gap[j]:.3f} among the FPRs {low}-{high} the profile rule may use (at {alpha[j]:.3f}), "
        f"where the standard error of the test's FNR + {slope:.2f}·FPR with {runs_per_side} runs a side is {se:.4f} "
        f"({gap[j] / se:.1f} of them); the final model of a real training shows less. The conformance check of "
        "independent inclusion catches it too"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4, help="seeds per correct recipe")
    parser.add_argument("--bug-seeds", type=int, default=1, help="seeds per planted bug")
    parser.add_argument("--models", type=int, default=None, help="runs per audit (default: the audit's default)")
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--only", default="", help="comma-separated trainer names (default: all)")
    parser.add_argument("--opacus", action="store_true")
    args = parser.parse_args()
    audits = [
        (f"audit.demos.planted_bugs:{name}", seed, True)
        for name in planted_bugs.PLANTED_BUGS
        for seed in range(args.bug_seeds)
    ]
    audits += [
        (f"audit.demos.planted_bugs:{name}", seed, True) for name in planted_bugs.CORRECT for seed in range(args.seeds)
    ]
    if args.opacus:
        audits += [
            (f"audit.demos.dp_trainers:{name}", 0, False)
            for name in ("correct_dpsgd", "broken_no_clipping", "broken_low_noise")
        ]
    if args.only:
        keep = set(args.only.split(","))
        audits = [a for a in audits if a[0].split(":")[1] in keep]
    print(f"workers: {args.workers}")
    print(
        "| trainer | seed | true ε | claimed ε | canary-audit | p (curve test) | FPR, FNR vs claimed floor | "
        "(ε, δ) bound | one-run bound | conformance | seconds |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    start = time.time()
    designs = []
    with WorkerPool(args.workers, name="--trainer", timeout=900) as pool:
        for spec, seed, step_functions in audits:
            name = spec.split(":")[1]
            t = time.time()
            result = run_canary_audit(spec, seed=seed, pool=pool, n_models=args.models)
            audit_seconds = time.time() - t
            conformance = run_conformance(spec, seed=seed, pool=pool)["verdict"]["status"] if step_functions else "n/a"
            test = result["profile_test"]
            one_run = result["one_run_epsilon_lower_bound"]
            pilot = ", ".join(f"{k} {v:.3f}" for k, v in result["pilot_auc_by_design"].items())
            margins = ", ".join(
                f"{k} {'—' if v is None else f'{v:+.3f}'}" for k, v in result["pilot_margin_by_design"].items()
            )
            designs.append(
                f"{name} seed {seed}: {result['canary']['design']} (pilot AUC: {pilot}; "
                f"pilot margin below the claim's curve: {margins})"
            )
            print(
                f"| {name} | {seed} | {true_epsilon(name) if step_functions else '?'} | {result['claimed_epsilon']:.2f} | "
                f"{result['verdict']['status']} | {test['p_value']:.2g} | {test['fpr']:.3f}, {test['fnr']:.3f} vs "
                f"{test['claimed_fnr_floor']:.3f} | {result['epsilon_lower_bound']:.2f} | "
                f"{'—' if one_run is None else f'{one_run:.2f}'} | {conformance} | {audit_seconds:.0f} |",
                flush=True,
            )
    print(f"total: {time.time() - start:.0f} s")
    print("the pilot's canary design per audit:")
    print("\n".join(designs))
    print(shuffled_batches_analysis())
    print(batch_reused_analysis())


if __name__ == "__main__":
    main()
