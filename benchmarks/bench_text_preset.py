"""Wall time and peak memory of `run --preset text` (docs/language-models.md), and its tables.

Runs the text job in this process (the same code `privacy-audit run --preset text` calls), then
prints the wall time, the peak resident memory of the process (ru_maxrss: the models, the corpus
and the exposure enumeration all live here), the device, the load average (the machine may be
shared: say so next to any number) and the docs' Markdown tables.

    python benchmarks/bench_text_preset.py                     # the docs' numbers
    python benchmarks/bench_text_preset.py --device cuda       # on a GPU, where one is lent
    python benchmarks/bench_text_preset.py --set text.epochs=2 # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.machinery.config import resolve_config  # noqa: E402
from audit.text.runner import run_text_audit  # noqa: E402
from reports.text_tables import attack_rows, markdown_table, per_epsilon_rows  # noqa: E402


def _override(text: str) -> dict:
    key, value = text.split("=", 1)
    node: dict = {}
    cursor = node
    parts = key.split(".")
    for part in parts[:-1]:
        cursor = cursor.setdefault(part, {})
    cursor[parts[-1]] = json.loads(value)
    return node


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--set", action="append", default=[], help="dotted.key=JSON value, e.g. text.epochs=2")
    parser.add_argument("--out", default=None, help="keep the run folder here (default: a temporary folder)")
    args = parser.parse_args()
    overrides: dict = {"device": args.device}
    for item in args.set:
        for key, value in _override(item).items():
            overrides.setdefault(key, {}).update(value) if isinstance(value, dict) else overrides.update({key: value})
    config = resolve_config("text", None, overrides)
    out = args.out or tempfile.mkdtemp(prefix="bench-text-")
    load_before = os.getloadavg()
    started = time.perf_counter()
    run = run_text_audit(config, out_dir=out, tracking_uri=f"sqlite:///{Path(out) / 'mlflow.db'}", preset="text")
    wall = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"wall {wall:.0f} s, peak RSS {peak_mb:.0f} MiB, device {run.results['environment'].get('device')}, "
        f"load average before {load_before[0]:.1f} after {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(f"verdict: {run.results['verdict']['status']}; run folder {run.run_dir}\n")
    print(markdown_table(*per_epsilon_rows(run.results)))
    print()
    print(markdown_table(*attack_rows(run.results)))
    blind = run.results["text"]["blind_baseline"]
    print(f"\nblind baseline AUC {blind['auc']:.3f}, permutation p = {blind['p_value_above_chance']:.2f}")


if __name__ == "__main__":
    main()
