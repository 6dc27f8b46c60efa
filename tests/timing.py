"""Sum the per-test times that PRIVACY_AUDIT_TEST_TIMES=FILE wrote (tests/conftest.py) per test file.

    python -m tests.timing FILE            # a Markdown table, the most CPU first (docs/test-suite.md)
    python -m tests.timing FILE --costs    # FILE_CPU_SECONDS for tests/conftest.py (the xdist schedule)

CPU seconds include the child processes a test waited for (CLI runs, worker pools, Ray excepted), so they
say what a file costs on an idle machine better than wall time on a shared one."""
from __future__ import annotations

import sys
from collections import defaultdict


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
    main(sys.argv[1], costs="--costs" in sys.argv[2:])
