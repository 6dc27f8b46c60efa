"""The `--ledger URI --dataset NAME` pair that `run`, `canary-audit`, `whitebox-audit` and
`synth-check` take, and the recording they share with `ledger record` (audit/cli/ledger_commands.py):
the provenance of a row, the one call to the store under the budget, the console line and the
`ledger` section a results file gets.

An interrupt after the commit is reported as kept (exit 0, "recorded #N"), never as 130: the user
would record the release again and the budget would count it twice.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from audit.cli.app import EXIT_FAILED, console, err_console, shown
from audit.errors import AuditInputError

__all__ = [
    "DatasetOption",
    "LedgerOption",
    "composition_line",
    "eps_text",
    "kept_despite_interrupt",
    "percent_text",
    "provenance",
    "record_in_ledger",
    "record_under_budget",
]


# ---------------------------------------------------------------------------------------------
# The option pair the recording commands share, validated when parsed (before any work starts).


def _check_pair(ctx: typer.Context, mine: str, other: str, value: Any) -> None:
    # Click processes every option (defaults too) before the command runs; whichever of the pair
    # comes second sees the first in ctx.params and checks that both or neither were given.
    if other in ctx.params and (value is None) != (ctx.params[other] is None):
        given, missing = (mine, other) if value is not None else (other, mine)
        raise AuditInputError(
            f"--{missing}",
            f"missing: --{given} needs --{missing} too (record into a ledger with --ledger URI --dataset NAME)",
        )


def _ledger_callback(ctx: typer.Context, value: str | None) -> str | None:
    if value is not None:
        from audit.ledger.store import preflight_ledger

        # Form, file type and an existing database's schema, before the audit runs; nothing is
        # created until a release is recorded.
        preflight_ledger(value)
    _check_pair(ctx, "ledger", "dataset", value)
    return value


def _dataset_callback(ctx: typer.Context, value: str | None) -> str | None:
    if value is not None:
        from audit.ledger.store import check_dataset_name

        check_dataset_name(value)
    _check_pair(ctx, "dataset", "ledger", value)
    return value


LedgerOption = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        callback=_ledger_callback,
        help="privacy ledger to record this release in: a file path (SQLite) or "
        "postgresql+psycopg://user@host/db; with --dataset",
    ),
]
DatasetOption = Annotated[
    str | None,
    typer.Option(
        "--dataset",
        callback=_dataset_callback,
        help="the dataset whose privacy budget this release spends (with --ledger)",
    ),
]


def provenance():
    """Who/when/what of this invocation: the command as parsed (every option given, secrets never:
    a URI's password is hidden), which is also right when `main` is called in-process."""
    import shlex

    from audit.ledger.store import Provenance

    try:  # recent typer vendors its own click, with its own context stack
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover - older typer uses click itself
        from click import get_current_context
    ctx = get_current_context(silent=True)
    if ctx is None:
        return Provenance()
    names, parts, node = [], [], ctx
    while node is not None and node.parent is not None:
        names.insert(0, node.info_name)
        node = node.parent
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if param.name == "help" or value is None or value == param.default or not getattr(param, "opts", None):
            continue
        if isinstance(value, str):
            from audit.machinery.secrets import MASK, is_secret_name, redact

            value = MASK if is_secret_name(param.name) else redact(value)
        flag = param.opts[0]
        parts.append(flag if value is True else f"{flag} {shlex.quote(str(value))}")
    return Provenance(command=" ".join(["privacy-audit", *names, *parts])[:4000])


def percent_text(spent: float, limit: float | None) -> str:
    if limit is None:
        return "no budget set"
    return f"budget {limit:g} ({spent / limit:.0%} used)" if math.isfinite(spent) else f"budget {limit:g} (exceeded: ∞)"


def eps_text(value: float | None) -> str:
    return "∞" if value is None or math.isinf(value) else f"{value:.4g}"


def composition_line(composition, limit: float | None) -> str:
    c = composition
    tight = {"pld": "PLD, tight", "rdp": "RDP"}.get(c.method, c.method)
    return (
        f"spent ε = {eps_text(c.epsilon)} at δ = {c.delta:g} ({tight}); basic composition {eps_text(c.basic_epsilon)}, "
        f"advanced {eps_text(c.advanced_epsilon)}{_advanced_aside(c)}; {percent_text(c.epsilon, limit)}"
    )


def _advanced_aside(composition) -> str:
    # The advanced formula is never printed above basic (it would read as a worse figure than the
    # one beside it); when it was the looser one, the console says so in words.
    return " (= basic: the advanced formula is looser here)" if composition.advanced_note else ""


def _section(dataset: str, store_description: str, composition, limit, recorded: bool, **extra) -> dict[str, Any]:
    spent = composition.epsilon
    return {
        "recorded": recorded,
        "dataset": dataset,
        "ledger": store_description,
        "epsilon_spent": None if math.isinf(spent) else spent,
        "epsilon_spent_unbounded": math.isinf(spent),
        "delta": composition.delta,
        "method": composition.method,
        "method_note": composition.method_note,
        "basic_epsilon": composition.as_dict()["basic_epsilon"],
        "advanced_epsilon": composition.as_dict()["advanced_epsilon"],
        "max_total_epsilon": limit,
        **extra,
    }


def _rerender_report(path: Path, written: dict[str, Any], policy) -> None:
    # A run folder's report.html was written before the release was recorded: render it again so it
    # shows the dataset's spent budget after this release (single-audit JSON files have no such page).
    if path.name != "results.json" or not (path.parent / "report.html").is_file():
        return
    from audit.machinery.verdict import verdict_for_results
    from reports.html_report import write_html_report

    _, evaluation = verdict_for_results(written, policy)
    write_html_report(written, path.parent, evaluation=evaluation)


def record_under_budget(store, dataset: str, inputs: list, policy):
    """`store.record` of `inputs` under the ledger's budget and the policy's `max_total_epsilon`, with
    this invocation's provenance; the interrupt stays held after the commit (`keep_held`) until the
    caller has said what was recorded. Raises `BudgetExceeded` with nothing recorded."""
    limit = policy.rules.total_epsilon_limit(dataset) if policy is not None else None
    return store.record(
        dataset,
        inputs,
        provenance(),
        policy_limit=limit,
        policy_name=getattr(policy, "display_name", None),
        keep_held=True,
    )


def record_in_ledger(
    ledger: str | None, dataset: str | None, command: str, results: dict, path: Path, policy=None
) -> None:
    """Record the DP release(s) `results` (written at `path`) describe; the one call a recording command makes.

    No-op without --ledger. On success: a `ledger` section in `results` and in the file at `path`,
    ledger tags on the command's MLflow run, and the spent budget on the console. Over budget:
    nothing recorded, the section says so, FAIL and exit 1. A claim the audit refuted is not recorded.
    """
    if ledger is None or dataset is None:
        return
    from audit.ledger.sources import refuted_claims, releases_in_results
    from audit.ledger.store import BudgetExceeded, Ledger, ReleaseInput, file_sha256
    from audit.machinery.run_directory import write_result_json_atomic

    found, notes, _ = releases_in_results(results, f"{command} results")
    sha = file_sha256(path)  # the file as the audit wrote it, before the ledger section is added
    mlflow = mlflow_found if isinstance(mlflow_found := results.get("mlflow"), dict) else {}
    run_id = mlflow.get("parent_run_id") or mlflow.get("run_id")
    for note in notes:
        console.print(f"[yellow]ledger note:[/yellow] {shown(note)}", highlight=False, soft_wrap=True)

    def publish(section: dict[str, Any]) -> None:
        # Added to the file as written (re-read, not re-serialised from memory), and to `results`.
        section["results_sha256"] = sha
        written = json.loads(path.read_text(encoding="utf-8"))
        written["ledger"] = results["ledger"] = section
        write_result_json_atomic(path, written)
        _rerender_report(path, written, policy)

    refuted = refuted_claims(results)
    if refuted:
        publish(
            {
                "recorded": False,
                "dataset": dataset,
                "epsilon_spent": None,
                "epsilon_spent_unbounded": False,
                "reason": "not recorded: the audit refuted the claim ("
                + "; ".join(refuted)[:300]
                + "), so its ε would understate what was spent",
            }
        )
        err_console.print(f"[red]ledger:[/red] {shown(results['ledger']['reason'])}", highlight=False, soft_wrap=True)
        return
    inputs = [ReleaseInput(label, command, mechanisms, str(path.resolve()), sha, run_id) for label, mechanisms in found]
    with Ledger.open(ledger) as store:
        try:
            outcome = record_under_budget(store, dataset, inputs, policy)
        except BudgetExceeded as exc:
            publish(_section(dataset, store.description, exc.composition, exc.limit, False, reason=str(exc)))
            status = str((results.get("verdict") or {}).get("status", "")).upper()
            console.print(f"audit verdict: {status} (results: {shown(path)})", highlight=False, soft_wrap=True)
            err_console.print(f"[red]FAIL[/red] (privacy ledger) {shown(exc)}", highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_FAILED) from None
        description = store.description
    try:  # committed: the results file, MLflow tags and console line follow before an interrupt counts
        _published_record(outcome, dataset, description, publish, mlflow, run_id)
    finally:
        outcome.held.stop()
    kept_despite_interrupt(outcome)


def _published_record(outcome, dataset: str, description: str, publish, mlflow: dict, run_id) -> None:
    publish(
        _section(
            dataset,
            description,
            outcome.composition,
            outcome.limit,
            True,
            release_ids=outcome.release_ids,
            limit_source=outcome.limit_source,
        )
    )
    if run_id and mlflow.get("tracking_uri"):
        from audit.machinery.tracking import tag_run

        c = outcome.composition
        tag_run(
            mlflow["tracking_uri"],
            run_id,
            {
                "ledger.dataset": dataset,
                "ledger.release_ids": ",".join(map(str, outcome.release_ids)),
                "ledger.epsilon_spent": eps_text(c.epsilon),
                "ledger.delta": f"{c.delta:g}",
                "ledger.method": c.method,
                "ledger.max_total_epsilon": "none" if outcome.limit is None else f"{outcome.limit:g}",
                "ledger.uri": description,
            },
        )
    ids = ", ".join(f"#{i}" for i in outcome.release_ids)
    console.print(
        f"ledger: recorded release {ids} on dataset '{shown(dataset)}' ({shown(description)}); "
        + composition_line(outcome.composition, outcome.limit),
        highlight=False,
        soft_wrap=True,
    )


def kept_despite_interrupt(outcome) -> None:
    if outcome.interrupted_after_commit or outcome.held.fired:
        ids = ", ".join(f"#{i}" for i in outcome.release_ids)
        print(
            f"interrupted after the release was committed: recorded {ids} is kept (do not record it again)",
            file=sys.stderr,
        )
