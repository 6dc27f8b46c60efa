"""Overhead of the one-run white-box canaries: one training run with canaries vs one plain run, side by side.

    python benchmarks/bench_one_run_whitebox_overhead.py [--preset tiny|default-run|real] [--canaries 1000]
        [--repeats 5] [--threads 1]

Same process, same machine, alternating (plain, canaries, canaries, plain, ...): each run builds a
fresh setup from the same seed (`targets.opacus_setups.tabular_mlp_setup`: an Opacus MLP on the
default table, Poisson sampling) and trains it with the audit's own loop
(`audit.dp_validation.one_run_whitebox.train_loop`), with or without `targets.canaries`. Prints the
median wall and process-CPU seconds of each and their ratios (CPU time is the steadier one on a
shared machine: other jobs stretch wall time, not this process's CPU time). Presets:

* tiny: MLP [32], 400 rows, q = 0.125, T = 16 (the planted-bug tests' size; random directions);
* default-run: MLP [768], 1 514 rows, q = 1/19, T = 570 (the default `run`'s schedule);
* real: MLP [256, 256], 8 000 rows, q = 0.02, T = 150 (a plain run of ≥ 10 s here).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PRESETS = {
    "tiny": {"rows": 400, "hidden": (32,), "sample_rate": 0.125, "steps": 16},
    "default-run": {"rows": 1514, "hidden": (768,), "sample_rate": 1 / 19, "steps": 570},
    "real": {"rows": 8000, "hidden": (256, 256), "sample_rate": 0.02, "steps": 150},
}


def one_run(
    preset: dict, m: int | None, kind: str, seed: int, max_rows: int | None = None
) -> tuple[float, float, str | None]:
    import torch

    from audit.dp_validation.one_run_whitebox import train_loop
    from targets.canaries import make_canaries
    from targets.opacus_setups import tabular_mlp_setup

    torch.manual_seed(seed)
    setup = tabular_mlp_setup(noise_multiplier=1.0, max_grad_norm=1.0, seed=seed, **preset)
    optimizer = setup["optimizer"]
    canaries = None
    if m:
        d = sum(p.numel() for p in optimizer.params if p.requires_grad)
        canaries = make_canaries(
            d, m, kind=kind, sample_rate=preset["sample_rate"], seed=seed, noise_multiplier=1.0, max_rows=max_rows
        )
        canaries.attach(optimizer)
    wall, cpu = time.perf_counter(), time.process_time()
    train_loop(
        setup["model"], optimizer, setup["data_loader"], setup["epochs"], canaries=canaries, max_steps=setup["steps"]
    )
    if canaries is not None:
        canaries.scores("all"), canaries.scores("final")
    return time.perf_counter() - wall, time.process_time() - cpu, None if canaries is None else canaries.kind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=tuple(PRESETS), default="real")
    parser.add_argument("--canaries", type=int, nargs="+", default=[1000])
    parser.add_argument("--kind", choices=("auto", "dirac", "random"), default="auto")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--all-rows",
        action="store_true",
        help="every canary as a row through the optimizer's clipping (no witness budget)",
    )
    args = parser.parse_args()

    import torch

    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    preset = PRESETS[args.preset]
    print(
        f"preset {args.preset}: {preset}, {args.threads} thread(s), {args.repeats} alternating pairs, "
        f"{'every canary as a row' if args.all_rows else 'default row budget'}"
    )
    print("| m | kind | median s plain (wall / CPU) | median s canaries (wall / CPU) | wall ratio | CPU ratio |")
    print("|---|---|---|---|---|---|")
    for m in args.canaries:
        plain, canary = [], []
        for repeat in range(args.repeats):
            order = (None, m) if repeat % 2 == 0 else (m, None)
            for which in order:
                (plain if which is None else canary).append(
                    one_run(preset, which, args.kind, args.seed, 10**9 if args.all_rows else None)
                )
        kinds = {x[2] for x in canary}
        pw, pc = (statistics.median(x[i] for x in plain) for i in (0, 1))
        cw, cc = (statistics.median(x[i] for x in canary) for i in (0, 1))
        print(
            f"| {m} | {kinds.pop()} | {pw:.2f} / {pc:.2f} | {cw:.2f} / {cc:.2f} | {cw / pw:.2f}× | {cc / pc:.2f}× |",
            flush=True,
        )


if __name__ == "__main__":
    main()
