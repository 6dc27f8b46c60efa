"""`accountants`, `accountant-check`, `canary-audit`, `mechanism-audit`, `conformance`: validating DP
claims of code. `whitebox-audit` lives in whitebox_commands.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from audit.cli.app import app, console, shown
from audit.cli.ledger_commands import DatasetOption, LedgerOption, record_in_ledger
from audit.cli.output import (
    QuietOption,
    RayAddressOption,
    TrackingUriOption,
    WorkersOption,
    command_progress,
    print_bound,
    print_verdict,
    record_audit,
)
from audit.cli.sequential_flags import LooksOption, SpendingOption, print_declared_design, print_runs_used
from audit.cli.verdict_flags import FailOnInconclusiveOption
from audit.errors import AuditInputError


@app.command()
def accountants(
    noise_multiplier: Annotated[float, typer.Option("--noise-multiplier", help="σ")],
    sample_rate: Annotated[float, typer.Option("--sample-rate", help="Poisson sampling rate q")],
    steps: Annotated[int, typer.Option("--steps", help="number of DP-SGD steps T")],
    delta: Annotated[float, typer.Option("--delta", help="δ at which ε is computed")] = 1e-5,
    timeout: Annotated[
        float, typer.Option("--timeout", help="seconds the whole table may take (computed in a child process)")
    ] = 120.0,
) -> None:
    """ε of Opacus's RDP, PRV, GDP accountants and dp_accounting's PLD for one (σ, q, T, δ)."""
    from rich.table import Table

    from audit.dp_validation.accountant_check import accountant_table, validate_dpsgd_parameters
    from audit.machinery.input_files import check_number
    from audit.machinery.workers import run_isolated

    validate_dpsgd_parameters(noise_multiplier, sample_rate, steps, delta)
    check_number(timeout, "--timeout", low=0, low_open=True, high=86_400)
    # A child process with a timeout: parameters inside the ranges can still make an accountant slow.
    values, reference = run_isolated(
        accountant_table,
        noise_multiplier,
        sample_rate,
        steps,
        delta,
        name=f"accountants σ={noise_multiplier:g} q={sample_rate:g} T={steps}",
        timeout=timeout,
        what="computation",
    )
    lower, upper = reference["lower"], reference["upper"]  # refined until within 1 % of ε (or a time budget)
    table = Table(title=f"ε for σ={noise_multiplier:g}, q={sample_rate:g}, T={steps}, δ={delta:g} (Poisson sampling)")
    table.add_column("accountant")
    table.add_column("ε", justify="right")
    table.add_column("vs PLD", justify="right")
    for name in ("rdp", "prv", "gdp"):
        value = values[name]
        verdict = "UNSOUND (below PLD lower)" if value < lower else f"{value / upper - 1:+.1%}"
        table.add_row(f"opacus {name}", f"{value:.4f}", verdict)
    table.add_row("dp_accounting PLD (tight, upper)", f"{upper:.4f}", "reference")
    table.add_row("dp_accounting PLD (optimistic, lower)", f"{lower:.4f}", "true ε ≥ this")
    console.print(table)
    console.print(f"PLD interval: {reference['note']}", highlight=False)


@app.command("accountant-check")
def accountant_check(
    accountant: Annotated[str, typer.Option("--accountant", help="module:function (σ, q, T, δ) -> ε; runs your code")],
    grid: Annotated[
        Path | None, typer.Option("--grid", help="YAML with noise_multipliers, sample_rates, steps, deltas")
    ] = None,
    margin: Annotated[float, typer.Option("--margin", help="'loose' when more than this fraction above PLD")] = 0.10,
    json_out: Annotated[Path | None, typer.Option("--json", help="also write the per-point results here")] = None,
    out: Annotated[Path, typer.Option("--out", help="folder that receives <timestamp>-accountant-check/")] = Path(
        "runs"
    ),
    tracking_uri: TrackingUriOption = None,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds one call of your accountant may take")] = 30.0,
    quiet: QuietOption = False,
    fail_on_inconclusive: FailOnInconclusiveOption = False,
) -> None:
    """Check a user accountant against the tight PLD reference on a grid; exit 1 if any point is unsound."""
    from rich.table import Table

    from audit.dp_validation.accountant_check import IsolatedAccountant, check_accountant, load_grid
    from audit.machinery.audit_results import AccountantCheckResult
    from audit.machinery.crash_log import set_log_folder
    from audit.machinery.input_files import check_number
    from audit.machinery.run_directory import check_output_folder, write_result_json_atomic
    from audit.machinery.tracking import check_tracking_uri
    from audit.machinery.user_code import check_spec

    set_log_folder(out)
    check_number(margin, "--margin", low=0, high=100)
    check_number(timeout, "--timeout", low=0, low_open=True, high=86_400)
    check_spec(accountant, "--accountant")
    check_output_folder(out)
    check_tracking_uri(tracking_uri)
    loaded_grid = load_grid(str(grid) if grid else None)
    # The user's module is imported and called only in a worker process, each call with a timeout.
    progress = command_progress(quiet)
    try:
        with IsolatedAccountant(accountant, timeout) as function:
            points = check_accountant(function, loaded_grid, margin, progress=progress)
    finally:
        progress.close()
    summary = AccountantCheckResult(accountant, margin, tuple(points)).to_json()
    table = Table(title=f"accountant-check: {accountant}")
    for header in ("σ", "q", "T", "δ", "reported ε", "PLD ε [lower, upper]", "label"):
        table.add_column(header, justify="right")
    colours = {"ok": "green", "loose": "yellow", "unsound": "red", "invalid": "red"}
    for p in points:
        reported = "—" if p.reported is None else f"{p.reported:.4f}"
        table.add_row(
            f"{p.noise_multiplier:g}",
            f"{p.sample_rate:g}",
            str(p.steps),
            f"{p.delta:g}",
            reported,
            f"[{p.pld_lower:.4f}, {p.pld_upper:.4f}]",
            f"[{colours[p.label]}]{p.label}[/]",
        )
    console.print(table)
    # The table already names every unsound point; say once what that means. An invalid point's
    # reason (what the accountant raised or returned) is in no column, so it gets its own line.
    n_unsound = summary["counts"]["unsound"]
    if n_unsound:
        console.print(
            f"[red]{n_unsound} unsound point(s)[/red] (marked above): the reported ε is below the PLD "
            "lower value, i.e. it claims more privacy than the mechanism gives"
        )
    for p in points:
        if p.label == "invalid":
            console.print(
                f"[red]invalid[/red] σ={p.noise_multiplier:g} q={p.sample_rate:g} T={p.steps}: {shown(p.message)}"
            )
    console.print(f"counts: {summary['counts']}")
    if json_out is not None:
        write_result_json_atomic(json_out, summary)
    path, recorded = record_audit(
        "accountant-check",
        summary,
        out,
        tracking_uri,
        {"accountant": accountant, "margin": margin, "n_points": len(points)},
    )
    console.print(f"details: {shown(path)}")
    if summary.get("reference_not_tight"):
        console.print(
            f"[yellow]note:[/yellow] the PLD interval could not be refined to 1 % of ε within the time budget "
            f"at {summary['reference_not_tight']} point(s): see pld_note in the JSON"
        )
    print_verdict(recorded, fail_on_inconclusive=fail_on_inconclusive)


@app.command("canary-audit")
def canary_audit(
    trainer: Annotated[
        str, typer.Option("--trainer", help="module:function (features, labels, seed) -> model; runs your code")
    ],
    kind: Annotated[
        str, typer.Option(help="out_of_distribution | mislabeled (dirac needs white-box access: refused)")
    ] = "out_of_distribution",
    mode: Annotated[
        str,
        typer.Option(
            help="profile (independent runs vs the claim's trade-off curve) | multi-canary (runs × column canaries) "
            "| multi (K models with, K without) | one-run"
        ),
    ] = "profile",
    models: Annotated[
        int | None,
        typer.Option(
            "--models",
            help="runs (profile, default 48000 plus a quarter as many pilot runs; multi-canary, default 200) "
            "or models per side (multi, default 200)",
        ),
    ] = None,
    canaries: Annotated[
        int | None,
        typer.Option(
            "--canaries", help="canaries per run (multi-canary, default 32) or in the one run (one-run, default 200)"
        ),
    ] = None,
    looks: Annotated[
        int | None,
        typer.Option(
            "--looks",
            help="profile, multi: looks at the evidence (the planned --models halved each time; default 6; "
            "stops at the first that refutes); 1 = fixed size",
        ),
    ] = None,
    spending: Annotated[
        str,
        typer.Option(
            "--spending",
            help="profile, multi: how α is split over the looks: haybittle-peto | obrien-fleming | bonferroni",
        ),
    ] = "haybittle-peto",
    claimed_epsilon: Annotated[
        float | None, typer.Option("--claimed-epsilon", help="overrides the trainer's CLAIM")
    ] = None,
    delta: Annotated[float | None, typer.Option(help="δ of the claim")] = None,
    rows: Annotated[int, typer.Option(help="rows of the harness's default data the trainer is given")] = 256,
    seed: Annotated[int, typer.Option(help="seed of the data, canaries and runs")] = 0,
    executor: Annotated[
        str,
        typer.Option(
            "--executor",
            help="where the training runs go, each isolated from this process: "
            "local (one child process) | processes | ray (same numbers on each)",
        ),
    ] = "processes",
    workers: WorkersOption = None,
    ray_address: RayAddressOption = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="seconds one training run may take (every executor)")
    ] = 900.0,
    fail_on_inconclusive: FailOnInconclusiveOption = False,
    out: Annotated[Path, typer.Option("--out", help="folder that receives <timestamp>-canary-audit/")] = Path("runs"),
    tracking_uri: TrackingUriOption = None,
    quiet: QuietOption = False,
    ledger: LedgerOption = None,
    dataset: DatasetOption = None,
) -> None:
    """Audit your DP training code with canaries: exit 1 when its output contradicts its claimed privacy.

    Default (--mode profile): independent training runs with one canary each, tested against the
    whole trade-off curve the claim implies (σ, q, T from the accountant, else the (ε, δ) pair).

    Your trainer runs only in isolated worker processes. When even a perfect attack could not
    exceed the claim with this many models, the result is INCONCLUSIVE (exit 0) and says how many
    models would be needed."""
    from audit.dp_validation.canary_audit import (
        MODE_DEFAULTS,
        planned_training_runs,
        run_canary_audit,
        train_and_score_task,
    )
    from audit.machinery.crash_log import set_log_folder
    from audit.machinery.executors import check_executor_options, make_user_code_executor
    from audit.machinery.input_files import check_seed
    from audit.machinery.progress import CountingPool

    set_log_folder(out)
    check_seed(seed)  # a negative seed was a ValueError deep in the data generator (exit 3)
    if not timeout > 0:
        raise AuditInputError("--timeout", f"must be > 0 seconds, got {timeout}")
    check_executor_options(executor, workers, ray_address)  # before a worker or a cluster starts
    progress = command_progress(quiet)
    planned = planned_training_runs(mode, models) if mode in MODE_DEFAULTS else None
    try:  # the models train in isolated workers: the step counts finished runs of planned ones, with time left
        # Lazy: shown from the first batch of runs, so a trainer that fails to import stays one error line.
        with (
            progress.lazy_step(f"canary audit ({mode}): training runs finished", total=planned) as runs_step,
            make_user_code_executor(
                executor,
                workers=workers,
                ray_address=ray_address,
                timeout=timeout,
                name="--trainer",
                what=f"trainer {trainer}",
            ) as pool,
        ):
            counting = CountingPool(pool, runs_step, lambda function: function is train_and_score_task)
            result = run_canary_audit(
                trainer,
                kind=kind,
                mode=mode,
                n_models=models,
                n_canaries=canaries,
                claimed_epsilon=claimed_epsilon,
                delta=delta,
                seed=seed,
                n_rows=rows,
                pool=counting,
                timeout=timeout,
                looks=looks,
                spending=spending,
                announce=None
                if quiet
                else lambda text: console.print(text, soft_wrap=True, markup=False, highlight=False),
            )
            execution = pool.describe()
    finally:
        progress.close()
    result["execution"] = execution  # where it ran: not a number of the audit (same on every executor)
    path, result = record_audit(
        "canary-audit",
        result,
        out,
        tracking_uri,
        {
            "trainer": trainer,
            "kind": kind,
            "mode": mode,
            "seed": seed,
            "executor": executor,
            "workers": execution["workers"],
            "models": result.get("n_runs") or result.get("n_models_per_side"),
            "canaries": result.get("n_canaries_per_run") or result.get("n_canaries"),
        },
    )
    record_in_ledger(ledger, dataset, "canary-audit", result, path)
    sequential = result.get("sequential")
    if mode == "multi":
        print_runs_used(result, "models per side")
    elif isinstance(sequential, dict):  # runs used of runs planned, and why it stopped
        console.print(
            f"runs: {sequential['runs_used']:,} of {sequential['runs_planned']:,} planned (pilot included); "
            f"{sequential['stop_reason']}",
            soft_wrap=True,
            markup=False,
            highlight=False,
        )
    print_bound(result, f"canary audit of {trainer} ({kind}, {mode})", path, fail_on_inconclusive)


@app.command("mechanism-audit")
def mechanism_audit(
    mechanism: Annotated[
        str, typer.Option("--mechanism", help="module:function (data, rng) -> output; runs your code")
    ],
    trials: Annotated[int, typer.Option("--trials", help="runs on each of the two neighbouring datasets")] = 20000,
    claimed_epsilon: Annotated[
        float | None, typer.Option("--claimed-epsilon", help="overrides the mechanism's CLAIM")
    ] = None,
    delta: Annotated[float | None, typer.Option(help="δ of the claim")] = None,
    seed: Annotated[int, typer.Option(help="seed of the trials")] = 0,
    looks: LooksOption = None,
    spending: SpendingOption = "haybittle-peto",
    fail_on_inconclusive: FailOnInconclusiveOption = False,
    out: Annotated[Path, typer.Option("--out", help="folder that receives <timestamp>-mechanism-audit/")] = Path(
        "runs"
    ),
    tracking_uri: TrackingUriOption = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="seconds all trials of your mechanism may take together")
    ] = 600.0,
    quiet: QuietOption = False,
) -> None:
    """Black-box audit of a randomized function on two neighbouring datasets (Clopper-Pearson bound)."""
    from audit.dp_validation.claims import validate_claim
    from audit.dp_validation.mechanism_audit import run_mechanism_audit
    from audit.machinery.crash_log import set_log_folder
    from audit.machinery.input_files import check_number, check_seed
    from audit.machinery.run_directory import check_output_folder
    from audit.machinery.tracking import check_tracking_uri
    from audit.machinery.user_code import check_spec
    from audit.machinery.workers import run_isolated

    set_log_folder(out)
    check_spec(mechanism, "--mechanism")
    from audit.machinery.limits import check_count

    check_count("--trials", trials)  # the range table (docs/errors.md), before the mechanism loads
    if claimed_epsilon is not None:
        validate_claim(
            claimed_epsilon, 0.0 if delta is None else delta, epsilon_flag="--claimed-epsilon", delta_flag="--delta"
        )
    elif delta is not None:
        check_number(delta, "--delta", low=0, high=1, high_open=True)
    check_seed(seed)
    check_number(timeout, "--timeout", low=0, low_open=True, high=86_400)
    check_output_folder(out)
    check_tracking_uri(tracking_uri)
    from audit.dp_validation.mechanism_audit import mechanism_design

    design = mechanism_design(trials, looks=looks, spending=spending)
    if not quiet:
        print_declared_design(design, "trials per dataset")
    # The mechanism (and its module) run only in a worker process, cut after --timeout seconds.
    progress = command_progress(quiet)
    try:  # the trials run in a worker process: the step shows elapsed time (and heartbeats in a log)
        with progress.step(f"mechanism: up to {trials} trials on each dataset, threshold audit"):
            result = run_isolated(
                run_mechanism_audit,
                mechanism,
                name=f"--mechanism {mechanism}",
                timeout=timeout,
                what="mechanism",
                n_trials=trials,
                claimed_epsilon=claimed_epsilon,
                delta=delta,
                seed=seed,
                looks=looks,
                spending=spending,
            )
    finally:
        progress.close()
    path, result = record_audit(
        "mechanism-audit", result, out, tracking_uri, {"mechanism": mechanism, "trials": trials, "seed": seed}
    )
    print_runs_used(result, "trials per dataset")
    print_bound(result, f"mechanism audit of {mechanism}", path, fail_on_inconclusive)


@app.command("conformance")
def conformance(
    trainer: Annotated[
        str | None,
        typer.Option(
            "--trainer",
            help="module:object with CLAIM, max_grad_norm, sample_batches, privatize_gradients; runs your code",
        ),
    ] = None,
    factory: Annotated[
        str | None,
        typer.Option(
            "--factory",
            help="module:function () -> (model, optimizer, data_loader, privacy_engine) made private by Opacus: "
            "the checks drive YOUR optimizer, loader and accountant; runs your code",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the checks' draws")] = 0,
    alpha: Annotated[float, typer.Option("--alpha", help="family-wise false-alarm rate of all checks")] = 0.01,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds the checks may take")] = 600.0,
    out: Annotated[Path, typer.Option("--out", help="folder that receives <timestamp>-conformance/")] = Path("runs"),
    tracking_uri: TrackingUriOption = None,
    fail_on_inconclusive: FailOnInconclusiveOption = False,
) -> None:
    """Deterministic checks of a step-function DP-SGD (--trainer) or of your own Opacus objects (--factory):
    noise std, per-example clipping, Poisson sampling, steps and q vs the claim; exit 1 when one fails."""
    from rich.table import Table

    from audit.dp_validation.conformance import run_conformance
    from audit.machinery.crash_log import set_log_folder
    from audit.machinery.input_files import check_seed

    set_log_folder(out)
    check_seed(seed)
    if not timeout > 0:
        raise AuditInputError("--timeout", f"must be > 0 seconds, got {timeout}")
    if (trainer is None) == (factory is None):
        raise AuditInputError("--trainer", "give either --trainer module:object or --factory module:function")
    if factory is not None:
        from audit.dp_validation.opacus_conformance import run_factory_conformance

        result = run_factory_conformance(factory, seed=seed, alpha=alpha, timeout=timeout)
    else:
        result = run_conformance(trainer, seed=seed, alpha=alpha, timeout=timeout)
    table = Table(title=f"conformance: {result['trainer']}")
    for header in ("check", "result", "measured", "expected", "detail"):
        table.add_column(header)

    def shown(value) -> str:
        if isinstance(value, dict):
            return ", ".join(f"{k} {v:.4g}" for k, v in value.items())
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    for c in result["checks"]:
        table.add_row(
            c["check"],
            "[green]pass[/]" if c["passed"] else "[red]FAIL[/]",
            shown(c["value"]),
            shown(c["expected"]),
            c["detail"],
        )
    console.print(table)
    for skipped in result.get("not_checked") or []:
        console.print(f"not checked: {skipped['check']} — {skipped['why']}", highlight=False, soft_wrap=True)
    path, result = record_audit(
        "conformance", result, out, tracking_uri, {"trainer": result["trainer"], "seed": seed, "alpha": alpha}
    )
    console.print(f"details: {shown(path)}")
    print_verdict(
        result, fail_on_inconclusive=fail_on_inconclusive
    )  # the one verdict: every failed check a reason, exit 1 on fail
