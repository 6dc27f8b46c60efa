"""Tightness of the white-box Dirac-canary audit of the harness's own DP-SGD (every iterate seen).

    python benchmarks/bench_dirac_tightness.py [--runs 2000 10000] [--epsilons 1 2 4 8]

Full-batch DP-SGD (q = 1, T = 20 steps, C = 1) with σ calibrated so the PLD accountant gives each
target ε at δ = 1e-5; `dirac_canary_audit` (Nasr et al. 2023, arXiv 2302.07956: the canary
coordinate of the noisy clipped gradient sum at every step, likelihood-ratio statistic) with N runs
per side. Prints one Markdown row per (ε, N): the sound Clopper-Pearson bound, the GDP estimate
(assumes a Gaussian trade-off; threshold chosen for the held-out half's width), each over the
claim, and wall minutes on this machine.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opacus.accountants.utils import get_noise_multiplier  # noqa: E402

from audit.dp_validation.canary_audit import dirac_canary_audit  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[2000, 10000])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 2.0, 4.0, 8.0])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    print("| target ε | σ | claimed ε (PLD) | runs per side | sound bound | bound / claim | GDP estimate | estimate / claim | minutes |")
    print("|---|---|---|---|---|---|---|---|---|")
    for eps in args.epsilons:
        sigma = get_noise_multiplier(target_epsilon=eps, target_delta=1e-5, sample_rate=1.0, steps=args.steps,
                                     accountant="prv")
        for n in args.runs:
            t = time.time()
            r = dirac_canary_audit(noise_multiplier=sigma, sample_rate=1.0, steps=args.steps, n_runs=n, delta=1e-5)
            claim, bound, gdp = r["claimed_epsilon"], r["epsilon_lower_bound"], r["gdp_estimate"]["epsilon"]
            print(f"| {eps:g} | {sigma:.3f} | {claim:.2f} | {n} | {bound:.2f} | {bound / claim:.2f} | {gdp:.2f} | "
                  f"{gdp / claim:.2f} | {(time.time() - t) / 60:.1f} |", flush=True)


if __name__ == "__main__":
    main()
