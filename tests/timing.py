"""Sum the per-test times that PRIVACY_AUDIT_TEST_TIMES=FILE wrote (tests/conftest.py) per test file.

    python -m tests.timing FILE            # a Markdown table, the most CPU first (docs/test-suite.md)
    python -m tests.timing FILE --costs    # FILE_CPU_SECONDS for tests/conftest.py (the xdist schedule)
    python -m tests.timing FILE --slow S [--slow-wall W]   # tests/measured_slow.txt: the tests at S CPU
                                           # seconds or more each (or W wall seconds: a test that waits)

CPU seconds include the child processes a test waited for (CLI runs, worker pools, Ray excepted), so they
say what a file costs on an idle machine better than wall time on a shared one."""

from __future__ import annotations

import sys
from collections import defaultdict


def slow_list(path: str, threshold: float, wall_threshold: float = float("inf")) -> None:
    """One node id per line (a test, with its parameters), costliest first, for every test measured at
    `threshold` CPU seconds or more, or `wall_threshold` wall seconds (a test that waits: a time limit, a
    cluster starting): tests/conftest.py marks them `slow`, so `make test-fast` leaves them out."""
    cpu: dict[str, float] = defaultdict(float)
    wall: dict[str, float] = defaultdict(float)
    for line in open(path):
        nodeid, w, c = line.rstrip("\n").rsplit("\t", 2)
        cpu[nodeid], wall[nodeid] = max(cpu[nodeid], float(c)), max(wall[nodeid], float(w))
    slow = sorted((n for n in cpu if cpu[n] >= threshold or wall[n] >= wall_threshold), key=cpu.get, reverse=True)
    print(
        f"# tests measured at >= {threshold:g} s of CPU or >= {wall_threshold:g} s of wall time each"
        f" (python -m tests.timing TIMES --slow {threshold:g} --slow-wall {wall_threshold:g}):"
    )
    print(
        f"# {len(slow)} tests, {sum(cpu[n] for n in slow):.0f} of {sum(cpu.values()):.0f} CPU s. Marked slow by"
        " tests/conftest.py; regenerate after a whole-suite run (docs/test-suite.md)."
    )
    for nodeid in slow:
        print(nodeid)


def main(path: str, costs: bool = False) -> None:
    wall, cpu, count = defaultdict(float), defaultdict(float), defaultdict(int)
    for line in open(path):
        nodeid, w, c = line.rstrip("\n").rsplit("\t", 2)
        name = nodeid.split("::")[0]
        wall[name] += float(w)
        cpu[name] += float(c)
        count[name] += 1
    if costs:
        print("FILE_CPU_SECONDS: dict[str, float] = {")
        for name in sorted(cpu, key=cpu.get, reverse=True):
            print(f'    "{name}": {cpu[name]:.0f},')
        print("}")
        return
    print("| file | tests | CPU s | wall s |\n|---|---:|---:|---:|")
    for name in sorted(cpu, key=cpu.get, reverse=True):
        print(f"| {name} | {count[name]} | {cpu[name]:.0f} | {wall[name]:.0f} |")
    print(f"| **total** | {sum(count.values())} | {sum(cpu.values()):.0f} | {sum(wall.values()):.0f} |")


if __name__ == "__main__":
    if "--slow" in sys.argv[2:]:
        wall_limit = float(sys.argv[sys.argv.index("--slow-wall") + 1]) if "--slow-wall" in sys.argv else float("inf")
        slow_list(sys.argv[1], float(sys.argv[sys.argv.index("--slow") + 1]), wall_limit)
    else:
        main(sys.argv[1], costs="--costs" in sys.argv[2:])
