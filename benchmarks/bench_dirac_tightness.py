"""Tightness of the white-box Dirac-canary audit of the harness's own DP-SGD (README table).

For each target ε the noise multiplier σ of full-batch (q = 1) DP-SGD with T steps is calibrated
(Opacus PRV accountant), then `privacy-audit whitebox-audit --builtin` is run with N runs per side
(`audit.dp_validation.whitebox_audit.run_whitebox_audit`): every run trains the vectorized
trainer's MLP on a small real table with the Dirac canary in every step ("in") or never ("out").
Both observations come from the same runs: all iterates (the decision) and the final model.
Prints a Markdown table: claim (PLD ε), GDP-family bound (assumes a Gaussian trade-off curve, true
here) and its ratio to the claim, the sound Clopper-Pearson (ε, δ) bound at its tail rule and its
ratio to the claim, the same bound at the equal-error point (what was reported before the tail
rule), the verdict, minutes.

    python benchmarks/bench_dirac_tightness.py                      # the README table
    python benchmarks/bench_dirac_tightness.py --points 4:2000 4:10000 4:50000
    python benchmarks/bench_dirac_tightness.py --sound-ceiling 50000 500000 5000000

`--sound-ceiling N ...` trains nothing: for each target ε it prints what the sound Clopper-Pearson
bound could reach with N runs a side in the best case — the exact Gaussian pair N(0, 1) against
N(μ, 1) that the claim allows (μ-GDP with ε(δ = 1e-5) = the target), expected counts, and the
threshold chosen with hindsight — as a fraction of the claim: the runs a sound (ε, δ) bound of
0.8 × the claim needs, whatever the canary.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opacus.accountants.utils import get_noise_multiplier  # noqa: E402

from audit.dp_validation.whitebox_audit import run_whitebox_audit  # noqa: E402
from audit.statistics.epsilon_bounds import epsilon_lower_bound_from_counts, gdp_mu_from_epsilon  # noqa: E402

DELTA = 1e-5


def sound_bound_ceiling(epsilon: float, runs_per_side: int, delta: float = DELTA) -> float:
    """Best-case sound Clopper-Pearson bound with `runs_per_side` runs: expected counts of the exact
    Gaussian pair at the claim, every threshold on a grid of 0.005, the best taken with hindsight."""
    mu = gdp_mu_from_epsilon(epsilon, delta)
    best = 0.0
    for t in np.arange(0.0, 9.0, 0.005):
        fp, fn = round(runs_per_side * stats.norm.sf(t)), round(runs_per_side * stats.norm.cdf(t - mu))
        best = max(best, epsilon_lower_bound_from_counts(fp, runs_per_side, fn, runs_per_side, delta))
    return best


DEFAULT_POINTS = ["1:10000", "1:50000", "2:10000", "4:2000", "4:10000", "4:50000", "8:10000"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", nargs="+", default=DEFAULT_POINTS, help="target ε:runs per side")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument(
        "--sample-rate",
        type=float,
        default=1.0,
        help="q; below 1 the GDP column is an estimate (the curve is not Gaussian), CP decides",
    )
    parser.add_argument(
        "--sound-ceiling",
        nargs="+",
        type=int,
        default=None,
        metavar="N",
        help="print the best-case sound bound / claim with N runs a side and exit",
    )
    args = parser.parse_args()
    if args.sound_ceiling:
        targets = sorted({float(point.split(":")[0]) for point in args.points})
        print("| target ε | μ | " + " | ".join(f"{n} runs a side" for n in args.sound_ceiling) + " |")
        print("|---|---|" + "---|" * len(args.sound_ceiling))
        for eps in targets:
            print(
                f"| {eps:g} | {gdp_mu_from_epsilon(eps, DELTA):.3f} | "
                + " | ".join(f"{sound_bound_ceiling(eps, n) / eps:.2f}" for n in args.sound_ceiling)
                + " |",
                flush=True,
            )
        return
    print(
        "| target ε | σ | claimed ε (PLD) | observation | runs per side | GDP-family bound | bound / claim | "
        "sound CP bound (tail rule) | CP / claim | CP at equal-error point | verdict | minutes |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for point in args.points:
        eps, runs = point.split(":")
        sigma = get_noise_multiplier(
            target_epsilon=float(eps),
            target_delta=1e-5,
            sample_rate=args.sample_rate,
            steps=args.steps,
            accountant="prv",
        )
        start = time.time()
        r = run_whitebox_audit(
            builtin=True,
            noise_multiplier=sigma,
            sample_rate=args.sample_rate,
            steps=args.steps,
            n_runs=int(runs),
            observe="all",
            workers=args.workers,
            looks=1,  # tightness at the planned size: the fixed design (a sequential audit's last look is at 0.045)
        )
        minutes = (time.time() - start) / 60
        claim = r["claimed_epsilon"]
        other = r["other_observation"]
        for name, bound, cp, cp_eer in (
            ("all iterates", r["gdp_bound"]["epsilon"], r["epsilon_lower_bound"], r["epsilon_lower_bound_equal_error"]),
            (
                "final model",
                other["epsilon"],
                other["epsilon_lower_bound_clopper_pearson"],
                other["epsilon_lower_bound_equal_error"],
            ),
        ):
            print(
                f"| {float(eps):g} | {sigma:.3f} | {claim:.2f} | {name} | {int(runs)} | {bound:.2f} | "
                f"{bound / claim:.2f} | {cp:.2f} | {cp / claim:.2f} | {cp_eer:.2f} | {r['verdict']['status']} | "
                f"{minutes:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
