"""`ledger record | list | show | set-budget | remove`, and the `--ledger URI --dataset NAME` pair
that `run`, `canary-audit`, `whitebox-audit` and `synth-check` take to record what they released.

Recording refused because the budget would be exceeded: one FAIL line, exit 1, nothing recorded.
Bad input (a URI that is no database, a corrupt file, a dataset name with path characters, a σ
that is negative or NaN): one line, exit 2, nothing written — every input is checked before the
ledger is opened (opening creates a new SQLite file).
The recording pair and what it shares with `ledger record` is audit/cli/ledger_recording.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from audit.cli.app import EXIT_FAILED, AuditApp, app, console, err_console, shown, switch
from audit.cli.ledger_recording import (  # the pair is re-exported: the recording commands import it here
    DatasetOption,
    LedgerOption,
    composition_line,
    eps_text,
    kept_despite_interrupt,
    percent_text,
    provenance,
    record_in_ledger,
    record_under_budget,
)
from audit.errors import AuditInputError

__all__ = ["DatasetOption", "LedgerOption", "ledger_app", "record_in_ledger"]

ledger_app = AuditApp(
    add_completion=False,
    rich_markup_mode=None,
    no_args_is_help=True,
    help="The privacy-budget ledger: record every DP release on a dataset, compose them, gate on a budget.",
    short_help="The privacy-budget ledger: record DP releases per dataset, compose them, gate on a budget.",
)
app.add_typer(ledger_app, name="ledger")


# ---------------------------------------------------------------------------------------------
# `privacy-audit ledger …`

LedgerUriOption = Annotated[
    str,
    typer.Option(
        "--ledger",
        help="ledger database: a file path (SQLite, created on first record) or postgresql+psycopg://user@host/db",
    ),
]
RequiredDatasetOption = Annotated[str, typer.Option("--dataset", help="dataset name (letters, digits, '.', '_', '-')")]
JsonOption = Annotated[bool, switch("json", "print JSON instead of a table (for scripts)")]
DEFAULT_URI = "privacy-ledger.db"


def _hand_release(
    noise_multiplier, sample_rate, steps, gaussian_scale, laplace_scale, sensitivity, count, zcdp_rho, epsilon, delta
) -> tuple[str, dict[str, Any]]:
    from audit.ledger.mechanisms import describe_mechanism, validate_mechanism

    groups = {
        "--noise-multiplier/--sample-rate/--steps": (noise_multiplier, sample_rate, steps),
        "--gaussian-scale": (gaussian_scale,),
        "--laplace-scale": (laplace_scale,),
        "--zcdp-rho": (zcdp_rho,),
        "--epsilon/--delta": (epsilon, delta),
    }
    chosen = [name for name, values in groups.items() if any(v is not None for v in values)]
    if len(chosen) != 1:
        raise AuditInputError(
            "release",
            "give exactly one of --results, --noise-multiplier/--sample-rate/--steps "
            "(DP-SGD), --gaussian-scale, --laplace-scale, --zcdp-rho, --epsilon/--delta"
            + (f" (got {', '.join(chosen)})" if chosen else ""),
        )
    from audit.machinery.limits import check_count, check_range

    kind = chosen[0]
    # Every flag against the one range table (audit/machinery/limits.py), named as typed.
    if kind.startswith("--noise"):
        for flag, value in (
            ("--noise-multiplier", noise_multiplier),
            ("--sample-rate", sample_rate),
            ("--steps", steps),
        ):
            if value is None:
                raise AuditInputError(flag, "missing: DP-SGD needs --noise-multiplier σ, --sample-rate q and --steps T")
        check_range("ledger --noise-multiplier", noise_multiplier)
        check_range("ledger --sample-rate", sample_rate)
        check_count("ledger --steps", steps, where="--steps")
        spec = {"kind": "dpsgd", "noise_multiplier": noise_multiplier, "sample_rate": sample_rate, "steps": steps}
    elif kind in ("--gaussian-scale", "--laplace-scale"):
        scale = gaussian_scale if kind == "--gaussian-scale" else laplace_scale
        check_range(f"ledger {kind}", scale)
        check_range("ledger --sensitivity", sensitivity)
        spec = {"kind": kind[2:-6], "scale": scale, "sensitivity": sensitivity, "count": count}
    elif kind == "--zcdp-rho":
        check_range("ledger --zcdp-rho", zcdp_rho)
        spec = {"kind": "zcdp", "rho": zcdp_rho, "count": count}
    else:
        if epsilon is None or delta is None:
            raise AuditInputError(
                "--epsilon/--delta" if epsilon is None else "--delta",
                "an (ε, δ) pair needs both --epsilon and --delta (δ = 0 for pure ε-DP)",
            )
        check_range("ledger --epsilon", epsilon)
        check_range("ledger --delta", delta)
        spec = {"kind": "epsilon_delta", "epsilon": epsilon, "delta": delta, "count": count}
    if kind != "--noise-multiplier/--sample-rate/--steps":
        check_count("ledger --count", count, where="--count")
    flag = kind.split("/")[0]
    spec = validate_mechanism(spec, flag)
    return describe_mechanism(spec), spec


@ledger_app.command("record")
def ledger_record(
    dataset: RequiredDatasetOption,
    ledger: LedgerUriOption = DEFAULT_URI,
    results: Annotated[
        Path | None,
        typer.Option("--results", help="a results.json (run, synth-check) or a canary-audit / whitebox-audit JSON"),
    ] = None,
    noise_multiplier: Annotated[
        float | None, typer.Option("--noise-multiplier", help="DP-SGD σ (with --sample-rate, --steps)")
    ] = None,
    sample_rate: Annotated[float | None, typer.Option("--sample-rate", help="DP-SGD Poisson sampling rate q")] = None,
    steps: Annotated[int | None, typer.Option("--steps", help="DP-SGD steps T")] = None,
    gaussian_scale: Annotated[
        float | None, typer.Option("--gaussian-scale", help="Gaussian mechanism: noise standard deviation")
    ] = None,
    laplace_scale: Annotated[
        float | None, typer.Option("--laplace-scale", help="Laplace mechanism: noise scale b")
    ] = None,
    sensitivity: Annotated[
        float, typer.Option("--sensitivity", help="Gaussian (L2) / Laplace (L1) sensitivity of the query")
    ] = 1.0,
    zcdp_rho: Annotated[float | None, typer.Option("--zcdp-rho", help="a ρ-zCDP release")] = None,
    epsilon: Annotated[
        float | None, typer.Option("--epsilon", help="a release known only as an (ε, δ) pair: its ε")
    ] = None,
    delta: Annotated[float | None, typer.Option("--delta", help="the (ε, δ) pair's δ (0 for pure ε-DP)")] = None,
    count: Annotated[int, typer.Option("--count", help="how many times the mechanism ran (queries)")] = 1,
    label: Annotated[str | None, typer.Option("--label", help="what was released (shown in list)")] = None,
    policy: Annotated[
        Path | None, typer.Option("--policy", help="YAML policy whose max_total_epsilon also applies")
    ] = None,
    json_out: JsonOption = False,
) -> None:
    """Record one release on a dataset: exit 1 (nothing recorded) when it would exceed the budget."""
    from audit.ledger.store import (
        BudgetExceeded,
        Ledger,
        ReleaseInput,
        check_dataset_name,
        check_ledger_uri,
        file_sha256,
    )

    check_dataset_name(dataset)
    check_ledger_uri(ledger)
    loaded_policy = None
    if policy is not None:
        from audit.machinery.policy import load_policy

        loaded_policy = load_policy(policy)
    if label is not None and not label.strip():
        raise AuditInputError("--label", "must not be empty")
    hand = (noise_multiplier, sample_rate, steps, gaussian_scale, laplace_scale, zcdp_rho, epsilon, delta)
    if results is not None:
        if any(v is not None for v in hand):
            raise AuditInputError("--results", "give either --results or a mechanism by hand, not both")
        from audit.ledger.sources import refuted_claims, releases_in_results
        from audit.machinery.input_files import load_json_file

        where = f"--results '{results}'"
        content = load_json_file(results, where)
        found, notes, kind = releases_in_results(content, where)
        if refuted_claims(content):
            raise AuditInputError(
                where,
                "the audit refuted its claim ("
                + "; ".join(refuted_claims(content))[:200]
                + "): recording that ε would understate what was spent",
            )
        sha = file_sha256(results)
        mlflow = mlflow_found if isinstance(mlflow_found := content.get("mlflow"), dict) else {}
        run_id = mlflow.get("parent_run_id") or mlflow.get("run_id")
        inputs = [
            ReleaseInput(
                f"{label}: {name}" if label else name,
                kind,
                mechanisms,
                str(results.resolve()),
                sha,
                run_id if isinstance(run_id, str) else None,
            )
            for name, mechanisms in found
        ]
    else:
        notes = []
        description, spec = _hand_release(
            noise_multiplier,
            sample_rate,
            steps,
            gaussian_scale,
            laplace_scale,
            sensitivity,
            count,
            zcdp_rho,
            epsilon,
            delta,
        )
        inputs = [ReleaseInput(label or description, "hand", [spec])]
    with Ledger.open(ledger) as store:
        try:
            outcome = record_under_budget(store, dataset, inputs, loaded_policy)
        except BudgetExceeded as exc:
            if json_out:
                print(json.dumps({"recorded": False, "reason": str(exc), "composition": exc.composition.as_dict()}))
            err_console.print(f"[red]FAIL[/red] (privacy ledger) {shown(exc)}", highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_FAILED) from None
        description = store.description
    try:  # the release is committed: Ctrl-C / SIGTERM stay held until we have said so (exit 0, never 130)
        if json_out:
            print(
                json.dumps(
                    {
                        "recorded": True,
                        "release_ids": outcome.release_ids,
                        "dataset": dataset,
                        "composition": outcome.composition.as_dict() if outcome.composition is not None else None,
                        "max_total_epsilon": outcome.limit,
                    }
                )
            )
        else:
            for note in notes:
                console.print(f"[yellow]note:[/yellow] {shown(note)}", highlight=False, soft_wrap=True)
            for release_id, entry in zip(outcome.release_ids, inputs):
                console.print(
                    f"recorded #{release_id} on '{shown(dataset)}': {shown(entry.label)}",
                    highlight=False,
                    soft_wrap=True,
                )
            console.print(
                f"ledger {shown(description)}: " + composition_line(outcome.composition, outcome.limit),
                highlight=False,
                soft_wrap=True,
            )
    finally:
        outcome.held.stop()
    kept_despite_interrupt(outcome)


@ledger_app.command("list")
def ledger_list(
    ledger: LedgerUriOption = DEFAULT_URI,
    dataset: Annotated[
        str | None, typer.Option("--dataset", help="list this dataset's releases (default: list the datasets)")
    ] = None,
    json_out: JsonOption = False,
) -> None:
    """The ledger's datasets, or one dataset's releases (removed ones marked, never deleted)."""
    from rich.table import Table

    from audit.ledger.store import Ledger, check_dataset_name

    if dataset is not None:
        check_dataset_name(dataset)
    with Ledger.open(ledger, create=False) as store:
        if dataset is None:
            names = store.datasets()
            if json_out:
                print(json.dumps({"datasets": names}))
            else:
                console.print("\n".join(names) if names else "no datasets in this ledger", highlight=False)
            return
        state = store.dataset_state(dataset)
    if json_out:
        print(json.dumps({**state, "composition": state["composition"].as_dict()}, default=str))
        return
    table = Table(title=f"releases on '{dataset}' (δ {state['delta']:g})")
    for header in ("#", "when (UTC)", "by", "what", "mechanisms", "ε after", "status"):
        table.add_column(header)
    for r in state["releases"]:
        status = "active" if r["removed"] is None else f"removed {r['removed']['at'][:16]}: {r['removed']['reason']}"
        table.add_row(
            str(r["id"]), r["at"][:19], r["by"], r["label"], r["description"], eps_text(r["epsilon_after"]), status
        )
    console.print(table)
    console.print(composition_line(state["composition"], state["max_total_epsilon"]), highlight=False, soft_wrap=True)


@ledger_app.command("show")
def ledger_show(
    dataset: RequiredDatasetOption,
    ledger: LedgerUriOption = DEFAULT_URI,
    json_out: JsonOption = False,
) -> None:
    """A dataset's spent budget: the tight composed ε (PLD or RDP, named) next to basic and advanced composition."""
    from rich.table import Table

    from audit.ledger.store import Ledger, check_dataset_name

    check_dataset_name(dataset)
    with Ledger.open(ledger, create=False) as store:
        state = store.dataset_state(dataset)
    c = state["composition"]
    active = [r for r in state["releases"] if r["removed"] is None]
    if json_out:
        print(
            json.dumps(
                {
                    "dataset": dataset,
                    "delta": state["delta"],
                    "max_total_epsilon": state["max_total_epsilon"],
                    "active_releases": len(active),
                    "removed_releases": len(state["releases"]) - len(active),
                    "composition": c.as_dict(),
                }
            )
        )
        return
    table = Table(title=f"privacy budget of '{dataset}' at δ = {c.delta:g}: {len(active)} active release(s)")
    table.add_column("composition")
    table.add_column("ε", justify="right")
    table.add_column("note")
    table.add_row(f"tight ({c.method})", eps_text(c.epsilon), c.method_note)
    table.add_row("basic", eps_text(c.basic_epsilon), "Σ ε_i (δ split equally among the mechanisms that need one)")
    table.add_row(
        "advanced",
        eps_text(c.advanced_epsilon),
        "Dwork–Rothblum–Vadhan, half the free δ as slack" + (f"; {c.advanced_note}" if c.advanced_note else ""),
    )
    limit = state["max_total_epsilon"]
    table.add_row("budget", "—" if limit is None else f"{limit:g}", percent_text(c.epsilon, limit))
    console.print(table)


@ledger_app.command("set-budget")
def ledger_set_budget(
    dataset: RequiredDatasetOption,
    ledger: LedgerUriOption = DEFAULT_URI,
    max_epsilon: Annotated[float | None, typer.Option("--max-epsilon", help="the dataset's max_total_epsilon")] = None,
    # switch("no-limit") would also offer `--no-no-limit`: the pair is named by hand.
    no_limit: Annotated[
        bool,
        typer.Option(
            "--no-limit/--keep-limit",
            metavar="",
            help="remove the dataset's ε limit (the change is recorded); --keep-limit (default) leaves it",
        ),
    ] = False,
    delta: Annotated[
        float | None,
        typer.Option("--delta", help="the δ at which the dataset's ε is composed [default for a new dataset: 1e-5]"),
    ] = None,
) -> None:
    """Set a dataset's budget (max_total_epsilon) and/or its δ; every change is recorded with who and when."""
    from audit.ledger.store import BudgetBelowSpent, Ledger, check_dataset_name, check_ledger_uri

    check_dataset_name(dataset)
    check_ledger_uri(ledger)
    if (max_epsilon is None) == (not no_limit) and delta is None or (max_epsilon is not None and no_limit):
        raise AuditInputError("--max-epsilon", "give --max-epsilon E or --no-limit (and optionally --delta)")
    from audit.machinery.limits import check_range

    if max_epsilon is not None:
        check_range("ledger set-budget --max-epsilon", max_epsilon)
    if delta is not None:
        check_range("ledger set-budget --delta", delta)
    with Ledger.open(ledger) as store:
        if max_epsilon is None and not no_limit:  # --delta alone: keep the current limit
            current = store.dataset_state(dataset)["max_total_epsilon"] if dataset in store.datasets() else None
            max_epsilon = current
        try:
            composition = store.set_budget(dataset, max_epsilon, delta, provenance())
        except BudgetBelowSpent as exc:  # refused, nothing saved: the documented rule (docs/ledger.md)
            err_console.print(f"[red]FAIL[/red] (privacy ledger) {shown(exc)}", highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_FAILED) from None
    console.print(
        f"'{shown(dataset)}': max_total_epsilon {'none' if max_epsilon is None else f'{max_epsilon:g}'}, δ "
        f"{composition.delta:g}; " + composition_line(composition, max_epsilon),
        highlight=False,
        soft_wrap=True,
    )


@ledger_app.command("remove")
def ledger_remove(
    dataset: RequiredDatasetOption,
    release: Annotated[int, typer.Option("--release", help="the release's number (see ledger list)")],
    reason: Annotated[str, typer.Option("--reason", help="why it no longer counts (e.g. recorded twice by mistake)")],
    ledger: LedgerUriOption = DEFAULT_URI,
) -> None:
    """Mark a release removed: a removal row with who, when and why; the release itself is kept."""
    from audit.ledger.store import Ledger, check_dataset_name

    check_dataset_name(dataset)
    if not 1 <= release < 2**63:  # a release number is a database row id (SQLite and PostgreSQL: 64-bit)
        raise AuditInputError("--release", f"must be a release number ≥ 1 (see ledger list), got {release}")
    if not reason.strip():
        raise AuditInputError("--reason", "must say why the release no longer counts")
    with Ledger.open(ledger, create=False) as store:
        composition = store.remove(dataset, release, reason.strip()[:2000], provenance())
        limit = store.dataset_state(dataset)["max_total_epsilon"]
    console.print(
        f"release #{release} on '{shown(dataset)}' marked removed; " + composition_line(composition, limit),
        highlight=False,
        soft_wrap=True,
    )
