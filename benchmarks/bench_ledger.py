"""Throughput of the privacy-budget ledger: releases recorded per second, with and without a budget.

Without a budget a record is one short locked transaction (insert); with one, the dataset's active
releases are recomposed with dp_accounting inside the lock (`audit/ledger/store.py`), so the time per
record grows with the number of DISTINCT mechanisms recorded, not with the number of releases.
W processes record N releases each into one ledger at once (SQLite file, or a PostgreSQL URI);
the time is from the first record to the last (process start-up excluded). Prints a Markdown table.

    python benchmarks/bench_ledger.py                                   # SQLite, 4 × 50
    python benchmarks/bench_ledger.py --writers 8 --releases 100
    python benchmarks/bench_ledger.py --postgres postgresql+psycopg://user@127.0.0.1:5432/bench
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.ledger.store import Ledger, ReleaseInput  # noqa: E402

KINDS = [
    {"kind": "laplace", "scale": 200.0},
    {"kind": "laplace", "scale": 400.0},
    {"kind": "gaussian", "scale": 50.0},
    {"kind": "gaussian", "scale": 100.0},
]


def _write(args: tuple[str, str, int, int, bool]) -> tuple[float, float]:
    """(start, end) wall-clock times of this writer's record loop (process start-up and imports excluded)."""
    uri, dataset, worker, count, compute = args
    with Ledger.open(uri) as ledger:
        started = time.time()
        for i in range(count):
            ledger.record(
                dataset, [ReleaseInput(f"w{worker} r{i}", "bench", [KINDS[(worker + i) % 4]])], compute_spent=compute
            )
        return started, time.time()


def _run(uri: str, dataset: str, writers: int, releases: int, budget: bool) -> float:
    with Ledger.open(uri) as ledger:
        ledger.set_budget(dataset, 1e4 if budget else None, None)
    with multiprocessing.get_context("spawn").Pool(writers) as pool:
        spans = pool.map(_write, [(uri, dataset, w, releases, budget) for w in range(writers)])
    seconds = max(end for _, end in spans) - min(start for start, _ in spans)  # first record to last
    with Ledger.open(uri) as ledger:
        assert ledger.count_releases(dataset) == writers * releases
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--releases", type=int, default=50, help="per writer")
    parser.add_argument("--postgres", help="also bench this (empty) PostgreSQL database")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        backends = [("SQLite", str(Path(tmp) / "ledger.db"))] + (
            [("PostgreSQL", args.postgres)] if args.postgres else []
        )
        print("| database | budget (recompose in the lock) | writers × releases | seconds | releases / s |")
        print("|---|---|---|---|---|")
        for name, uri in backends:
            for budget in (False, True):
                dataset = f"bench-{'budget' if budget else 'plain'}"
                seconds = _run(uri, dataset, args.writers, args.releases, budget)
                total = args.writers * args.releases
                print(
                    f"| {name} | {'yes' if budget else 'no'} | {args.writers} × {args.releases} | {seconds:.1f} | "
                    f"{total / seconds:.1f} |"
                )


if __name__ == "__main__":
    main()
