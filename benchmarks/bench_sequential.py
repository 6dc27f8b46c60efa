"""Sequential vs fixed-size audits on the bundled planted bugs and on correct setups (issue #40): runs used, CPU and
wall time, the decision, at the same family-wise level (95 %) — the profile canary audit, `mechanism-audit` and
`whitebox-audit --mode runs`.

    python benchmarks/bench_sequential.py [--models 48000] [--trainers NAME,...] [--designs sequential,fixed]
                                          [--seeds 0] [--null-seeds 200 --null-models 128] [--json FILE]
                                          [--audits profile,mechanism,whitebox] [--mechanisms A,B] [--trials 20000]
                                          [--factories A,B] [--runs 1000]

For each trainer (default: every bug of `audit.demos.planted_bugs.PLANTED_BUGS` and `correct_eps_1`) and each seed,
one `canary-audit --mode profile --models N` per design: "sequential" (the default: up to 6 looks, the planned size
halved each time, none below 200 audited runs, Haybittle-Peto-type levels — 0.1·α shared by the interim looks, 0.9·α
at the last — Bonferroni over the looks) and "fixed" (`--looks 1`: one test at α after every planned run, the audit
before issue #40). Both designs use the same seeds, coins and pilot plan; at the last look the sequential audit sees
exactly the fixed audit's runs when the canary design chosen stays the same.

`--null-seeds S --null-models M` (off by default): S sequential audits of each correct recipe of
`audit.demos.planted_bugs.CORRECT` named in `--null-trainers` at M audited runs (looks of M/4, M/2, M): the false-alarm
rate of the whole sequential procedure on trainers that do what they claim.

`--audits mechanism` (`--mechanisms`, `--trials`, default 20 000 draws per dataset): each bundled mechanism of
`audit.demos.mechanisms` (the Laplace count, its quarter-noise bug, the Gaussian mean), sequential (6 looks, none below
200 draws per dataset) and fixed. `--audits whitebox` (`--factories`, `--runs`, default 1000 runs per side): the
bundled Opacus setups of `audit.demos.whitebox_factories` (correct, noise not scaled by C, an accountant told the
wrong σ), sequential (looks of 125 … 1000 runs per side) and fixed. `--audits multi`
(`--multi-models`, default 200 per side): `canary-audit --mode multi` on the `--trainers`, sequential (looks of 50,
100, 200 models per side) and fixed.

CPU seconds are this process plus its workers (reaped when each audit's pool closes), the comparable figure on a
shared machine; wall seconds depend on the load (say how loaded when you quote them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.demos.planted_bugs import PLANTED_BUGS  # noqa: E402
from audit.dp_validation.canary_audit import run_canary_audit  # noqa: E402
from audit.machinery.workers import WorkerPool  # noqa: E402

MECHANISMS = "laplace_count,laplace_count_wrong_scale,gaussian_mean"
# The usage_* factories calibrate σ at every run (make_private_with_epsilon): too slow for hundreds of runs here.
FACTORIES = "correct_opacus,noise_not_scaled_by_clip_norm,accountant_told_wrong_sigma"


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def audit_once(
    trainer: str, design: str, models: int, seed: int, workers: int, pool=None, mode: str = "profile", **extra
) -> dict:
    """One profile audit in a fresh pool (closed before the clock stops, so its workers' CPU time is counted), or
    in `pool` (the null audits share one: their CPU is counted once, for all of them)."""
    cpu, wall = _cpu(), time.perf_counter()
    with WorkerPool(workers, name="bench-sequential") if pool is None else contextlib.nullcontext(pool) as runner:
        result = run_canary_audit(
            f"audit.demos.planted_bugs:{trainer}",
            mode=mode,
            n_models=models,
            seed=seed,
            pool=runner,
            looks=1 if design == "fixed" else None,
            **extra,
        )
    cpu, wall = round(_cpu() - cpu, 1), round(time.perf_counter() - wall, 1)
    p_value = (
        result["profile_test"]["p_value"] if mode == "profile" else result["sequential"]["looks_taken"][-1]["p_value"]
    )
    return {**_row(mode, trainer, design, seed, result, cpu, wall, p_value), "models": models}


def _timed(function, **kwargs) -> tuple[dict, float, float]:
    cpu, wall = _cpu(), time.perf_counter()
    result = function(**kwargs)
    return result, round(_cpu() - cpu, 1), round(time.perf_counter() - wall, 1)


def _row(audit: str, subject: str, design: str, seed: int, result: dict, cpu: float, wall: float, p_value) -> dict:
    sequential = result["sequential"]
    return {
        "audit": audit,
        "trainer": subject,
        "design": design,
        "seed": seed,
        "refuted": result["verdict"]["status"] == "fail",
        "status": result["verdict"]["status"],
        "p_value": p_value,
        "epsilon_lower_bound": result.get("epsilon_lower_bound"),
        "look": sequential["stopped_at_look"],
        "looks": len(sequential["looks"]),
        "runs_used": sequential["runs_used"],
        "runs_planned": sequential["runs_planned"],
        "cpu_s": cpu,
        "wall_s": wall,
    }


def mechanism_once(name: str, design: str, trials: int, seed: int) -> dict:
    """One `mechanism-audit` of `audit.demos.mechanisms:<name>` (its CLAIM and DATASETS), in this process."""
    from audit.dp_validation.mechanism_audit import run_mechanism_audit

    result, cpu, wall = _timed(
        run_mechanism_audit,
        mechanism=f"audit.demos.mechanisms:{name}",
        n_trials=trials,
        seed=seed,
        looks=1 if design == "fixed" else None,
    )
    last = result["sequential"]["looks_taken"][-1]
    return _row("mechanism", name, design, seed, result, cpu, wall, last["p_value"])


def whitebox_once(factory: str, design: str, runs: int, seed: int, workers: int) -> dict:
    """One `whitebox-audit --mode runs --factory audit.demos.whitebox_factories:<factory>` (its pool closed before the
    clock stops, so its workers' CPU time is counted)."""
    from audit.dp_validation.whitebox_audit import run_whitebox_audit

    result, cpu, wall = _timed(
        run_whitebox_audit,
        factory=f"audit.demos.whitebox_factories:{factory}",
        n_runs=runs,
        seed=seed,
        workers=workers,
        looks=1 if design == "fixed" else None,
    )
    return _row("whitebox", factory, design, seed, result, cpu, wall, None)


def _print_row(row: dict) -> None:
    evidence = f"{row['p_value']:.2g}" if row["p_value"] is not None else f"ε ≥ {row['epsilon_lower_bound']:.2f}"
    print(
        f"| {row.get('audit', 'profile')} | {row['trainer']} | {row['seed']} | {row['design']} | "
        f"{'refuted' if row['refuted'] else row['status']} | {evidence} | {row['look']} of {row['looks']} | "
        f"{row['runs_used']:,} / {row['runs_planned']:,} | {row['cpu_s']:.1f} | {row['wall_s']:.1f} |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=48000, help="planned audited runs (--models)")
    parser.add_argument("--trainers", default=",".join(list(PLANTED_BUGS) + ["correct_eps_1"]))
    parser.add_argument("--designs", default="sequential,fixed")
    parser.add_argument("--seeds", default="0", help="audit seeds, comma-separated")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--null-seeds", type=int, default=0)
    parser.add_argument("--null-models", type=int, default=128)
    parser.add_argument("--null-trainers", default="correct_eps_1")
    parser.add_argument("--json", default="", help="also write the rows to this file")
    parser.add_argument("--audits", default="profile", help="profile,multi,mechanism,whitebox (comma-separated)")
    parser.add_argument("--multi-models", type=int, default=200, help="planned models per side (--mode multi)")
    parser.add_argument("--mechanisms", default=MECHANISMS)
    parser.add_argument("--trials", type=int, default=20000, help="planned draws per dataset (mechanism-audit)")
    parser.add_argument("--factories", default=FACTORIES)
    parser.add_argument("--runs", type=int, default=1000, help="planned runs per side (whitebox-audit)")
    args = parser.parse_args()
    audits = args.audits.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    designs = args.designs.split(",")
    rows = []
    print(
        "| audit | subject | seed | design | decision | p or ε bound (deciding look) | stopped at look | "
        "runs used / planned | CPU s | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for trainer in [t for t in args.trainers.split(",") if t] if "profile" in audits else []:
        for seed in seeds:
            for design in designs:
                row = audit_once(trainer, design, args.models, seed, args.workers)
                rows.append(row)
                _print_row(row)
    for trainer in [t for t in args.trainers.split(",") if t] if "multi" in audits else []:
        for seed in seeds:
            for design in designs:
                rows.append(audit_once(trainer, design, args.multi_models, seed, args.workers, mode="multi"))
                _print_row(rows[-1])
    for name in [m for m in args.mechanisms.split(",") if m] if "mechanism" in audits else []:
        for seed in seeds:
            for design in designs:
                rows.append(mechanism_once(name, design, args.trials, seed))
                _print_row(rows[-1])
    for factory in [f for f in args.factories.split(",") if f] if "whitebox" in audits else []:
        for seed in seeds:
            for design in designs:
                rows.append(whitebox_once(factory, design, args.runs, seed, args.workers))
                _print_row(rows[-1])
    for trainer in [t for t in args.null_trainers.split(",") if t] if args.null_seeds else []:
        cpu = _cpu()
        with WorkerPool(args.workers, name="bench-sequential-null") as pool:
            null = [
                audit_once(
                    trainer,
                    "sequential",
                    args.null_models,
                    seed,
                    args.workers,
                    pool=pool,
                    first_look_runs=max(1, args.null_models // 4),
                )
                for seed in range(args.null_seeds)
            ]
        rows.extend({**r, "null": True} for r in null)
        alarms = sum(r["refuted"] for r in null)
        print(
            f"null: {trainer}, {args.null_seeds} seeds × {args.null_models} audited runs (looks {null[0]['looks']}): "
            f"{alarms} refuted ({alarms / len(null):.1%}); {_cpu() - cpu:.0f} s of CPU",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
