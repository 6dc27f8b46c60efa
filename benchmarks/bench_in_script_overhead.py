"""Overhead of the in-script `OpacusAudit` on the user's own loop: plain training vs the same training
inside `with OpacusAudit(...)`, side by side in one process.

    python benchmarks/bench_in_script_overhead.py [--preset tiny|real] [--repeats 3] [--threads 1] [--physical 0,32]

Same process, alternating (plain, audited, audited, plain, ...): each run builds a fresh setup from the
same seed (`targets.opacus_setups.tabular_mlp_setup`: an Opacus MLP on the default table, Poisson
sampling) and trains it with a user-style loop: one row per `--physical` value, 0 = the plain loop over
the DPDataLoader, b > 0 = through Opacus's `BatchMemoryManager` with physical batches of at most b
(several physical steps per logical one, as the CIFAR-10 tutorial trains).
The audited run is the whole in-script audit: canaries per logical step, noisy-step count, parameter
accounting, then `finish(write=False)` (the claim decided: Steinke et al., f-DP one-run test against
the claim's PLD curve); the result-file writing and MLflow are left out (start-up of the tracking
store, not the audit); the lru caches of the claim curve are emptied before each audited run, so each
pays what one audit in a fresh process pays. Prints the median wall and process-CPU seconds, their ratios, the decision's
own seconds, and the load average (the machine is shared: CPU time is the steadier figure).

* tiny: MLP [32], 400 rows, q = 0.125, T = 16;
* real: MLP [256, 256], 8 000 rows, q = 0.02, T = 150 (the issue's size: ~ 70 000 coordinates).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PRESETS = {
    "tiny": {"rows": 400, "hidden": (32,), "sample_rate": 0.125, "steps": 16},
    "real": {"rows": 8000, "hidden": (256, 256), "sample_rate": 0.02, "steps": 150},
}


def user_loop(model, optimizer, loader, epochs: int, steps: int, physical: int) -> None:
    import torch.nn.functional as F
    from opacus.utils.batch_memory_manager import BatchMemoryManager

    done = 0
    for _ in range(epochs):
        if physical:
            with BatchMemoryManager(data_loader=loader, max_physical_batch_size=physical, optimizer=optimizer) as ml:
                for x, y in ml:
                    optimizer.zero_grad()
                    F.cross_entropy(model(x), y).backward()
                    optimizer.step()
            continue
        for x, y in loader:
            if done >= steps:
                return
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            done += 1


def one_run(preset: dict, audited: bool, seed: int, physical: int) -> tuple[float, float, float]:
    import torch

    from audit.one_run import OpacusAudit
    from targets.opacus_setups import tabular_mlp_setup

    torch.manual_seed(seed)
    s = tabular_mlp_setup(noise_multiplier=1.0, max_grad_norm=1.0, seed=seed, **preset)
    epochs = s["epochs"] if not physical else max(1, round(s["steps"] * preset["sample_rate"]))
    wall, cpu = time.perf_counter(), time.process_time()
    decide = 0.0
    if audited:
        _fresh_process_caches()
        audit = OpacusAudit(s["privacy_engine"], s["optimizer"], s["model"], data_loader=s["data_loader"], out=None)
        with _Block(audit) as a:
            user_loop(s["model"], s["optimizer"], s["data_loader"], epochs, s["steps"], physical)
        decide = a.decide_seconds
    else:
        user_loop(s["model"], s["optimizer"], s["data_loader"], epochs, s["steps"], physical)
    return time.perf_counter() - wall, time.process_time() - cpu, decide


def _fresh_process_caches() -> None:
    """Each audited run pays what one audit in a fresh process pays: the claim's privacy curve (and any
    PLD ε) computed again, not read from the lru caches an earlier run of this benchmark filled (a
    user's script audits once; the median of warm runs would hide that cost)."""
    from audit.statistics import accountants, tradeoff_curves

    for module in (accountants, tradeoff_curves):
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()


class _Block:
    """`with OpacusAudit(...)`, timing the decision on exit apart."""

    def __init__(self, audit):
        self.audit, self.decide_seconds = audit, 0.0

    def __enter__(self):
        self.audit.start()
        return self

    def __exit__(self, *exc):
        self.audit.stop()
        start = time.process_time()
        self.audit.finish(write=False)
        self.decide_seconds = time.process_time() - start
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=tuple(PRESETS), default="real")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--physical", default="0,32", help="comma-separated BatchMemoryManager physical batch sizes (0: no manager)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch

    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    preset = PRESETS[args.preset]
    one_run(PRESETS["tiny"], True, args.seed, 0)  # imports and first-call costs paid once, outside the figures
    physicals = [int(v) for v in str(args.physical).split(",")]
    print(
        f"preset {args.preset}: {preset}, {args.threads} thread(s), {args.repeats} alternating pairs per row; "
        f"load average before {os.getloadavg()}"
    )
    print(
        "| loop | median s plain (wall / CPU) | median s audited (wall / CPU) | wall ratio | CPU ratio | "
        "of which deciding (CPU s) |"
    )
    print("|---|---|---|---|---|---|")
    for physical in physicals:
        plain, audited = [], []
        for repeat in range(args.repeats):
            for which in (False, True) if repeat % 2 == 0 else (True, False):
                (audited if which else plain).append(one_run(preset, which, args.seed, physical))
        pw, pc = (statistics.median(x[i] for x in plain) for i in (0, 1))
        aw, ac, ad = (statistics.median(x[i] for x in audited) for i in (0, 1, 2))
        loop = f"BatchMemoryManager, physical ≤ {physical}" if physical else "plain loop over the DPDataLoader"
        print(
            f"| {loop} | {pw:.2f} / {pc:.2f} | {aw:.2f} / {ac:.2f} | {aw / pw:.2f}× | {ac / pc:.2f}× | {ad:.2f} |",
            flush=True,
        )
    print(f"load average after {os.getloadavg()}")


if __name__ == "__main__":
    main()
