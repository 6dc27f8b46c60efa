"""Sum the per-test times that PRIVACY_AUDIT_TEST_TIMES=FILE wrote (tests/conftest.py) per test file.

    python -m tests.timing FILE            # a Markdown table, the most CPU first (docs/test-suite.md)
    python -m tests.timing FILE --costs    # FILE_CPU_SECONDS for tests/conftest.py (the xdist schedule)
    python -m tests.timing FILE --slow S [--slow-wall W]   # tests/measured_slow.txt: the tests at S CPU
                                           # seconds or more each (or W wall seconds: a test that waits)
    ... --partial                          # FILE is a run that did not reach every file (see below)

FILE has one line per finished test: node id, wall seconds, CPU seconds (setup, call and teardown
together). CPU seconds include the child processes a test waited for (CLI runs, worker pools; Ray's own
processes excepted), so they say what a file costs on an idle machine better than wall time on a shared
one (CPU time still grows somewhat under contention: compare files within one run).

`--partial`: with `--costs`, the files FILE has no line for keep tests/conftest.py's figure, and the measured
files are put on that table's scale (multiplied by the median ratio table / measured over the files in both,
printed), so that a run under another load does not reorder files it did not measure; with `--slow`, the
entries of tests/measured_slow.txt whose file FILE has no line for are kept."""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent
MAX_CORES = 4  # a test's own CPU over its wall time, at most (torch's threads on the suite's 2-core machines)


def read_times(path: str) -> tuple[dict[str, float], dict[str, float]]:
    """Per test node id: the most CPU and wall seconds any line gave it (a rerun test appears twice)."""
    cpu: dict[str, float] = defaultdict(float)
    wall: dict[str, float] = defaultdict(float)
    for line in open(path):
        if not line.strip():
            continue
        nodeid, w, c = line.rstrip("\n").rsplit("\t", 2)
        cpu[nodeid], wall[nodeid] = max(cpu[nodeid], float(c)), max(wall[nodeid], float(w))
    return cpu, wall


def _file(nodeid: str) -> str:
    return nodeid.split("::")[0]


def slow_list(path: str, threshold: float, wall_threshold: float = float("inf"), partial: bool = False) -> None:
    """One node id per line (a test, with its parameters), costliest first, for every test measured at
    `threshold` CPU seconds or more, or `wall_threshold` wall seconds (a test that waits: a time limit, a
    cluster starting): tests/conftest.py marks them `slow`, so `make test-fast` leaves them out."""
    cpu, wall = read_times(path)
    # More CPU than the machine's cores could give in the test's wall time: children reaped in this test's
    # teardown (a module fixture's pool, before tests/conftest.py counted live descendants), not its own cost.
    reaped = {n for n in cpu if cpu[n] > wall[n] * MAX_CORES + 1}
    slow = sorted(
        (n for n in cpu if n not in reaped and (cpu[n] >= threshold or wall[n] >= wall_threshold)),
        key=cpu.get,
        reverse=True,
    )
    print(
        f"# tests measured at >= {threshold:g} s of CPU or >= {wall_threshold:g} s of wall time each"
        f" (python -m tests.timing TIMES --slow {threshold:g} --slow-wall {wall_threshold:g}"
        f"{' --partial' if partial else ''}):"
    )
    print(
        f"# {len(slow)} tests, {sum(cpu[n] for n in slow):.0f} of {sum(cpu.values()):.0f} CPU s. Marked slow by"
        " tests/conftest.py; regenerate after a whole-suite run (docs/test-suite.md)."
        f" Left out: {len(reaped)} tests whose CPU exceeds {MAX_CORES} x their wall time (children reaped there)."
    )
    for nodeid in slow:
        print(nodeid)
    if partial:
        measured_files = {_file(n) for n in cpu}
        kept = [
            line
            for line in (TESTS / "measured_slow.txt").read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#") and _file(line) not in measured_files
        ]
        print(f"# {len(kept)} entries kept from the previous list: their files were not in this run")
        for line in kept:
            print(line)


def file_costs(path: str) -> tuple[dict[str, float], dict[str, float], dict[str, int]]:
    cpu, wall = read_times(path)
    per_cpu: dict[str, float] = defaultdict(float)
    per_wall: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for nodeid in cpu:
        name = _file(nodeid)
        per_cpu[name] += cpu[nodeid]
        per_wall[name] += wall[nodeid]
        count[name] += 1
    return per_cpu, per_wall, count


def main(path: str, costs: bool = False, partial: bool = False) -> None:
    cpu, wall, count = file_costs(path)
    if costs:
        table = dict(cpu)
        note = "measured"
        if partial:
            from tests.conftest import FILE_CPU_SECONDS

            both = [n for n in cpu if FILE_CPU_SECONDS.get(n, 0) >= 5 and cpu[n] >= 5]
            scale = statistics.median(FILE_CPU_SECONDS[n] / cpu[n] for n in both) if both else 1.0
            table = {n: c * scale for n, c in cpu.items()}
            kept = {n: float(c) for n, c in FILE_CPU_SECONDS.items() if n not in cpu}
            table.update(kept)
            note = f"measured x {scale:.2f} (median over {len(both)} files in both); {len(kept)} kept from the table"
        print(f"# {note}")
        print("FILE_CPU_SECONDS: dict[str, float] = {")
        for name in sorted(table, key=table.get, reverse=True):
            print(f'    "{name}": {table[name]:.0f},')
        print("}")
        return
    print("| file | tests | CPU s | wall s |\n|---|---:|---:|---:|")
    for name in sorted(cpu, key=cpu.get, reverse=True):
        print(f"| {name} | {count[name]} | {cpu[name]:.0f} | {wall[name]:.0f} |")
    print(f"| **total** | {sum(count.values())} | {sum(cpu.values()):.0f} | {sum(wall.values()):.0f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        prog="python -m tests.timing", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("times", help="the file PRIVACY_AUDIT_TEST_TIMES named")
    parser.add_argument("--costs", action="store_true", help="print FILE_CPU_SECONDS for tests/conftest.py")
    parser.add_argument("--slow", type=float, metavar="S", help="list the tests at S CPU seconds or more")
    parser.add_argument("--slow-wall", type=float, default=float("inf"), metavar="W", help="...or W wall seconds")
    parser.add_argument("--partial", action="store_true", help="the run did not reach every file: keep the rest")
    args = parser.parse_args()
    if args.slow is not None:
        slow_list(args.times, args.slow, args.slow_wall, args.partial)
    else:
        main(args.times, costs=args.costs, partial=args.partial)
