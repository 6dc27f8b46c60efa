"""The planted-bug suite through the DEFAULT `canary-audit` (black-box) and `conformance` checks.

    python benchmarks/bench_planted_bugs.py [--seeds 4] [--opacus] [--workers N]

For every planted bug of `audit.demos.planted_bugs` (seed 0) and every correct recipe there (ε 0.5
to 8, `--seeds` seeds each: 6 × 4 = 24 audits by default): the default black-box canary audit
(`run_canary_audit` with its defaults: 200 runs × 32 column canaries, pilot screening) and the
conformance checks. `--opacus` adds the Opacus trainers of `audit.demos.dp_trainers`. Prints one
Markdown table row per audit: claimed ε, bound, ceiling, bound / claim, verdicts, wall seconds.
Wall time is on whatever machine runs it (say which, and how loaded, when you quote it).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.demos import planted_bugs  # noqa: E402
from audit.dp_validation.canary_audit import run_canary_audit  # noqa: E402
from audit.dp_validation.conformance import run_conformance  # noqa: E402
from audit.machinery.workers import WorkerPool, default_workers  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--opacus", action="store_true")
    args = parser.parse_args()
    audits = [(f"audit.demos.planted_bugs:{name}", 0, True) for name in planted_bugs.PLANTED_BUGS]
    audits += [(f"audit.demos.planted_bugs:{name}", seed, True)
               for name in planted_bugs.CORRECT for seed in range(args.seeds)]
    if args.opacus:
        audits += [(f"audit.demos.dp_trainers:{name}", 0, False)
                   for name in ("correct_dpsgd", "broken_no_clipping", "broken_low_noise")]
    print(f"workers: {args.workers}")
    print("| trainer | seed | claimed ε | black-box bound | ceiling | bound / claim | canary-audit | conformance | seconds |")
    print("|---|---|---|---|---|---|---|---|---|")
    start = time.time()
    with WorkerPool(args.workers, name="--trainer", timeout=900) as pool:
        for spec, seed, step_functions in audits:
            t = time.time()
            result = run_canary_audit(spec, seed=seed, pool=pool)
            audit_seconds = time.time() - t
            conformance = run_conformance(spec, seed=seed, pool=pool)["verdict"]["status"] if step_functions else "n/a"
            claim, bound = result["claimed_epsilon"], result["epsilon_lower_bound"]
            print(f"| {spec.split(':')[1]} | {seed} | {claim:.2f} | {bound:.2f} | {result['ceiling']:.2f} | "
                  f"{bound / claim:.2f} | {result['verdict']['status']} | {conformance} | {audit_seconds:.0f} |", flush=True)
    print(f"total: {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
