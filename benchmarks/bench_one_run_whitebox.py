"""Planted bugs in real Opacus setups, each judged from ONE training run: `whitebox-audit --mode one-run`
and `conformance --factory`.

    PRIVACY_AUDIT_BUG_SIZE=full python benchmarks/bench_one_run_whitebox.py [--size full] [--only NAME,...] [--correct N]

For every bug of `audit.demos.opacus_planted_bugs` and the first `--correct` correct setups there
(ε 0.5 to 8, four seeds each: 20 by default): the one-run white-box audit (gradient canaries in one
training run, the default m for the model) and the conformance checks through the same factory.
Prints one Markdown row per setup: the claim, the one-run status and bounds (Steinke et al., f-DP
GDP-family ε, Gaussian normalized sum, Andrew et al.), the failed conformance checks, whether the
setup was flagged, and the wall seconds of the canary run, of one plain run (for the first correct
setup and every bug: `--compare-plain all|first`) and of the conformance checks. Wall time is on
whatever machine runs it; say which, and how loaded, when quoting it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _figure(value) -> str:
    """A Gaussian-family estimate: withheld (None) where the scores contradict a Gaussian curve (gdp_fit)."""
    return "withheld" if value is None else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--size", choices=("tiny", "real", "full"), default=os.environ.get("PRIVACY_AUDIT_BUG_SIZE", "tiny")
    )
    parser.add_argument("--only", default="", help="comma-separated setup names")
    parser.add_argument("--correct", type=int, default=20, help="how many correct setups (of 20)")
    parser.add_argument("--canaries", type=int, default=None, help="m (default: from the model size)")
    parser.add_argument("--compare-plain", choices=("all", "first"), default="first")
    parser.add_argument("--seed", type=int, default=0, help="audit seed of the first setup (then +1 per setup)")
    args = parser.parse_args()
    os.environ["PRIVACY_AUDIT_BUG_SIZE"] = args.size  # the worker processes inherit it

    from audit.demos import opacus_planted_bugs as bugs
    from audit.dp_validation.one_run_whitebox import run_one_run_whitebox_audit
    from audit.dp_validation.opacus_conformance import run_factory_conformance

    names = list(bugs.BUGS) + list(bugs.CORRECT[: args.correct])
    if args.only:
        names = [n for n in names if n in set(args.only.split(","))]
    names_all = list(bugs.BUGS) + list(bugs.CORRECT)
    print(
        f"size {args.size}: {bugs.SIZES[args.size]}; torch threads per worker: "
        f"{os.environ.get('OMP_NUM_THREADS', 'torch default')}; load average {os.getloadavg()}; "
        f"started {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}",
        flush=True,
    )
    print(
        "| setup | claim ε | one-run status | Steinke ε | f-DP GDP ε | Gaussian-sum ε | Andrew ε | m | "
        "conformance failed | flagged | s canary run (wall / CPU) | s plain run (wall / CPU) | "
        "overhead canary / plain (wall; CPU) | accuracy canaries / plain | s conformance |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    flagged_bugs = flagged_correct = n_correct = 0
    first_correct = True
    for name in names:
        factory = f"audit.demos.opacus_planted_bugs:{name}"
        is_bug = name in bugs.BUGS
        plain = args.compare_plain == "all" or is_bug or first_correct
        first_correct = first_correct and is_bug
        start = time.perf_counter()
        conf = run_factory_conformance(factory, timeout=3600)
        conf_seconds = time.perf_counter() - start
        # Each setup its own audit seed (canary coins, inclusion, the run's noise): Dirac canaries sit on
        # zeroed coordinates, so setups differing only in their data would otherwise score identically.
        audit_seed = args.seed + names_all.index(name)
        one = run_one_run_whitebox_audit(
            factory=factory, n_canaries=args.canaries, compare_plain=plain, timeout=7200, seed=audit_seed
        )
        o = one["one_run"]
        failed = [c["check"] for c in conf["checks"] if not c["passed"]]
        flagged = one["verdict"]["status"] == "fail" or bool(failed)
        if is_bug:
            flagged_bugs += flagged
        else:
            n_correct += 1
            flagged_correct += flagged
        cost, acc = one["cost"], one["accuracy"]
        accuracy = (
            f"{acc['with_canaries']:.3f} / {acc['plain']:.3f}"
            if acc.get("plain") is not None
            else f"{acc['with_canaries']:.3f} / –"
        )
        plain_s = (
            "–" if cost["seconds_plain"] is None else f"{cost['seconds_plain']:.1f} / {cost['cpu_seconds_plain']:.1f}"
        )
        over = "–" if cost["overhead"] is None else f"{cost['overhead']:.2f}; {cost['cpu_overhead']:.2f}"
        print(
            f"| {name} | {one['claimed_epsilon']:.2f} | {o['status']}"
            f"{' (accountant disagrees)' if one['accountant_disagreements'] else ''} | {o['steinke']['epsilon']:.2f} | "
            f"{_figure((o['fdp'] or {}).get('gdp_family_epsilon'))} | {_figure(o['gaussian_sum']['epsilon'])} | "
            f"{_figure(o['andrew']['epsilon'])} | {one['canaries']['m']} {one['canaries']['kind']} | "
            f"{', '.join(failed) or '–'} | {'yes' if flagged else 'no'} | "
            f"{cost['seconds_with_canaries']:.1f} / {cost['cpu_seconds_with_canaries']:.1f} | "
            f"{plain_s} | {over} | {accuracy} | "
            f"{conf_seconds:.1f} |",
            flush=True,
        )
    n_bugs = sum(n in bugs.BUGS for n in names)
    print(f"\nfinished {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; load average {os.getloadavg()}")
    print(f"bugs flagged: {flagged_bugs} of {n_bugs}; correct setups flagged: {flagged_correct} of {n_correct}")


if __name__ == "__main__":
    main()
