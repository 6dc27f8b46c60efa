"""`run`: the main sweep job."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from audit.cli.app import EXIT_INTERRUPTED, app, console, shown, switch
from audit.cli.ledger_commands import DatasetOption, LedgerOption, record_in_ledger
from audit.cli.output import (
    QuietOption,
    RayAddressOption,
    TrackingUriOption,
    WorkersOption,
    command_progress,
    print_one_run_bounds,
    print_verdict,
    sigterm_as_interrupt,
)
from audit.cli.verdict_flags import FailOnInconclusiveOption
from audit.errors import AuditInputError


@app.command()
def run(
    config: Annotated[Path | None, typer.Option("--config", help="YAML config; fields override the preset")] = None,
    preset: Annotated[
        str | None,
        typer.Option(help="smoke | default | full | digits-cnn | hospitals | clients | text | llm  [default: default]"),
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="folder that receives runs/<timestamp>-<name>/")] = Path("runs"),
    tracking_uri: TrackingUriOption = None,
    device: Annotated[str | None, typer.Option(help="auto | cpu | cuda")] = None,
    epsilons: Annotated[str | None, typer.Option(help="comma-separated target ε, e.g. 1,8,inf")] = None,
    seed: Annotated[int | None, typer.Option(help="the one seed that drives data, splits, training")] = None,
    name: Annotated[str | None, typer.Option(help="audit name (MLflow experiment, folder suffix)")] = None,
    resume: Annotated[str | None, typer.Option(help="continue an interrupted run: its folder, or 'latest'")] = None,
    policy: Annotated[Path | None, typer.Option("--policy", help="YAML policy; exit 1 when a rule fails")] = None,
    dry_run: Annotated[
        bool, switch("dry-run", "validate config, data, policy, --out and the tracking URI; write nothing")
    ] = False,
    executor: Annotated[
        str,
        typer.Option("--executor", help="where the parallel work runs: local | processes | ray (same numbers on each)"),
    ] = "local",
    workers: WorkersOption = None,
    ray_address: RayAddressOption = None,
    tracking: Annotated[
        bool, switch("tracking", "log to MLflow; --no-tracking: results folder and report only")
    ] = True,
    log_models: Annotated[bool, switch("log-models", "also log each target model to MLflow (PyTorch flavour)")] = False,
    quiet: QuietOption = False,
    fail_on_inconclusive: FailOnInconclusiveOption = False,
    ledger: LedgerOption = None,
    dataset: DatasetOption = None,
) -> None:
    """Train targets at each ε, attack them, bound ε empirically, log to MLflow, write results."""
    from audit.machinery.config import parse_epsilon_list, resolve_config
    from audit.machinery.crash_log import set_log_folder

    set_log_folder(out)

    overrides: dict = {}
    if epsilons is not None:
        overrides.setdefault("privacy", {})["epsilons"] = parse_epsilon_list(epsilons)
    if device is not None:
        overrides["device"] = device
    if seed is not None:
        overrides["seed"] = seed
    if name is not None:
        overrides["name"] = name
    if resume is not None and resume != "latest" and config is None and preset is None and not overrides:
        from audit.sweep.inputs import stored_config

        resolved = stored_config(out, resume)  # `--resume DIR` alone: the config the run started with
    else:
        resolved = resolve_config(preset or "default", config, overrides)
    from audit.machinery.policy import load_policy

    loaded_policy = load_policy(policy) if policy is not None else None  # a bad policy fails before training
    from audit.machinery.executors import check_executor_options

    check_executor_options(executor, workers, ray_address)  # before torch loads or a cluster starts
    from audit.machinery.memory_estimates import check_run_memory, check_text_run_memory
    from audit.machinery.workers import default_workers

    # Flags a job does not support are refused before anything — `--dry-run` included, which must
    # refuse what the real run refuses.
    if resolved.text is not None and log_models:
        raise AuditInputError(
            "--log-models",
            "not supported by the text job (its targets' weights are kept in the run folder's checkpoints/ instead)",
        )
    if resolved.federated is not None and (not tracking or log_models):
        raise AuditInputError("--no-tracking/--log-models", "not supported by the federated job yet")
    if resolved.text is not None:  # the counts' memory, refused before anything starts (docs/errors.md)
        check_text_run_memory(resolved)
    elif resolved.llm is not None:  # the llm job: small models by construction (its sizes are bounded)
        pass
    else:
        check_run_memory(resolved, workers or (1 if executor == "local" else default_workers()))
    if dry_run and (resolved.text is not None or resolved.llm is not None):
        from audit.machinery.run_directory import check_output_folder
        from audit.machinery.tracking import check_tracking_uri

        check_output_folder(out)
        check_tracking_uri(tracking_uri)
        job, count = (
            ("llm", f"{len(resolved.privacy.epsilons)} ε × {len(resolved.llm.modes)} fine-tuning(s)")
            if resolved.llm is not None
            else ("text", f"{len(resolved.privacy.epsilons)} targets")
        )
        console.print(
            f"dry run: {job} config '{resolved.name}' ({count}), --out and tracking URI are valid; nothing written"
        )
        return
    if dry_run:
        from audit.sweep.inputs import check_run_inputs

        notes = check_run_inputs(resolved, out_dir=out, tracking_uri=tracking_uri, resume=resume)
        if resolved.federated is not None:
            from audit.federated.setup import check_client_split

            check_client_split(resolved)
        for note in notes:
            console.print(f"[yellow]note:[/yellow] {shown(note)}", soft_wrap=True)
        console.print(
            f"dry run: config '{resolved.name}' ({len(resolved.privacy.epsilons)} targets), data, "
            f"{'policy, ' if loaded_policy is not None else ''}--out and tracking URI are valid; nothing written"
        )
        from audit.machinery.preset_timings import expected_time_line

        shipped = preset or "default"
        as_shipped = config is None and not overrides and resume is None
        console.print(
            f"preset '{shipped}'{'' if as_shipped else ' as shipped (your changes may alter this)'}: "
            f"{expected_time_line(shipped)}",
            highlight=False,
        )
        return
    # Imported after the inputs are validated: a typo in a flag should not wait for torch to load.
    # What every job is called with: where it runs, what it shows, where it writes and logs, and the policy.
    job_options = dict(
        executor=executor,
        workers=workers,
        ray_address=ray_address,
        quiet=quiet,
        out_dir=out,
        tracking_uri=tracking_uri,
        preset=preset or "default",
        resume=resume,
        policy=loaded_policy,
    )
    if resolved.text is not None or resolved.llm is not None:  # the language-model jobs (presets text, llm)
        _run_text(
            resolved,
            job_options,
            log_models=log_models,
            tracking=tracking,
            fail_on_inconclusive=fail_on_inconclusive,
        )
        return
    if resolved.federated is not None:  # the federated job (presets hospitals, clients)
        from audit.federated.runner import run_federated_audit as run_audit

        if not tracking or log_models:
            raise AuditInputError("--no-tracking/--log-models", "not supported by the federated job yet")
        extra = {}
    else:
        from audit.sweep.runner import run_audit  # type: ignore[assignment]  # the same call, another job

        extra = {"tracking": tracking, "log_models": log_models}
    from reports.console import results_summary_table, synthetic_risks_table, synthetic_summary_table

    audit_run = _run_job(run_audit, resolved, **job_options, **extra)
    results = audit_run.results
    console.print(results_summary_table(results))
    print_one_run_bounds(results)
    from reports.federated_tables import federated_console_tables

    for table in federated_console_tables(results):
        console.print(table)
    synthetic_table = synthetic_summary_table(results)
    if synthetic_table is not None:
        console.print(synthetic_table)
    risks_table = synthetic_risks_table(results)
    if risks_table is not None:
        console.print(risks_table)
    for note in results["notes"]:
        console.print(f"[yellow]note:[/yellow] {shown(note)}")
    console.print(f"results: {shown(audit_run.run_dir)}/results.json")
    console.print(f"report:  {shown(audit_run.run_dir)}/report.html")
    if results["mlflow"]:
        console.print(
            f"MLflow:  {shown(results['mlflow']['tracking_uri'])} (parent run {results['mlflow']['parent_run_id']})"
        )
    record_in_ledger(ledger, dataset, "run", results, audit_run.run_dir / "results.json", loaded_policy)
    print_verdict(results, fail_on_inconclusive=fail_on_inconclusive)


def _run_job(job, resolved, *, executor, workers, ray_address, quiet, **kwargs):
    """One job (sweep, federated or text) with its progress display and executor pool, both closed
    however it ends; SIGTERM and Ctrl-C end it as an interruption (exit 130)."""
    from audit.machinery.executors import make_executor

    sigterm_as_interrupt()
    progress = command_progress(quiet)
    pool = make_executor(executor, workers=workers, ray_address=ray_address, threads=resolved.cpu_threads)
    try:
        return job(resolved, progress=progress, executor=pool, **kwargs)
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        progress.close()
        pool.close()


def _run_text(resolved, job_options: dict[str, Any], *, log_models, tracking, fail_on_inconclusive) -> None:
    """`run` of a config with a `text:` section: the language-model job (audit/text/)."""
    if log_models:
        raise AuditInputError(
            "--log-models",
            "not supported by the text job (its targets' weights are kept in the run folder's checkpoints/ instead)",
        )
    from audit.text.runner import run_text_audit
    from reports.console import results_summary_table

    if resolved.llm is not None:  # DP fine-tuning of a transformers LM (audit/text/llm_runner.py)
        from audit.text.llm_runner import run_llm_audit as run_text_audit  # type: ignore[assignment]  # same call
    from reports.text_tables import text_console_tables

    text_run = _run_job(run_text_audit, resolved, **job_options, tracking=tracking)
    results = text_run.results
    console.print(results_summary_table(results))
    for table in text_console_tables(results):
        console.print(table)
    for note in results["notes"]:
        console.print(f"[yellow]note:[/yellow] {shown(note)}", soft_wrap=True)
    console.print(f"results: {shown(text_run.run_dir)}/results.json")
    console.print(f"report:  {shown(text_run.run_dir)}/report.html")
    if results["mlflow"]:
        console.print(
            f"MLflow:  {shown(results['mlflow']['tracking_uri'])} (parent run {results['mlflow']['parent_run_id']})"
        )
    print_verdict(results, fail_on_inconclusive=fail_on_inconclusive)
