"""Power of LiRA, LiRA offline and RMIA against the number of reference models per target (docs/run.md, wave 9).

    python benchmarks/bench_reference_count_power.py [--seeds 1,2,3] [--counts 64,32] [--out DIR]

For each seed and count K: `privacy-audit run --no-tracking` on the default config with its ε = 8 and ε = ∞ targets
alone, the three attacks that read the reference bank (`attacks.n_reference_models` = K), no white-box twin and no
conformance probes (K touches neither), then one line per (seed, K, target, attack): AUC, TPR at 0.1 % and 1 % FPR,
the one-run ε lower bound, and the run's CPU seconds (`/usr/bin/time`, both processes). The seeds are not the
default run's seed 0, and the rule that decides (docs/run.md) was written down before any K other than 64 ran:
nothing here is tuned on the scores it reports. A run already in `--out` is read, not run again.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = """seed: {seed}
privacy: {{epsilons: [8.0, .inf], whitebox_one_run: false, conformance: false}}
attacks: {{names: [lira, lira_offline, rmia], n_reference_models: {count}}}
"""


def run_one(out: Path, seed: int, count: int) -> Path:
    folder = out / f"s{seed}_k{count}"
    if not folder.exists():  # a folder already there is a finished run (or one still running): read, never rerun
        folder.mkdir(parents=True)
        (folder / "cfg.yaml").write_text(CONFIG.format(seed=seed, count=count))
        command = ["/usr/bin/time", "-f", "%e s wall, %U s user + %S s sys", "-o", str(folder / "time.txt")]
        command += [str(Path(sys.executable).with_name("privacy-audit")), "run", "--config", str(folder / "cfg.yaml")]
        command += ["--out", str(folder / "out"), "--no-tracking"]
        with open(folder / "log", "w") as log:
            subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=False)
    return folder


def rows(folder: Path) -> list[str]:
    results = sorted(folder.glob("out/*/results.json"))[-1]
    timing = (folder / "time.txt").read_text().strip().splitlines()[-1] if (folder / "time.txt").exists() else ""
    lines = []
    for target in json.loads(results.read_text())["targets"]:
        eps = target["epsilon_target"]
        for attack in target["attacks"]:
            tpr = attack["tpr_at_fpr"]
            lines.append(
                f"{folder.name:8s} ε {'∞' if eps is None else f'{eps:g}':3s} {attack['name']:13s} "
                f"AUC {attack['auc']:.4f}  TPR@0.1% {tpr['0.001']:.4f}  TPR@1% {tpr['0.01']:.4f}  "
                f"ε LB 1-run {attack['epsilon_lb']['one_run'] or 0.0:.3f}   ({timing})"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--counts", default="64,32")
    parser.add_argument("--out", default="reference-count-power")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    for seed in (int(s) for s in args.seeds.split(",")):
        for count in (int(k) for k in args.counts.split(",")):
            print("\n".join(rows(run_one(out, seed, count))), flush=True)


if __name__ == "__main__":
    main()
