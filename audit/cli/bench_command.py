"""`bench`: training throughput, measured side by side."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from audit.cli.app import app, console, err_console
from audit.errors import AuditInputError


@app.command()
def bench(
    models: Annotated[int, typer.Option("--models", help="models trained at once by the vectorized trainer")] = 64,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    epochs: Annotated[int, typer.Option(help="epochs per model")] = 2,
    threads: Annotated[int, typer.Option(help="torch CPU threads for both trainers (as config cpu_threads)")] = 1,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="also write the measurements here")] = None,
) -> None:
    """Models/second of sequential Opacus vs the vectorized trainer, measured side by side on this device."""
    import warnings

    import torch

    warnings.filterwarnings("ignore", message="Secure RNG turned off")
    from rich.table import Table

    from audit.machinery.run_directory import write_json_atomic
    from targets.devices import resolve_device
    from targets.training_benchmark import benchmark_training

    from audit.machinery.input_files import max_threads

    if not 1 <= models <= 4096:
        raise AuditInputError("--models", f"must be in [1, 4096], got {models}")
    if not 1 <= epochs <= 1000:
        raise AuditInputError("--epochs", f"must be in [1, 1000], got {epochs}")
    if not 1 <= threads <= max_threads():
        raise AuditInputError("--threads", f"must be in [1, {max_threads()}] (4 per CPU core of this machine), got {threads}")
    resolved = resolve_device(device)
    torch.set_num_threads(threads)
    err_console.print(f"benchmarking {models} models on {resolved} (Opacus one at a time vs vectorized)…")
    result = benchmark_training(n_models=models, device=str(resolved), epochs=epochs)
    result["torch_threads"] = threads
    table = Table(title=f"training throughput on {result.get('device', resolved)} ({threads} CPU thread(s))")
    table.add_column("trainer")
    table.add_column("models / s", justify="right")
    table.add_row("Opacus, sequential", f"{result['opacus_models_per_second']:.2f}")
    table.add_row(f"vectorized ({result.get('method', '')}), {models} models", f"{result['vectorized_models_per_second']:.2f}")
    table.add_row("ratio", f"{result['speedup']:.1f}×")
    console.print(table)
    if json_out is not None:
        write_json_atomic(json_out, result)
