"""Power of every `canary-audit` mode on the bundled planted-bug suite: which mode refutes which bug, at what size,
in what time. Regenerates the power table of docs/canary-audit.md and the figures of
`audit.dp_validation.mode_power.MEASURED_POWER`.

    python benchmarks/bench_mode_power.py [--only MODE,...] [--trainers NAME,...] [--seed 0] [--json FILE]
    python benchmarks/bench_mode_power.py --mechanisms

`--mechanisms`: the same for `mechanism-audit` on the bundled mechanisms (`audit.demos.mechanisms`: the Laplace
count with a quarter of its scale, true ε 4 against a claimed 1, and the correct one) at 2,000 and 20,000 draws per
dataset (`audit.dp_validation.mode_power.MECHANISM_MEASURED_TRIALS`).

For each (mode, size) of `SIZES` and each trainer (the four hand-written DP-SGD bugs of
`audit.demos.planted_bugs` named in issue #35 — clip of the batch mean, noise divided by the batch twice, noise on 5
of 20 steps, σ not multiplied by C — and the correct recipe, all claiming ε ≈ 1 at δ 1e-5): one audit with
`run_canary_audit` at the default confidence (95 %) and seed 0, its verdict (refuted / not refuted), the bound or the
p-value of the curve test, and its time. The sizes are fixed here before any score is seen; nothing is tuned on the
audits' scores. CPU seconds are this process plus its worker (one worker per audit, so the time is the cost on one
core); wall seconds depend on the machine's load (say which machine, and how loaded, when you quote them).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.dp_validation.canary_audit import run_canary_audit  # noqa: E402
from audit.machinery.workers import WorkerPool  # noqa: E402

TRAINERS = ("batch_clip", "noise_divided_twice", "noise_missing_steps", "sigma_not_sigma_c", "correct_eps_1")
# (mode, size): --canaries for one-run, --models for the others (multi-canary with its default 32 canaries per run).
SIZES = (
    ("one-run", 200),
    ("one-run", 1000),
    ("multi", 200),
    ("multi-canary", 200),
    ("profile", 400),
    ("profile", 1600),
)


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def audit_once(mode: str, size: int, trainer: str, seed: int) -> dict:
    """One audit in a fresh one-worker pool (closed before the clock stops, so its CPU time is counted)."""
    cpu, wall = _cpu(), time.perf_counter()
    with WorkerPool(1, name="bench-mode-power") as pool:
        sizes = {"n_canaries": size} if mode == "one-run" else {"n_models": size}
        result = run_canary_audit(f"audit.demos.planted_bugs:{trainer}", mode=mode, seed=seed, pool=pool, **sizes)
    test = result.get("profile_test") or {}
    return {
        "mode": mode,
        "size": size,
        "trainer": trainer,
        "seed": seed,
        "refuted": bool(result.get("violation")) or result["verdict"]["status"] == "fail",
        "epsilon_lower_bound": result.get("epsilon_lower_bound"),
        "p_value": test.get("p_value"),
        "cpu_s": round(_cpu() - cpu, 1),
        "wall_s": round(time.perf_counter() - wall, 1),
    }


def mechanisms() -> None:
    from audit.dp_validation.mechanism_audit import run_mechanism_audit

    print("| mechanism | draws per dataset | verdict | ε lower bound | claimed ε | CPU s |")
    print("|---|---|---|---|---|---|")
    for name in ("laplace_count_wrong_scale", "laplace_count"):
        for trials in (2000, 20000):
            cpu = _cpu()
            result = run_mechanism_audit(f"audit.demos.mechanisms:{name}", n_trials=trials)
            refuted = bool(result.get("violation")) or result["verdict"]["status"] == "fail"
            print(
                f"| {name} | {trials:,} | {'refuted' if refuted else 'not refuted'} | "
                f"{result['epsilon_lower_bound']:.3g} | {result['claimed_epsilon']:g} | {_cpu() - cpu:.2f} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="modes to run, comma-separated (default: all)")
    parser.add_argument("--trainers", default=",".join(TRAINERS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default="", help="also write the rows to this file")
    parser.add_argument("--mechanisms", action="store_true", help="mechanism-audit on the bundled mechanisms instead")
    args = parser.parse_args()
    if args.mechanisms:
        mechanisms()
        return
    modes = set(filter(None, args.only.split(",")))
    rows = []
    print("| mode | size | trainer | verdict | ε lower bound | curve p | CPU s | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for mode, size in SIZES:
        if modes and mode not in modes:
            continue
        for trainer in args.trainers.split(","):
            row = audit_once(mode, size, trainer, args.seed)
            rows.append(row)
            bound = row["epsilon_lower_bound"]
            print(
                f"| {mode} | {size} | {trainer} | {'refuted' if row['refuted'] else 'not refuted'} | "
                f"{'' if bound is None else f'{bound:.3g}'} | "
                f"{'' if row['p_value'] is None else format(row['p_value'], '.2g')} | {row['cpu_s']} | {row['wall_s']} |",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
