"""Time the synthetic-data privacy checks (NNDR, DCR, and the whole check) on seeded data.

    python benchmarks/bench_synthetic.py [--n-synthetic 100000] [--n-train 100000] [--n-cols 20]

Data: a seeded mixed-type table (70% numeric columns — correlated latent factors, skewed and
integer columns among them — and 30% categorical columns of 2 to 12 levels); train, holdout
(same size as train) and synthetic are independent draws from it, the expensive case (a copy is
found no faster). Prints wall seconds per stage and the process's peak RSS. Goal: 100k × 100k ×
20 columns within 30 s on 2 CPU cores, memory bounded (no n_synthetic × n_train matrix).
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

from audit.statistics.synthetic_evaluation import synthetic_privacy_checks  # noqa: E402
from audit.statistics.synthetic_metrics import dcr, nndr  # noqa: E402
from targets.tabular_encoding import MixedTypeEncoder  # noqa: E402

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

    def __enter__(self) -> "Stage":
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu

    def __str__(self) -> str:
        return f"{self.wall:6.1f} s wall, {self.cpu:6.1f} s CPU"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-synthetic", type=int, default=100_000)
    parser.add_argument("--n-train", type=int, default=100_000)
    parser.add_argument("--n-cols", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-stages", action="store_true", help="only time the whole check")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    n_numeric = max(1, round(0.7 * args.n_cols))
    loadings = rng.normal(0, 1, size=(4, n_numeric))
    train = make_table(args.n_train, args.n_cols, rng, loadings)
    holdout = make_table(args.n_train, args.n_cols, rng, loadings)
    synthetic = make_table(args.n_synthetic, args.n_cols, rng, loadings)
    print(f"data: synthetic {synthetic.shape}, train {train.shape}, holdout {holdout.shape}; "
          f"{n_numeric} numeric + {args.n_cols - n_numeric} categorical columns; "
          f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}; peak RSS {peak_rss_mib():.0f} MiB")

    if not args.skip_stages:
        with Stage() as stage:
            encoder = MixedTypeEncoder().fit(train, holdout)
            x_train, x_holdout, x_synthetic = (encoder.transform(df) for df in (train, holdout, synthetic))
        print(f"encode: {stage}  ({x_train.shape[1]} encoded features)")

        with Stage() as stage:
            result = nndr(x_synthetic, x_train)
        print(f"nndr:   {stage}  (median {result['median']:.3f}, p10 {result['p10']:.3f})")

        with Stage() as stage:
            result = dcr(x_synthetic, x_train, x_holdout)
        print(f"dcr:    {stage}  (dcr_share {result['dcr_share']:.4f}, "
              f"CI [{result['dcr_share_ci'][0]:.4f}, {result['dcr_share_ci'][1]:.4f}])")
        print(f"peak RSS so far: {peak_rss_mib():.0f} MiB")
        del x_train, x_holdout, x_synthetic

    with Stage() as stage:
        result = synthetic_privacy_checks(train, holdout, synthetic, seed=args.seed)
    print(f"synthetic_privacy_checks (encode + NNDR + textbook NNDR + DCR + distance MIA + fidelity): "
          f"{stage}  (dcr_share {result['dcr']['dcr_share']:.4f}, "
          f"MIA AUC {result['mia']['auc']:.4f}, passed {result['passed']})")
    print(f"peak RSS: {peak_rss_mib():.0f} MiB; load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
