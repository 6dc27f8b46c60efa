"""Helper of benchmarks/gpu_check.sh: time one step, or summarise the steps' outputs.

    python benchmarks/gpu_check_time.py --name N --cap S --json F --log L -- command...
        runs the command in its own process group (killed after S seconds), copies its output to L
        and stdout, and writes {rc, wall_s, max_rss_mib, timed_out, command} to F;
    python benchmarks/gpu_check_time.py --summarize RUNS LOGS
        prints a Markdown summary of the steps' results (run folders under RUNS, step JSON in LOGS),
        writes LOGS/summary.json and copies the text and smoke runs' results.json into LOGS.

Only the standard library: it must work before anything else is known to import.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


def run_step(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    started = time.perf_counter()
    timed_out = False
    with open(args.log, "w") as log:
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            text=True,
            errors="replace",
        )
        deadline = time.monotonic() + args.cap

        def _kill(_signum=None, _frame=None):
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    return
                time.sleep(3)

        signal.signal(signal.SIGTERM, lambda *a: (_kill(), sys.exit(143)))
        import threading

        timer = threading.Timer(max(deadline - time.monotonic(), 0), _kill)
        timer.start()
        for line in proc.stdout:
            sys.stdout.write(line)
            log.write(line)
        rc = proc.wait()
        timer.cancel()
        timed_out = time.monotonic() >= deadline
    wall = time.perf_counter() - started
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    Path(args.json).write_text(
        json.dumps(
            {
                "name": args.name,
                "command": command,
                "rc": rc,
                "wall_s": wall,
                "max_rss_mib": rss,
                "timed_out": timed_out,
                "cap_s": args.cap,
            },
            indent=1,
        )
    )
    return rc


def _load(path) -> dict | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def _results(runs: Path, name: str) -> tuple[dict | None, Path | None]:
    found = sorted(glob.glob(str(runs / name / "*" / "results.json")))
    return (_load(found[-1]), Path(found[-1])) if found else (None, None)


def _fmt(x, spec=".2f"):
    return "—" if x is None else format(x, spec)


def summarize(runs: Path, logs: Path) -> None:
    summary: dict = {"steps": {}}
    for step in sorted(logs.glob("*.json")):
        data = _load(step)
        if data and "wall_s" in data:
            summary["steps"][data["name"]] = {k: data[k] for k in ("rc", "wall_s", "max_rss_mib", "timed_out")}
    print("\n## Numbers")
    for name in ("smoke-gpu", "smoke-cpu"):
        res, path = _results(runs, name)
        if res is None:
            continue
        shutil.copy(path, logs / f"{name}-results.json")
        env = res.get("environment", {})
        rows = []
        for t in res.get("targets", []):
            w = t.get("whitebox_one_run") or {}
            rows.append(
                {
                    "epsilon": t.get("epsilon_target"),
                    "train_s": t.get("train_seconds"),
                    "twin_train_s": w.get("train_seconds_with_canaries"),
                    "twin_status": w.get("status"),
                    "test_accuracy": t.get("test_accuracy"),
                    "twin_test_accuracy": w.get("test_accuracy_with_canaries"),
                    "m": w.get("m"),
                    "canary_kind": w.get("kind"),
                }
            )
        summary[name] = {
            "device": env.get("device"),
            "gpu": env.get("cuda_device_name"),
            "verdict": (res.get("verdict") or {}).get("status"),
            "targets": rows,
        }
        print(
            f"\n{name}: device {env.get('device')} {env.get('cuda_device_name') or ''}, verdict "
            f"{summary[name]['verdict']}, wall {_fmt(summary['steps'].get(name, {}).get('wall_s'), '.1f')} s"
        )
        print(
            "| target ε | train s (target) | train s (twin with canaries) | twin / target | one-run status | acc target / twin |"
        )
        print("|---|---|---|---|---|---|")
        for r in rows:
            ratio = r["twin_train_s"] / r["train_s"] if r["twin_train_s"] and r["train_s"] else None
            eps = "∞" if r["epsilon"] is None else f"{r['epsilon']:g}"
            print(
                f"| {eps} | {_fmt(r['train_s'])} | {_fmt(r['twin_train_s'])} | {_fmt(ratio, '.1f')}{'×' if ratio else ''} | "
                f"{r['twin_status'] or '—'} | {_fmt(r['test_accuracy'], '.3f')} / {_fmt(r['twin_test_accuracy'], '.3f')} |"
            )
    res, path = _results(runs, "text-gpu")
    step = summary["steps"].get("text-gpu")
    if step:
        mem = []
        try:
            mem = [float(x) for x in (logs / "text-gpu-memory.txt").read_text().split() if x.strip()]
        except (OSError, ValueError):
            pass
        text = {
            "wall_s": step["wall_s"],
            "max_rss_mib": step["max_rss_mib"],
            "rc": step["rc"],
            "timed_out": step["timed_out"],
            "gpu_memory_used_mib_peak": max(mem) if mem else None,
            "gpu_memory_used_mib_before": mem[0] if mem else None,
            "samples": len(mem),
        }
        if res is not None:
            shutil.copy(path, logs / "text-gpu-results.json")
            for extra in ("results.csv", "summary.md"):
                if (path.parent / extra).exists():
                    shutil.copy(path.parent / extra, logs / f"text-gpu-{extra}")
            text["device"] = res.get("environment", {}).get("device")
            text["verdict"] = (res.get("verdict") or {}).get("status")
        summary["text-gpu"] = text
        print(
            f"\ntext-gpu: device {text.get('device')}, rc {text['rc']}{' (TIMED OUT)' if text['timed_out'] else ''}, "
            f"wall {text['wall_s']:.0f} s, peak RSS {text['max_rss_mib']:.0f} MiB, card memory used peak "
            f"{_fmt(text['gpu_memory_used_mib_peak'], '.0f')} MiB (before: {_fmt(text['gpu_memory_used_mib_before'], '.0f')} MiB; "
            f"{len(mem)} samples), verdict {text.get('verdict')}"
        )
    bench = {}
    for name in ("bench-gpu", "bench-cpu", "bench-cpu-all"):
        data = _load(logs / f"{name}-result.json")
        if data:
            bench[name] = data
            print(
                f"\n{name}: device {data.get('device')}, {data.get('n_models')} models, threads {data.get('torch_threads')}: "
                f"Opacus {_fmt(data.get('opacus_models_per_second'))} models/s, vectorized "
                f"{_fmt(data.get('vectorized_models_per_second'))} models/s, ratio {_fmt(data.get('speedup'), '.1f')}×"
            )
    if "bench-gpu" in bench and "bench-cpu" in bench:
        g, c = bench["bench-gpu"], bench["bench-cpu"]
        try:
            print(
                f"vectorized GPU / vectorized CPU (same machine): "
                f"{g['vectorized_models_per_second'] / c['vectorized_models_per_second']:.1f}×; "
                f"vectorized GPU / Opacus CPU: {g['vectorized_models_per_second'] / c['opacus_models_per_second']:.1f}×"
            )
        except (KeyError, TypeError, ZeroDivisionError):
            pass
    summary["bench"] = bench
    found = sorted(glob.glob(str(runs / "whitebox" / "*" / "whitebox-audit.json")))
    if found:
        wb = _load(found[-1]) or {}
        cost, acc = wb.get("cost") or {}, wb.get("accuracy") or {}
        verdict = wb.get("verdict") or {}
        summary["whitebox-one-run"] = {
            "cost": cost,
            "accuracy": acc,
            "canaries": wb.get("canaries"),
            "claimed_epsilon": wb.get("claimed_epsilon"),
            "status": verdict.get("status"),
        }
        m = (wb.get("canaries") or {}).get("m")
        sc, sp = cost.get("seconds_with_canaries"), cost.get("seconds_plain")
        print(
            f"\nwhitebox-one-run (CPU): m {m}, claim ε {_fmt(wb.get('claimed_epsilon'))}, status {verdict.get('status')}; "
            f"train s with canaries {_fmt(sc)} / plain {_fmt(sp)}"
            + (f" ({sc / sp:.1f}×)" if sc and sp else "")
            + f"; accuracy {_fmt(acc.get('with_canaries'), '.3f')} / {_fmt(acc.get('plain'), '.3f')}"
        )
    (logs / "summary.json").write_text(json.dumps(summary, indent=1, default=str))


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--summarize":
        summarize(Path(sys.argv[2]), Path(sys.argv[3]))
        return 0
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--cap", type=float, required=True)
    parser.add_argument("--json", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    return run_step(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
