"""`privacy-audit` command line. Thin: parse flags, call the Python API, print, set the exit code.

Exit codes: 0 ok; 1 a violation (or a failed policy); 2 bad input — one line naming the field,
file or column, no traceback, nothing half-written.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from audit.errors import AuditInputError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Audit trained models and synthetic data for membership leakage; compare empirical ε with the accountant's.",
)
console = Console()
if not console.is_terminal:  # piped or in CI: do not squeeze the results table into 80 columns
    console = Console(width=160)
err_console = Console(stderr=True)

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


@app.callback()
def _commands() -> None:
    """privacy-audit: membership-inference audits with empirical ε next to the accountant's ε."""


class _RichProgress:
    """Adapts the runner's progress callbacks to a rich progress bar per target."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.task = None

    def target_started(self, index: int, total: int, label: str, epochs: int) -> None:
        if self.task is not None:
            self.progress.update(self.task, visible=True)
        self.task = self.progress.add_task(f"target {index + 1}/{total} ({label})", total=epochs)

    def epoch_done(self, epoch: int, epochs: int) -> None:
        self.progress.update(self.task, completed=epoch)

    def note(self, text: str) -> None:
        self.progress.console.print(f"[yellow]{text}[/yellow]")


@app.command()
def run(
    config: Annotated[Optional[Path], typer.Option("--config", help="YAML config; fields override the preset")] = None,
    preset: Annotated[str, typer.Option(help="smoke | default | full")] = "default",
    out: Annotated[Path, typer.Option("--out", help="folder that receives runs/<timestamp>-<name>/")] = Path("runs"),
    tracking_uri: Annotated[Optional[str], typer.Option("--tracking-uri", help="MLflow store (default sqlite:///mlflow.db)")] = None,
    device: Annotated[Optional[str], typer.Option(help="auto | cpu | cuda")] = None,
    epsilons: Annotated[Optional[str], typer.Option(help="comma-separated target ε, e.g. 1,8,inf")] = None,
    seed: Annotated[Optional[int], typer.Option(help="the one seed that drives data, splits, training")] = None,
    name: Annotated[Optional[str], typer.Option(help="audit name (MLflow experiment, folder suffix)")] = None,
) -> None:
    """Train targets at each ε, attack them, bound ε empirically, log to MLflow, write results."""
    from audit.config import parse_epsilon_list, resolve_config

    overrides: dict = {}
    if epsilons is not None:
        overrides.setdefault("privacy", {})["epsilons"] = parse_epsilon_list(epsilons)
    if device is not None:
        overrides["device"] = device
    if seed is not None:
        overrides["seed"] = seed
    if name is not None:
        overrides["name"] = name
    resolved = resolve_config(preset, config, overrides)
    # Imported after the config is validated: a typo in a flag should not wait for torch to load.
    from audit.runner import run_audit
    from reports.console import results_summary_table

    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("epochs"),
        TimeElapsedColumn(), console=err_console, transient=False,
    ) as bar:
        audit_run = run_audit(resolved, out_dir=out, tracking_uri=tracking_uri, preset=preset, progress=_RichProgress(bar))
    results = audit_run.results
    console.print(results_summary_table(results))
    for note in results["notes"]:
        console.print(f"[yellow]note:[/yellow] {note}")
    console.print(f"results: {audit_run.run_dir}/results.json")
    console.print(f"MLflow:  {results['mlflow']['tracking_uri']} (parent run {results['mlflow']['parent_run_id']})")
    if not results["verdict"]["passed"]:
        for reason in results["verdict"]["reasons"]:
            err_console.print(f"[red]VIOLATION[/red] {reason}")
        raise typer.Exit(EXIT_FAILED)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: user errors become one line on stderr and exit code 2."""
    try:
        app(args=argv, standalone_mode=True)
    except AuditInputError as exc:
        # Plain print, not rich: one unwrapped line that scripts and CI logs can grep.
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


if __name__ == "__main__":
    main()
