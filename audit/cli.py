"""`privacy-audit` command line. Thin: parse flags, call the Python API, print, set the exit code.

Exit codes, every command: 0 pass; 1 a finding (violation, failed policy, unsound accountant);
2 bad input — one line naming the field, file or column, no traceback, nothing half-written;
3 internal error — one line naming a log file that holds the traceback; 130 interrupted.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from audit.errors import AuditInputError
from targets.tabular_encoding import SyntheticDataError

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,  # tracebacks go to a log file (exit 3), never to the terminal
    no_args_is_help=True,
    help="Audit trained models and synthetic data for membership leakage; compare empirical ε with the accountant's.",
)
console = Console()
if not console.is_terminal:  # piped or in CI: do not squeeze the results table into 80 columns
    console = Console(width=160)
err_console = Console(stderr=True)

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERNAL_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def _sigterm_as_interrupt() -> None:
    """SIGTERM (a CI timeout, a scheduler) ends a run like Ctrl-C: runs marked KILLED, checkpoints kept."""
    import signal

    def handler(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


@app.callback()
def _commands() -> None:
    """privacy-audit: membership-inference audits with empirical ε next to the accountant's ε."""


class _RichProgress:
    """Adapts the runner's progress callbacks to a rich progress bar per target."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.task = None
        self.started = False

    def target_started(self, index: int, total: int, label: str, epochs: int) -> None:
        # Started on the first target, not before: input errors found earlier print one clean line.
        if not self.started:
            self.progress.start()
            self.started = True
        self.task = self.progress.add_task(f"target {index + 1}/{total} ({label})", total=epochs)

    def stop(self) -> None:
        if self.started:
            self.progress.stop()

    def epoch_done(self, epoch: int, epochs: int) -> None:
        self.progress.update(self.task, completed=epoch)

    def note(self, text: str) -> None:
        self.progress.console.print(f"[yellow]{text}[/yellow]", soft_wrap=True)


@app.command()
def run(
    config: Annotated[Optional[Path], typer.Option("--config", help="YAML config; fields override the preset")] = None,
    preset: Annotated[Optional[str], typer.Option(help="smoke | default | full  [default: default]")] = None,
    out: Annotated[Path, typer.Option("--out", help="folder that receives runs/<timestamp>-<name>/")] = Path("runs"),
    tracking_uri: Annotated[Optional[str], typer.Option("--tracking-uri", help="MLflow store (default sqlite:///mlflow.db)")] = None,
    device: Annotated[Optional[str], typer.Option(help="auto | cpu | cuda")] = None,
    epsilons: Annotated[Optional[str], typer.Option(help="comma-separated target ε, e.g. 1,8,inf")] = None,
    seed: Annotated[Optional[int], typer.Option(help="the one seed that drives data, splits, training")] = None,
    name: Annotated[Optional[str], typer.Option(help="audit name (MLflow experiment, folder suffix)")] = None,
    resume: Annotated[Optional[str], typer.Option(help="continue an interrupted run: its folder, or 'latest'")] = None,
    policy: Annotated[Optional[Path], typer.Option("--policy", help="YAML policy; exit 1 when a rule fails")] = None,
) -> None:
    """Train targets at each ε, attack them, bound ε empirically, log to MLflow, write results."""
    from audit.machinery.config import parse_epsilon_list, resolve_config

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
        from audit.sweep.runner import stored_config

        resolved = stored_config(out, resume)  # `--resume DIR` alone: the config the run started with
    else:
        resolved = resolve_config(preset or "default", config, overrides)
    from audit.machinery.policy import load_policy

    loaded_policy = load_policy(policy) if policy is not None else None  # a bad policy fails before training
    # Imported after the inputs are validated: a typo in a flag should not wait for torch to load.
    from audit.sweep.runner import run_audit
    from reports.console import results_summary_table, synthetic_summary_table

    _sigterm_as_interrupt()

    progress = _RichProgress(Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("epochs"),
        TimeElapsedColumn(), console=err_console, transient=False,
    ))
    try:
        audit_run = run_audit(resolved, out_dir=out, tracking_uri=tracking_uri, preset=preset or "default",
                              progress=progress, resume=resume, policy=loaded_policy)
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        progress.stop()
    results = audit_run.results
    console.print(results_summary_table(results))
    synthetic_table = synthetic_summary_table(results)
    if synthetic_table is not None:
        console.print(synthetic_table)
    for note in results["notes"]:
        console.print(f"[yellow]note:[/yellow] {note}")
    console.print(f"results: {audit_run.run_dir}/results.json")
    console.print(f"report:  {audit_run.run_dir}/report.html")
    console.print(f"MLflow:  {results['mlflow']['tracking_uri']} (parent run {results['mlflow']['parent_run_id']})")
    _print_verdict(results)


def _print_verdict(results: dict) -> None:
    """One line per failed rule or violation; exit 1 when the verdict failed."""
    verdict = results["verdict"]
    kind = "POLICY" if verdict.get("policy") else "VIOLATION"
    if verdict["passed"]:
        console.print(f"[green]PASS[/green]{' (policy ' + str(verdict['policy']) + ')' if verdict.get('policy') else ''}")
        return
    for reason in verdict["reasons"]:
        err_console.print(f"[red]{kind} FAILED[/red] {reason}", highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_FAILED)


def _publish_results(compute, *, out: Path, folder_name: str, experiment: str, tracking_uri: str | None,
                     run_name: str, tags: dict, metrics_of, policy) -> tuple[dict, Path]:
    """Compute a results dict into a staged run folder, log one MLflow run, write report/summary/JUnit.

    `compute(staging)` returns the results (it may write files into the staging folder);
    `metrics_of(results)` the MLflow metrics. The folder appears complete or not at all.
    """
    from audit.machinery.run_directory import StagedRunDirectory
    from audit.sweep.runner import write_outputs
    from audit.machinery.tracking import AuditTracker

    run_dir = StagedRunDirectory(out, folder_name)
    staging = run_dir.create()
    tracker = None
    try:
        results = compute(staging)
        tracker = AuditTracker(tracking_uri, experiment)
        run_id = tracker.start_run(run_name, tags=tags)
        tracker.log_metrics(run_id, metrics_of(results))
        results["mlflow"] = {"tracking_uri": tracker.tracking_uri, "parent_run_id": run_id}
        write_outputs(results, staging, policy, tracker, run_id)
        final = run_dir.commit()
        tracker.finish(run_id)
    except BaseException:
        if tracker is not None:
            tracker.fail_open_runs()
        run_dir.discard()
        raise
    return results, final


@app.command()
def gate(
    results_file: Annotated[Path, typer.Argument(metavar="RESULTS", help="a results.json")],
    policy: Annotated[Path, typer.Option("--policy", help="YAML policy")],
    out: Annotated[Optional[Path], typer.Option("--out", help="where junit.xml and summary.md go (default: beside RESULTS)")] = None,
) -> None:
    """Evaluate a policy on a results file: exit 0 pass, 1 fail, 2 bad input."""
    from audit.machinery.policy import evaluate_policy, load_policy, load_results, verdict_from_evaluation
    from reports.junit import write_junit_xml
    from reports.markdown_summary import write_summary_markdown

    loaded_policy = load_policy(policy)
    results = load_results(results_file)
    evaluation = evaluate_policy(loaded_policy, results, source=f"results file '{results_file}'")
    gated = {**results, "verdict": verdict_from_evaluation(evaluation), "policy_evaluation": evaluation.as_dict()}
    folder = out or results_file.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AuditInputError(f"--out '{folder}'", f"is not a writable directory ({exc.strerror})") from None
    write_junit_xml(evaluation, folder / "junit.xml")
    write_summary_markdown(gated, folder / "summary.md", evaluation=evaluation)
    n_fail = len(evaluation.failures)
    console.print(f"{len(evaluation.checks)} checks, {n_fail} failed; junit: {folder / 'junit.xml'}")
    _print_verdict(gated)


@app.command()
def report(
    results_file: Annotated[Path, typer.Argument(metavar="RESULTS", help="a results.json")],
    out: Annotated[Optional[Path], typer.Option("--out", help="folder for report.html (default: beside RESULTS)")] = None,
) -> None:
    """Re-render report.html (and summary.md) from a results file."""
    from audit.machinery.policy import load_results
    from reports.html_report import write_html_report
    from reports.markdown_summary import write_summary_markdown

    results = load_results(results_file)
    folder = out or results_file.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AuditInputError(f"--out '{folder}'", f"is not a writable directory ({exc.strerror})") from None
    path = write_html_report(results, results_file.parent, out_dir=folder)
    write_summary_markdown(results, folder / "summary.md")
    console.print(f"report: {path}")


@app.command("audit-scores")
def audit_scores_command(
    scores_file: Annotated[Path, typer.Argument(metavar="F", help="CSV/Parquet: member (0/1) + score (higher = member) or loss")],
    delta: Annotated[float, typer.Option(help="δ of the bounds")] = 1e-5,
    claimed_epsilon: Annotated[Optional[float], typer.Option("--claimed-epsilon", help="the ε the model claims")] = None,
    membership_randomized: Annotated[bool, typer.Option("--membership-randomized", help="membership was a fair coin per record (enables the one-run bound)")] = False,
    confidence: Annotated[float, typer.Option(help="confidence of bounds and CIs")] = 0.95,
    policy: Annotated[Optional[Path], typer.Option("--policy", help="YAML policy; exit 1 when a rule fails")] = None,
    out: Annotated[Path, typer.Option("--out", help="folder that receives <timestamp>-scores/")] = Path("runs"),
    tracking_uri: Annotated[Optional[str], typer.Option("--tracking-uri")] = None,
) -> None:
    """Audit your own membership scores: every attack metric, ε lower bounds, report, gate."""
    from audit.machinery.policy import load_policy
    from audit.model_audits.score_audit import audit_scores
    from reports.console import results_summary_table

    loaded_policy = load_policy(policy) if policy is not None else None

    def metrics_of(results: dict) -> dict:
        target = results["targets"][0]
        attack = target["attacks"][0]
        return {"auc": attack["auc"], "tpr_at_fpr_0.001": attack["tpr_at_fpr"]["0.001"],
                "eps_lb_cp": attack["epsilon_lb"]["clopper_pearson"], "eps_lb_one_run": attack["epsilon_lb"]["one_run"],
                "eps_lb_best": target["epsilon_lb_best"]}

    results, final = _publish_results(
        lambda staging: audit_scores(scores_file, delta=delta, confidence=confidence, claimed_epsilon=claimed_epsilon,
                                     membership_randomized=membership_randomized),
        out=out, folder_name="scores", experiment="audit-scores", tracking_uri=tracking_uri,
        run_name=scores_file.name, tags={"source": str(scores_file)}, metrics_of=metrics_of, policy=loaded_policy,
    )
    console.print(results_summary_table(results))
    for note in results["notes"]:
        console.print(f"[yellow]note:[/yellow] {note}")
    console.print(f"results: {final}/results.json\nreport:  {final}/report.html")
    _print_verdict(results)


@app.command()
def accountants(
    noise_multiplier: Annotated[float, typer.Option("--noise-multiplier", help="σ")],
    sample_rate: Annotated[float, typer.Option("--sample-rate", help="Poisson sampling rate q")],
    steps: Annotated[int, typer.Option("--steps", help="number of DP-SGD steps T")],
    delta: Annotated[float, typer.Option("--delta")] = 1e-5,
) -> None:
    """ε of Opacus's RDP, PRV, GDP accountants and dp_accounting's PLD for one (σ, q, T, δ)."""
    from rich.table import Table

    from audit.dp_validation.accountant_check import pld_epsilon_interval, validate_dpsgd_parameters
    from audit.statistics.accountants import DPSGDEvent, epsilon_opacus

    validate_dpsgd_parameters(noise_multiplier, sample_rate, steps, delta)
    event = DPSGDEvent(noise_multiplier, sample_rate, steps)
    lower, upper = pld_epsilon_interval(event, delta)
    table = Table(title=f"ε for σ={noise_multiplier:g}, q={sample_rate:g}, T={steps}, δ={delta:g} (Poisson sampling)")
    table.add_column("accountant")
    table.add_column("ε", justify="right")
    table.add_column("vs PLD", justify="right")
    for name in ("rdp", "prv", "gdp"):
        value = epsilon_opacus(event, delta, name)
        verdict = "UNSOUND (below PLD lower)" if value < lower else f"{value / upper - 1:+.1%}"
        table.add_row(f"opacus {name}", f"{value:.4f}", verdict)
    table.add_row("dp_accounting PLD (tight, upper)", f"{upper:.4f}", "reference")
    table.add_row("dp_accounting PLD (optimistic, lower)", f"{lower:.4f}", "true ε ≥ this")
    console.print(table)


@app.command("accountant-check")
def accountant_check(
    accountant: Annotated[str, typer.Option("--accountant", help="module:function (σ, q, T, δ) -> ε; runs your code")],
    grid: Annotated[Optional[Path], typer.Option("--grid", help="YAML with noise_multipliers, sample_rates, steps, deltas")] = None,
    margin: Annotated[float, typer.Option("--margin", help="'loose' when more than this fraction above PLD")] = 0.10,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="also write the per-point results here")] = None,
    out: Annotated[Path, typer.Option("--out", help="folder that receives <timestamp>-accountant-check/")] = Path("runs"),
    tracking_uri: Annotated[Optional[str], typer.Option("--tracking-uri")] = None,
) -> None:
    """Check a user accountant against the tight PLD reference on a grid; exit 1 if any point is unsound."""
    from rich.table import Table

    from audit.dp_validation.accountant_check import check_accountant, load_grid, summarize
    from audit.machinery.run_directory import write_json_atomic
    from audit.machinery.user_code import load_user_function

    if not margin >= 0:
        raise AuditInputError("--margin", f"must be ≥ 0, got {margin}")
    function = load_user_function(accountant, "--accountant")
    points = check_accountant(function, load_grid(str(grid) if grid else None), margin)
    summary = {"accountant": accountant, "margin": margin, **summarize(points)}
    table = Table(title=f"accountant-check: {accountant}")
    for header in ("σ", "q", "T", "δ", "reported ε", "PLD ε [lower, upper]", "label"):
        table.add_column(header, justify="right")
    colours = {"ok": "green", "loose": "yellow", "unsound": "red", "invalid": "red"}
    for p in points:
        reported = "—" if p.reported is None else f"{p.reported:.4f}"
        table.add_row(f"{p.noise_multiplier:g}", f"{p.sample_rate:g}", str(p.steps), f"{p.delta:g}", reported,
                      f"[{p.pld_lower:.4f}, {p.pld_upper:.4f}]", f"[{colours[p.label]}]{p.label}[/]")
    console.print(table)
    for p in points:
        if p.label in ("unsound", "invalid"):
            console.print(f"[red]{p.label}[/red] σ={p.noise_multiplier:g} q={p.sample_rate:g} T={p.steps}: {p.message}")
    console.print(f"counts: {summary['counts']}")
    if json_out is not None:
        write_json_atomic(json_out, summary)
    path = _record_audit("accountant-check", summary, out, tracking_uri,
                         {"accountant": accountant, "margin": margin, "n_points": len(points)})
    console.print(f"details: {path}")
    if not summary["passed"]:
        raise typer.Exit(EXIT_FAILED)


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

    if models < 1:
        raise AuditInputError("--models", f"must be ≥ 1, got {models}")
    if epochs < 1:
        raise AuditInputError("--epochs", f"must be ≥ 1, got {epochs}")
    if threads < 1:
        raise AuditInputError("--threads", f"must be ≥ 1, got {threads}")
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


@app.command("audit-model")
def audit_model(
    weights: Annotated[Path, typer.Option("--weights", help="state_dict (.pt, loaded weights_only) or .safetensors")],
    members: Annotated[Path, typer.Option("--members", help="CSV/Parquet of the model's training rows")],
    nonmembers: Annotated[Path, typer.Option("--nonmembers", help="CSV/Parquet of rows it never saw")],
    label: Annotated[str, typer.Option("--label", help="label column (integer classes)")],
    config: Annotated[Optional[Path], typer.Option("--config", help="YAML: training section = the model's architecture and training")] = None,
    claimed_epsilon: Annotated[Optional[str], typer.Option("--claimed-epsilon", help="the ε the model claims ('inf' = none)")] = None,
    population: Annotated[Optional[Path], typer.Option("--population", help="population rows for reference/shadow models")] = None,
    attacks: Annotated[Optional[str], typer.Option("--attacks", help="comma-separated, e.g. loss,lira,rmia")] = None,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    policy: Annotated[Optional[Path], typer.Option("--policy")] = None,
    out: Annotated[Path, typer.Option("--out")] = Path("runs"),
    tracking_uri: Annotated[Optional[str], typer.Option("--tracking-uri")] = None,
) -> None:
    """Audit your own trained PyTorch MLP from its weights and member / non-member files."""
    from audit.machinery.config import parse_epsilon_list, resolve_config
    from audit.model_audits.model_audit import audit_user_model
    from audit.machinery.policy import load_policy
    from audit.machinery.tracking import target_metrics
    from reports.console import results_summary_table

    overrides = {"privacy": {"epsilons": parse_epsilon_list(claimed_epsilon)}} if claimed_epsilon else None
    resolved = resolve_config("default", config, overrides)
    loaded_policy = load_policy(policy) if policy is not None else None
    names = [name.strip() for name in attacks.split(",") if name.strip()] if attacks else None
    results, final = _publish_results(
        lambda staging: audit_user_model(
            resolved, weights=weights, members=members, nonmembers=nonmembers, label=label, population=population,
            attack_names=names, device=device, scores_path=staging / "scores" / "scores.csv",
        ),
        out=out, folder_name=resolved.name, experiment=resolved.name, tracking_uri=tracking_uri,
        run_name=f"audit-model {weights.name}", tags={"weights": str(weights)},
        metrics_of=lambda results: target_metrics(results["targets"][0]), policy=loaded_policy,
    )
    console.print(results_summary_table(results))
    for note in results["notes"]:
        console.print(f"[yellow]note:[/yellow] {note}", soft_wrap=True)
    console.print(f"results: {final}/results.json\nreport:  {final}/report.html")
    _print_verdict(results)


@app.command("synth-check")
def synth_check(
    train: Annotated[Path, typer.Option("--train", help="the generator's training table (CSV/Parquet)")],
    holdout: Annotated[Path, typer.Option("--holdout", help="same-population rows the generator never saw, same size")],
    synthetic: Annotated[Path, typer.Option("--synthetic", help="the synthetic release")],
    target_column: Annotated[Optional[str], typer.Option("--target-column", help="for TSTR utility")] = None,
    nan_policy: Annotated[str, typer.Option("--nan-policy", help="error | drop_rows | indicator")] = "error",
    claimed_epsilon: Annotated[Optional[float], typer.Option("--claimed-epsilon", help="the generator's DP ε")] = None,
    delta: Annotated[float, typer.Option()] = 1e-5,
    membership_randomized: Annotated[bool, typer.Option("--membership-randomized", help="rows went to train/holdout by fair coin")] = False,
    subsample_train: Annotated[bool, typer.Option("--subsample-train", help="accept a smaller holdout by subsampling train")] = False,
    seed: Annotated[int, typer.Option()] = 0,
    policy: Annotated[Optional[Path], typer.Option("--policy", help="YAML policy; exit 1 when a rule fails")] = None,
    out: Annotated[Path, typer.Option("--out")] = Path("runs"),
    tracking_uri: Annotated[Optional[str], typer.Option("--tracking-uri")] = None,
) -> None:
    """Is a synthetic release a disguised copy of its training data? NNDR, DCR, distance MIA, fidelity."""
    from audit.machinery.environment import describe_environment
    from audit.machinery.policy import load_policy
    from audit.statistics.synthetic_evaluation import synthetic_privacy_checks
    from audit.synthetic.synthetic_check import read_table

    if nan_policy not in ("error", "drop_rows", "indicator"):
        raise AuditInputError("--nan-policy", f"expected error, drop_rows or indicator, got {nan_policy!r}")
    if claimed_epsilon is not None and not claimed_epsilon > 0:
        raise AuditInputError("--claimed-epsilon", f"must be > 0, got {claimed_epsilon}")
    loaded_policy = load_policy(policy) if policy is not None else None
    frames = [read_table(path, role) for path, role in ((train, "train"), (holdout, "holdout"), (synthetic, "synthetic"))]
    entry = synthetic_privacy_checks(
        *frames, nan_policy=nan_policy, target_column=target_column, seed=seed, delta=delta,
        membership_randomized=membership_randomized, subsample_train=subsample_train,
        accountant_epsilon=claimed_epsilon,
    )
    entry = {"generator": f"user-supplied ({synthetic.name})", "epsilon_target": claimed_epsilon, **entry}
    results = {
        "schema_version": 1,
        "config": {"name": "synth-check", "train": str(train), "holdout": str(holdout), "synthetic": str(synthetic),
                   "nan_policy": nan_policy, "target_column": target_column, "delta": delta, "seed": seed,
                   "claimed_epsilon": claimed_epsilon, "membership_randomized": membership_randomized},
        "environment": describe_environment("cpu", seed),
        "data": {"description": "user-supplied train / holdout / synthetic tables"},
        "attacks_run": ["distance"],
        "targets": [],
        "synthetic": [entry],
        "notes": list(entry.get("warnings", [])),
        "verdict": {"passed": entry["passed"], "policy": None, "reasons": [f["message"] for f in entry["flags"]]},
    }
    results, final = _publish_results(
        lambda staging: results, out=out, folder_name="synth-check", experiment="synth-check",
        tracking_uri=tracking_uri, run_name=synthetic.name, tags={"synthetic": str(synthetic)},
        metrics_of=lambda results: {
            "dcr_share": entry["dcr"]["dcr_share"], "nndr_p10": entry["nndr"]["p10"],
            "exact_match_rate": entry["dcr"].get("exact_match_rate"), "mia_auc": entry["mia"]["auc"],
            "mia_eps_lb_cp": entry["mia"]["epsilon_lb"]["clopper_pearson"],
        },
        policy=loaded_policy,
    )
    dcr, nndr, mia = entry["dcr"], entry["nndr"], entry["mia"]
    lo, hi = dcr.get("dcr_share_ci", [None, None])
    console.print(f"DCR share (closer to train than holdout): {dcr['dcr_share']:.3f} (95% CI {lo:.3f}–{hi:.3f}; "
                  f"≈0.5 expected), exact-match rate {dcr.get('exact_match_rate', 0):.4f}")
    console.print(f"NNDR p1 / p10 / median: {nndr['p1']:.3f} / {nndr['p10']:.3f} / {nndr['median']:.3f} (near 0 = near-copies)")
    console.print(f"distance MIA: AUC {mia['auc']:.3f}, ε lower bound (Clopper-Pearson) "
                  f"{mia['epsilon_lb']['clopper_pearson']:.3f}")
    for flag in entry["flags"]:
        err_console.print(f"[red]FLAG[/red] {flag['message']}", soft_wrap=True)
    console.print(f"results: {final}/results.json\nreport:  {final}/report.html")
    if loaded_policy is not None:
        _print_verdict(results)


def _record_audit(kind: str, result: dict, out: Path, tracking_uri: str | None, params: dict) -> Path:
    """Write `<out>/<timestamp>-<kind>/<kind>.json` atomically and log one MLflow run in experiment `<kind>`."""
    from audit.machinery.run_directory import StagedRunDirectory, write_json_atomic
    from audit.machinery.tracking import AuditTracker
    from reports.audit_report import write_audit_report

    run_dir = StagedRunDirectory(out, kind)
    staging = run_dir.create()
    tracker = AuditTracker(tracking_uri, kind)
    run_id = tracker.start_run(kind, tags={key: str(value) for key, value in params.items()})
    try:
        tracker.log_params(run_id, params)
        failed = bool(result.get("violation")) or result.get("passed") is False
        tracker.log_metrics(run_id, {"epsilon_lower_bound": result.get("epsilon_lower_bound"),
                                     "claimed_epsilon": result.get("claimed_epsilon"), "violation": float(failed),
                                     **{f"n_{label}": float(n) for label, n in result.get("counts", {}).items()}})
        result = {**result, "mlflow": {"tracking_uri": tracker.tracking_uri, "run_id": run_id}}
        write_json_atomic(staging / f"{kind}.json", result)
        write_audit_report(kind, result, staging)
        final = run_dir.commit()
        tracker.log_artifact(run_id, final / f"{kind}.json")
        tracker.log_artifact(run_id, final / "report.html")
        tracker.finish(run_id)
    except BaseException:
        tracker.fail_open_runs()
        run_dir.discard()
        raise
    return final / f"{kind}.json"


def _print_bound(result: dict, what: str, path: Path) -> None:
    claim = result.get("claimed_epsilon")
    bound = result.get("epsilon_lower_bound")
    console.print(f"{what}: empirical ε lower bound {bound:.3f} at {result.get('confidence', 0.95):.0%} confidence "
                  f"(claimed ε {claim if claim is None else f'{claim:.3f}'}, δ {result.get('delta')})")
    if result.get("gdp_estimate") is not None:
        console.print(f"GDP estimate (assumes a Gaussian trade-off; not a bound): {result['gdp_estimate']}")
    console.print(f"details: {path}")
    if result.get("violation"):
        err_console.print(f"[red]VIOLATION[/red] the lower bound {bound:.3f} exceeds the claimed ε {claim:.3f}")
        raise typer.Exit(EXIT_FAILED)
    console.print("[green]no violation[/green] (a bound below the claim is not a proof that the claim holds)")


@app.command("canary-audit")
def canary_audit(
    trainer: Annotated[str, typer.Option("--trainer", help="module:function (features, labels, seed) -> model; runs your code")],
    kind: Annotated[str, typer.Option(help="out_of_distribution | mislabeled | dirac")] = "out_of_distribution",
    mode: Annotated[str, typer.Option(help="multi (K models with, K without) | one-run")] = "multi",
    models: Annotated[int, typer.Option("--models", help="K: models per side (multi mode) or runs (dirac)")] = 50,
    canaries: Annotated[int, typer.Option("--canaries", help="m canaries for one-run mode")] = 200,
    claimed_epsilon: Annotated[Optional[float], typer.Option("--claimed-epsilon", help="overrides the trainer's CLAIM")] = None,
    delta: Annotated[Optional[float], typer.Option(help="δ of the claim")] = None,
    rows: Annotated[int, typer.Option(help="rows of the harness's default data the trainer is given")] = 256,
    seed: Annotated[int, typer.Option()] = 0,
    out: Annotated[Path, typer.Option("--out")] = Path("runs"),
    tracking_uri: Annotated[Optional[str], typer.Option("--tracking-uri")] = None,
) -> None:
    """Audit your DP training code with canaries: exit 1 when a lower bound contradicts its claimed ε."""
    from audit.dp_validation.canary_audit import run_canary_audit

    result = run_canary_audit(trainer, kind=kind, mode=mode, n_models=models, n_canaries=canaries,
                              claimed_epsilon=claimed_epsilon, delta=delta, seed=seed, n_rows=rows)
    path = _record_audit("canary-audit", result, out, tracking_uri,
                         {"trainer": trainer, "kind": kind, "mode": mode, "models": models, "seed": seed})
    _print_bound(result, f"canary audit of {trainer} ({kind}, {mode})", path)


@app.command("mechanism-audit")
def mechanism_audit(
    mechanism: Annotated[str, typer.Option("--mechanism", help="module:function (data, rng) -> output; runs your code")],
    trials: Annotated[int, typer.Option("--trials", help="runs on each of the two neighbouring datasets")] = 20000,
    claimed_epsilon: Annotated[Optional[float], typer.Option("--claimed-epsilon")] = None,
    delta: Annotated[Optional[float], typer.Option()] = None,
    seed: Annotated[int, typer.Option()] = 0,
    out: Annotated[Path, typer.Option("--out")] = Path("runs"),
    tracking_uri: Annotated[Optional[str], typer.Option("--tracking-uri")] = None,
) -> None:
    """Black-box audit of a randomized function on two neighbouring datasets (Clopper-Pearson bound)."""
    from audit.dp_validation.mechanism_audit import run_mechanism_audit

    result = run_mechanism_audit(mechanism, n_trials=trials, claimed_epsilon=claimed_epsilon, delta=delta, seed=seed)
    path = _record_audit("mechanism-audit", result, out, tracking_uri,
                         {"mechanism": mechanism, "trials": trials, "seed": seed})
    _print_bound(result, f"mechanism audit of {mechanism}", path)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: maps every way a command can end to its exit code.

    Plain prints, not rich: one unwrapped line that scripts and CI logs can grep.
    """
    import click

    from audit.machinery.crash_log import write_crash_log

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        code = app(args=args, standalone_mode=False)
    except (AuditInputError, SyntheticDataError) as exc:
        print("error: " + _one_line(exc), file=sys.stderr)
        code = EXIT_BAD_INPUT
    except click.exceptions.UsageError as exc:
        where = f"{exc.ctx.command_path}: " if exc.ctx is not None else ""
        print("error: " + where + _one_line(exc.format_message()), file=sys.stderr)
        code = EXIT_BAD_INPUT
    except (KeyboardInterrupt, click.exceptions.Abort):
        print("interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    except click.exceptions.ClickException as exc:  # e.g. a file option that cannot be opened
        print("error: " + _one_line(exc.format_message()), file=sys.stderr)
        code = EXIT_BAD_INPUT
    except SystemExit as exc:  # our own sys.exit(n) calls; anything else is a bug
        code = exc.code if isinstance(exc.code, int) else EXIT_INTERNAL_ERROR
    except BaseException as exc:  # noqa: BLE001 - any other exception is a bug: exit 3, never 1
        log = write_crash_log(exc, ["privacy-audit", *args])
        print(f"internal error: {type(exc).__name__}: {_one_line(exc)[:200]} — this is a bug in privacy-audit; "
              f"traceback in {log} (please attach it to a bug report)", file=sys.stderr)
        code = EXIT_INTERNAL_ERROR
    sys.exit(EXIT_OK if code is None else int(code))


if __name__ == "__main__":
    main()
