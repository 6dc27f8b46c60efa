"""CPU of a white-box twin's statistics (`one_run_row`), and its numbers, for a before/after comparison.

The default run's five DP targets (σ, q, T of tests/data/results_default_example.json, ε 0.5 … 8), each
with the default config's m = 7373 Dirac canaries (README) and seeded synthetic scores (the cost is in
what a row computes before any score is read: the claim's and nine other DP-SGD profiles, the f-DP
test's perfect-attack p-values at 10 curves and 7 canary counts; the scores only enter two audits).
Each row starts with cold caches (as a twin's worker does), CPU by `time.process_time`.

    .venv/bin/python benchmarks/bench_one_run_statistics.py --out rows.json [--targets 8] [--m 7373]

`--out` writes the rows (every number a row holds) so that two checkouts' outputs can be compared with
`cmp`; run the two checkouts alternately on a shared machine. Prints one line per twin: σ, CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from audit.statistics import fdp_one_run, one_run_power, tradeoff_curves
from audit.statistics.one_run_power import one_run_row

# (ε target, σ) of the default run's DP targets; q = 1/19, T = 570 for all (results_default_example.json).
DEFAULT_TARGETS = {0.5: 9.21875, 1.0: 4.8828125, 2.0: 2.67578125, 4.0: 1.58203125, 8.0: 1.0357666015625}
SAMPLE_RATE, STEPS, DELTA = 0.05263157894736842, 570, 1e-5


def _clear_caches() -> None:
    for function in (
        tradeoff_curves.dpsgd_privacy_profile,
        fdp_one_run.profile_blow_up_inverse,
        one_run_power.fdp_perfect_p_value,
        getattr(tradeoff_curves, "_false_positive_pmf", None),
    ):
        if hasattr(function, "cache_clear"):
            function.cache_clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the rows as JSON here")
    parser.add_argument(
        "--targets", default=",".join(str(e) for e in DEFAULT_TARGETS), help="ε targets, comma-separated"
    )
    parser.add_argument("--m", type=int, default=7373, help="canaries per twin")
    args = parser.parse_args()
    rows, total = {}, 0.0
    for epsilon in (float(e) for e in args.targets.split(",")):
        sigma = DEFAULT_TARGETS[epsilon]
        rng = np.random.default_rng(int(epsilon * 10))
        coins = rng.random(args.m) < 0.5
        scores_all = rng.normal(size=args.m) + 0.2 * coins
        scores_final = scores_all + 0.1 * rng.normal(size=args.m)
        _clear_caches()
        start = time.process_time()
        claim = {"claim": epsilon, "delta": DELTA, "noise_multiplier": sigma, "confidence": 0.95}
        row = one_run_row(scores_all, scores_final, coins, sample_rate=SAMPLE_RATE, steps=STEPS, **claim)
        seconds = time.process_time() - start
        total += seconds
        rows[str(epsilon)] = row
        print(f"ε {epsilon:g} (σ {sigma:g}, m {args.m}): {seconds:.2f} s CPU", flush=True)
    print(f"all {len(rows)} twins: {total:.2f} s CPU")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=1, sort_keys=True, default=str)


if __name__ == "__main__":
    main()
