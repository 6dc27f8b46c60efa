"""False alarms and time of the re-identification risks (audit/statistics/synthetic_risks.py).

    python benchmarks/bench_synthetic_risks.py [--repeats 60] [--rows 1500] [--scale-rows 20000]

1. Null study: train, control and release drawn independently from one mixed-type population
   (3 numeric, 3 categorical columns); counts releases with any risk flagged at family α = 0.05
   (Bonferroni over singling out, linkability and one inference per column). Must be ≤ 5 %.
2. Time of `synthetic_risks` on three independent `--scale-rows`-row tables of 20 columns
   (14 numeric, 6 categorical).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.statistics.synthetic_risks import risk_test_count, synthetic_risks  # noqa: E402


def population(n: int, rng: np.random.Generator) -> pd.DataFrame:
    age = rng.integers(18, 90, n)
    income = np.round(rng.lognormal(10 + 0.01 * (age - 50), 0.5), 2)
    return pd.DataFrame(
        {
            "age": age,
            "sex": rng.choice(["f", "m"], n),
            "region": rng.choice(["north", "south", "east", "west", "centre"], n, p=[0.3, 0.2, 0.2, 0.2, 0.1]),
            "income": income,
            "job": np.where(
                income > 30000,
                rng.choice(["manager", "engineer", "clerk"], n),
                rng.choice(["clerk", "driver", "nurse", "teacher"], n),
            ),
            "hours": np.clip(np.round(rng.normal(38, 8, n)), 5, 80),
        }
    )


def wide(n: int, rng: np.random.Generator) -> pd.DataFrame:
    columns = {f"x{i}": rng.normal(size=n) for i in range(14)}
    columns.update({f"c{i}": rng.choice(list("abcdef"), n) for i in range(6)})
    return pd.DataFrame(columns)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=60)
    parser.add_argument("--rows", type=int, default=1500)
    parser.add_argument("--scale-rows", type=int, default=20000)
    args = parser.parse_args()

    flagged, by_check = 0, {}
    for repeat in range(args.repeats):
        rng = np.random.default_rng(1000 + repeat)
        train, control, release = (population(args.rows, rng) for _ in range(3))
        result = synthetic_risks(train, control, release, alpha_each=0.05 / risk_test_count(6), seed=repeat)
        flagged += bool(result["flags"])
        for flag in result["flags"]:
            by_check[flag["check"]] = by_check.get(flag["check"], 0) + 1
    print(f"null releases flagged: {flagged} of {args.repeats} ({flagged / args.repeats:.1%}); by check {by_check}")

    rng = np.random.default_rng(0)
    train, control, release = (wide(args.scale_rows, rng) for _ in range(3))
    start = time.perf_counter()
    synthetic_risks(train, control, release, alpha_each=0.05 / risk_test_count(20))
    print(f"synthetic_risks on {args.scale_rows} rows × 20 columns: {time.perf_counter() - start:.1f} s wall")


if __name__ == "__main__":
    main()
