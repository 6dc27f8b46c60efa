"""`bench`: training throughput, measured side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from audit.cli.app import app, console, err_console, shown
from audit.errors import AuditInputError


@app.command()
def bench(
    models: Annotated[int, typer.Option("--models", help="models trained at once by the vectorized trainer")] = 64,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    epochs: Annotated[int, typer.Option(help="epochs per model")] = 2,
    threads: Annotated[int, typer.Option(help="torch CPU threads for both trainers (as config cpu_threads)")] = 1,
    json_out: Annotated[Path | None, typer.Option("--json", help="also write the measurements here")] = None,
    executor: Annotated[
        str | None,
        typer.Option(
            "--executor",
            help="instead: throughput of user-trainer runs on local | processes | ray at each --workers-list "
            "count, and the projected wall time of the full preset and of a 10k-run canary audit on N GPUs",
        ),
    ] = None,
    workers_list: Annotated[
        str, typer.Option("--workers-list", help="with --executor: worker counts to measure")
    ] = "1,2",
    runs: Annotated[
        int,
        typer.Option(
            "--runs",
            help="with --executor: trainer runs timed per worker count (whole batches "
            "of this many are repeated until --min-seconds)",
        ),
    ] = 48,
    min_seconds: Annotated[
        float, typer.Option("--min-seconds", help="with --executor: time at least this long per worker count")
    ] = 10.0,
    rows: Annotated[
        int,
        typer.Option(
            "--rows",
            help="with --executor: rows of the default data each run trains on "
            "(more rows: longer tasks, less start-up per task)",
        ),
    ] = 256,
    trainer: Annotated[
        str, typer.Option("--trainer", help="with --executor: module:function, train(X, y, seed) -> model")
    ] = "audit.demos.dp_trainers:correct_dpsgd",
    ray_address: Annotated[
        str | None, typer.Option("--ray-address", help="with --executor ray: auto | ray://host:port")
    ] = None,
    gpus: Annotated[str, typer.Option("--gpus", help="with --executor: GPU counts N of the projection")] = "1,8,64",
    slots_per_gpu: Annotated[
        int,
        typer.Option("--slots-per-gpu", help="with --executor: tasks sharing one GPU (Ray's fractional GPU request)"),
    ] = 4,
) -> None:
    """Models/second of sequential Opacus vs the vectorized trainer, measured side by side on this device."""
    import warnings

    if executor is not None:
        _bench_executor(
            executor, workers_list, runs, trainer, ray_address, gpus, slots_per_gpu, json_out, rows, min_seconds
        )
        return

    import torch

    warnings.filterwarnings("ignore", message="Secure RNG turned off")
    from rich.table import Table

    from audit.machinery.input_files import max_threads
    from audit.machinery.limits import check_count, check_memory
    from audit.machinery.memory_estimates import bench_bytes
    from audit.machinery.run_directory import write_json_atomic
    from targets.devices import resolve_device
    from targets.training_benchmark import benchmark_training

    check_count("bench --models", models, where="--models")  # the range table (audit/machinery/limits.py)
    check_count("bench --epochs", epochs, where="--epochs")
    check_memory(bench_bytes(models), "--models", f"bench of {models:,} models trained at once")
    if not 1 <= threads <= max_threads():
        raise AuditInputError(
            "--threads", f"must be in [1, {max_threads()}] (4 per CPU core of this machine), got {threads}"
        )
    resolved = resolve_device(device)
    torch.set_num_threads(threads)
    err_console.print(f"benchmarking {models} models on {resolved} (Opacus one at a time vs vectorized)…")
    result = benchmark_training(n_models=models, device=str(resolved), epochs=epochs)
    result["torch_threads"] = threads
    table = Table(title=f"training throughput on {result.get('device', resolved)} ({threads} CPU thread(s))")
    table.add_column("trainer")
    table.add_column("models / s", justify="right")
    table.add_row("Opacus, sequential", f"{result['opacus_models_per_second']:.2f}")
    table.add_row(
        f"vectorized ({result.get('method', '')}), {models} models", f"{result['vectorized_models_per_second']:.2f}"
    )
    table.add_row("ratio", f"{result['speedup']:.1f}×")
    console.print(table)
    if json_out is not None:
        write_json_atomic(json_out, result)


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise AuditInputError(flag, f"expected comma-separated integers ≥ 1, got {text!r}")
    return values


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _bench_executor(
    kind: str,
    workers_list: str,
    runs: int,
    trainer: str,
    ray_address: str | None,
    gpus: str,
    slots_per_gpu: int,
    json_out: Path | None,
    rows: int = 256,
    min_seconds: float = 0.0,
) -> None:
    import warnings

    from rich.table import Table

    from audit.machinery.executor_benchmark import (
        full_preset_model_trainings,
        full_preset_seconds_per_model,
        load_average,
        projected_wall_seconds,
        trainer_throughput,
    )
    from audit.machinery.executors import check_executor_options, default_workers
    from audit.machinery.run_directory import write_json_atomic

    warnings.filterwarnings("ignore", message="Secure RNG turned off")
    counts = _int_list(workers_list, "--workers-list")
    gpu_counts = _int_list(gpus, "--gpus")
    from audit.machinery.limits import check_count

    check_count("bench --runs", runs, where="--runs")  # the range table (audit/machinery/limits.py)
    check_count("bench --slots-per-gpu", slots_per_gpu, where="--slots-per-gpu")
    for count in gpu_counts:
        check_count("bench --gpus", count, where="--gpus")
    if not 0 <= min_seconds <= 86_400:
        raise AuditInputError("--min-seconds", f"must be in [0, 86400], got {min_seconds}")
    check_count("bench --rows", rows, where="--rows")
    if kind == "local" and counts != [1]:
        counts = [1]  # local runs one task at a time
    for count in counts:
        check_executor_options(kind, None if kind == "local" else count, ray_address)
    err_console.print(
        f"timing {runs} runs of {shown(trainer)} on {kind} with {', '.join(map(str, counts))} worker(s) "
        f"({default_workers()} core(s) here)…"
    )
    measured = [
        trainer_throughput(
            kind, count, runs, trainer=trainer, ray_address=ray_address, n_rows=rows, min_seconds=min_seconds
        )
        for count in counts
    ]
    if len({tuple(m["checksums"]) for m in measured}) != 1:
        raise RuntimeError(
            "the trainer gave different models at different worker counts: its runs are not "
            "seeded by their task id alone"
        )
    base = measured[0]
    table = Table(title=f"user-trainer runs on {kind} ({trainer}, {rows} rows, ≥ {min_seconds:g} s each)")
    for column in (
        "workers",
        "runs",
        "runs / s",
        "s / run / worker",
        f"ratio to {base['workers']} worker(s)",
        "load avg 1 min (start → end)",
    ):
        table.add_column(column, justify="right")

    def load(values) -> str:
        return "?" if values is None else f"{values[0]:.2f}"

    for m in measured:
        m["ratio"] = m["runs_per_second"] / base["runs_per_second"]
        table.add_row(
            str(m["workers"]),
            str(m["runs"]),
            f"{m['runs_per_second']:.2f}",
            f"{m['seconds_per_run_per_worker']:.3f}",
            f"{m['ratio']:.2f}×",
            f"{load(m['load_average_before'])} → {load(m['load_average_after'])}",
        )
    console.print(table)
    now = load_average()
    console.print(
        f"{default_workers()} core(s) here; load average (1, 5, 15 min) now: "
        f"{'unknown' if now is None else ', '.join(f'{v:.2f}' for v in now)}. Other processes on the "
        "machine lower the throughput and the ratio: compare ratios measured on an idle machine.",
        highlight=False,
    )

    per_run = base["seconds_per_run_per_worker"]
    err_console.print("timing one model of the full preset (vectorized DP-SGD, 1 CPU thread)…")
    per_model, model_shape = full_preset_seconds_per_model()
    n_models, full_shape = full_preset_model_trainings()
    projection = Table(title=f"projected wall time, {slots_per_gpu} task slots per GPU, per-task cost measured here")
    projection.add_column("work")
    projection.add_column("tasks", justify="right")
    projection.add_column("s / task", justify="right")
    for n in gpu_counts:
        projection.add_column(f"{n} GPU{'s' if n > 1 else ''}", justify="right")
    work = {
        "canary audit, 10,000 trainer runs": (10_000, per_run),
        f"full preset: {n_models} models, one per task": (n_models, per_model),
    }
    projections = []
    for label, (tasks, cost) in work.items():
        walls = [projected_wall_seconds(tasks, cost, n, slots_per_gpu) for n in gpu_counts]
        projection.add_row(label, f"{tasks:,}", f"{cost:.2f}", *map(_duration, walls))
        projections.append(
            {
                "work": label,
                "tasks": tasks,
                "seconds_per_task": cost,
                "wall_seconds": dict(zip(map(str, gpu_counts), walls)),
            }
        )
    console.print(projection)
    console.print(
        "Projection: ⌈tasks / (GPUs × slots)⌉ × the per-task cost measured on this machine; it assumes "
        "a GPU slot runs a task as fast as one worker here (a GPU's own speed-up is not measured) and "
        "counts no start-up or scheduling time."
    )
    if json_out is not None:
        write_json_atomic(
            json_out,
            {
                "executor": kind,
                "trainer": trainer,
                "rows": rows,
                "measured": measured,
                "cores_here": default_workers(),
                "load_average_end": now,
                "full_preset": {**full_shape, **model_shape, "models": n_models, "seconds_per_model": per_model},
                "slots_per_gpu": slots_per_gpu,
                "projections": projections,
            },
        )
