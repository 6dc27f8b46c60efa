"""Time the whole synthetic-data check (`synthetic_privacy_checks`, what `synth-check` runs) on seeded data.

    python benchmarks/bench_synthetic.py [--n-synthetic 100000] [--n-train 100000] [--n-cols 20]
                                         [--categorical-share 0.3] [--stages]

Data: a seeded mixed-type table (70 % numeric columns — correlated latent factors, skewed and
integer columns among them — and 30 % categorical columns of 2 to 12 levels); train, holdout
(same size as train) and synthetic are independent draws from it, the expensive case (a copy is
found no faster). Prints wall and CPU seconds (user + system, all threads) of the whole check,
with `--stages` the CPU seconds of its parts, the load average, and the process's peak RSS.
Goal (issue 27): 100k × 100k × 20 columns within 20 s on an idle 2-core machine. The wall time on
an idle machine is at most the CPU time (the check does no I/O; anything run on two threads only
makes wall shorter than CPU), so CPU time measured on a busy machine bounds the idle wall from above.
`--categorical-share 0` gives an all-numeric table: nothing for the category pruning of the
nearest-neighbour search (attacks/distance_groups.py) to prune, the full search's cost.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import audit.statistics.synthetic_evaluation as evaluation  # noqa: E402
import audit.statistics.synthetic_risks as risks  # noqa: E402

_LEVELS = (2, 3, 4, 5, 7, 10, 12)


def make_table(n_rows: int, n_cols: int, rng: np.random.Generator, loadings: np.ndarray) -> pd.DataFrame:
    n_numeric = loadings.shape[1]
    latent = rng.standard_normal((n_rows, loadings.shape[0]))
    numeric = latent @ loadings + 0.6 * rng.standard_normal((n_rows, n_numeric))
    columns: dict[str, np.ndarray] = {}
    for j in range(n_numeric):
        if j % 4 == 1:
            columns[f"num_{j}"] = np.exp(0.5 * numeric[:, j])  # skewed, like incomes
        elif j % 4 == 2:
            columns[f"num_{j}"] = np.rint(40 + 12 * numeric[:, j]).astype(np.int64)  # integer, like ages
        else:
            columns[f"num_{j}"] = numeric[:, j]
    for j in range(n_cols - n_numeric):
        levels = _LEVELS[j % len(_LEVELS)]
        # Level depends on a latent factor, so categorical and numeric columns are correlated.
        score = latent[:, j % latent.shape[1]] + rng.standard_normal(n_rows)
        # Edges are the population's (fixed quantiles of N(0, 2)), not redrawn per table: redrawn,
        # train, holdout and synthetic came from three slightly different populations, and the
        # "independent" release was flagged for inference risk (issue 27).
        edges = stats.norm.ppf(np.linspace(0, 1, levels + 1)[1:-1]) * np.sqrt(2)
        columns[f"cat_{j}"] = np.asarray([f"L{k}" for k in range(levels)], dtype=object)[np.searchsorted(edges, score)]
    return pd.DataFrame(columns)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


class Stage:
    """Wall and CPU seconds of a block. On a shared machine wall time depends on the neighbours;
    CPU time (all threads, user + system) does much less, and CPU / cores is the quiet-machine wall."""

    def __enter__(self) -> Stage:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu

    def __str__(self) -> str:
        return f"{self.wall:6.1f} s wall, {self.cpu:6.1f} s CPU"


# The parts of the check timed with --stages (CPU seconds of each call, summed).
_STAGES = [
    (evaluation, "category_groups", "category combinations (for the pruned search)"),
    (evaluation, "grouped_mutual_nearest_neighbours", "neighbours: synthetic × train, synthetic × holdout"),
    (evaluation, "grouped_nearest_neighbours", "neighbours: textbook NNDR (synthetic × synthetic)"),
    (evaluation, "_membership_attack", "distance MIA metrics and ε bounds"),
    (risks, "singling_out_risk", "risk: singling out"),
    (risks, "linkability_risk", "risk: linkability"),
    (risks, "inference_risk", "risk: inference (all columns)"),
    (risks, "dcr_baseline_protection", "DCR vs random rows"),
    (evaluation, "column_fidelity", "fidelity"),
]


def _timed(function, totals: dict, label: str):
    def wrapper(*args, **kwargs):
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            totals[label] = totals.get(label, 0.0) + time.process_time() - start

    return wrapper


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-synthetic", type=int, default=100_000)
    parser.add_argument("--n-train", type=int, default=100_000)
    parser.add_argument("--n-cols", type=int, default=20)
    parser.add_argument("--categorical-share", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stages", action="store_true", help="also print the CPU seconds of each part")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    n_numeric = max(1, round((1 - args.categorical_share) * args.n_cols))
    loadings = rng.normal(0, 1, size=(4, n_numeric))
    train = make_table(args.n_train, args.n_cols, rng, loadings)
    holdout = make_table(args.n_train, args.n_cols, rng, loadings)
    synthetic = make_table(args.n_synthetic, args.n_cols, rng, loadings)
    print(
        f"data: synthetic {synthetic.shape}, train {train.shape}, holdout {holdout.shape}; "
        f"{n_numeric} numeric + {args.n_cols - n_numeric} categorical columns; "
        f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}; peak RSS {peak_rss_mib():.0f} MiB"
    )
    totals: dict[str, float] = {}
    if args.stages:
        for module, name, label in _STAGES:
            setattr(module, name, _timed(getattr(module, name), totals, label))
    with Stage() as stage:
        result = evaluation.synthetic_privacy_checks(train, holdout, synthetic, seed=args.seed)
    print(
        f"synthetic_privacy_checks (encode, NNDR, textbook NNDR, DCR, distance MIA, risks, fidelity): "
        f"{stage}  (dcr_share {result['dcr']['dcr_share']:.4f}, MIA AUC {result['mia']['auc']:.4f}, "
        f"passed {result['passed']})"
    )
    for label, seconds in totals.items():
        print(f"  {label}: {seconds:.2f} s CPU")
    print(f"peak RSS: {peak_rss_mib():.0f} MiB; load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
