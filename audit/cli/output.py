"""What the commands share: progress, the verdict line, and publishing a run folder + MLflow run."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Annotated

import typer

from audit.cli.app import EXIT_FAILED, console, err_console, shown, switch
from audit.machinery.progress import Progress, progress_for
from audit.machinery.secrets import redact


def sigterm_as_interrupt() -> None:
    """SIGTERM (a CI timeout, a scheduler) ends a run like Ctrl-C: runs marked KILLED, checkpoints kept."""
    from audit.machinery.interrupts import install_interrupt_handlers

    install_interrupt_handlers()  # also notes the signal, for an interrupt a library re-raises as its own error


QuietOption = Annotated[bool, switch("quiet", "no progress output (results, findings and errors still print)")]
FailOnInconclusiveOption = Annotated[
    bool,
    typer.Option(
        "--fail-on-inconclusive/--no-fail-on-inconclusive",
        help="exit 1 when the audit could not refute the claim (its ceiling is at or below the claim)",
    ),
]
TrackingUriOption = Annotated[
    str | None,
    typer.Option("--tracking-uri", help="MLflow tracking URI (default: sqlite:///mlflow.db in the working directory)"),
]
WorkersOption = Annotated[
    int | None,
    typer.Option(
        "--workers",
        help="processes: child processes [default: the cores]; ray: CPUs of the local cluster started here",
    ),
]
RayAddressOption = Annotated[
    str | None,
    typer.Option(
        "--ray-address", help="ray: join a running cluster (auto | ray://host:port) instead of starting a local one"
    ),
]


def command_progress(quiet: bool) -> Progress:
    """Progress on stderr: bars on a terminal, one line per step with elapsed time otherwise, nothing if quiet."""
    return progress_for(err_console, quiet)


FailOnLeakOption = Annotated[
    bool,
    typer.Option(
        "--fail-on-leak/--no-fail-on-leak",
        help="exit 1 when a model or release without a DP claim LEAKS (a significant test of chance)",
    ),
]


def with_fail_on_leak(results: dict, fail_on_leak: bool) -> dict:
    """Record `--fail-on-leak` in the results' verdict, where `verdict_for_results` (the run, `report`,
    `gate`) reads it: a LEAKS statement then fails the verdict."""
    results["verdict"] = {**(results.get("verdict") or {}), "fail_on_leak": bool(fail_on_leak)}
    return results


_CLAIM_STYLE = {"held": "green", "not_refuted": "yellow", "refuted": "red", "untestable": "yellow"}
_RULE_STYLE = {"passed": "green", "failed": "red", "not_applicable": "dim"}


def print_verdict(results: dict, fail_on_inconclusive: bool = False) -> None:
    """The verdict as everything else shows it (audit.machinery.verdict): one line per claim, the
    leakage statement of each subject without a claim, then the top line, each reason once.
    Exit 1 when it is "fail" (or "inconclusive" with `fail_on_inconclusive`)."""
    from audit.cli.app import shown as safe  # reasons quote file names and user text
    from audit.machinery.verdict import claim_sentence, extra_reasons, status_word
    from audit.machinery.verdict_words import counts_line, pass_caveat, rule_line

    verdict = results["verdict"]
    status = verdict.get("status") or ("pass" if verdict.get("passed") else "fail")
    by = verdict.get("decided_by") or "built-in checks"
    # "note:", not "finding:": a finding is what exit 1 means; these (score ties, saturation, …) qualify
    # figures and decide nothing
    for note in verdict.get("notes") or []:
        console.print(f"[yellow]note:[/yellow] {safe(note)}", highlight=False, soft_wrap=True)
    fwer = (verdict.get("family_wise_error") or {}).get("statement")
    if fwer:
        console.print(f"[dim]{safe(fwer)}[/dim]", highlight=False, soft_wrap=True)
    claims = [c for c in verdict.get("claims") or [] if isinstance(c, dict)]
    # With --fail-on-inconclusive an untestable claim is why the command fails: it goes to stderr.
    failing_open = fail_on_inconclusive and status == "inconclusive"
    for claim in claims:
        style = _CLAIM_STYLE.get(str(claim.get("status")), "white")
        # What makes the command fail goes to stderr, where a CI log shows it beside the exit code.
        to_stderr = (status == "fail" and claim.get("status") == "refuted") or (
            failing_open and claim.get("status") in ("untestable", "not_refuted")
        )
        out = err_console if to_stderr else console
        out.print(f"[{style}]claim[/{style}] {safe(claim_sentence(claim))}", highlight=False, soft_wrap=True)
    # A policy's rules come after the claims, each passed / failed / not applicable: never a claim.
    for rule in verdict.get("rules") or []:
        if isinstance(rule, dict):
            style = _RULE_STYLE.get(str(rule.get("status")), "white")
            out = err_console if rule.get("status") == "failed" else console
            out.print(f"[{style}]{safe(rule_line(rule))}[/{style}]", highlight=False, soft_wrap=True)
    for entry in verdict.get("leakage") or []:
        style = "red" if entry.get("status") == "leaks" else "green"
        console.print(f"[{style}]no claim[/{style}] {safe(entry.get('statement'))}", highlight=False, soft_wrap=True)
    word = status_word(status, verdict)
    counts = counts_line(verdict)
    if status == "fail":
        err_console.print(f"[red]FAIL[/red] ({safe(by)}): {counts}", highlight=False, soft_wrap=True)
        for reason in extra_reasons(verdict):
            err_console.print(f"[red]FAIL[/red] {safe(reason)}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_FAILED)
    if status == "inconclusive":
        (err_console if failing_open else console).print(
            f"[yellow]INCONCLUSIVE[/yellow] ({safe(by)}): {counts}; no claim was refuted, but not every claim "
            "was tested by a check with power against it",
            highlight=False,
            soft_wrap=True,
        )
        for reason in extra_reasons(verdict):
            (err_console if fail_on_inconclusive else console).print(
                f"[yellow]INCONCLUSIVE[/yellow] {safe(reason)}", highlight=False, soft_wrap=True
            )
        if fail_on_inconclusive:
            err_console.print("[red]FAIL[/red] inconclusive and --fail-on-inconclusive was given", highlight=False)
            raise typer.Exit(EXIT_FAILED)
        return
    if status == "no_claim":
        style = "red" if word == "LEAKS" else "green"
        # A leak here did not fail: --allow-leak, or `run`'s reference target, which is not a release.
        console.print(
            f"[{style}]{word}[/{style}] ({safe(by)}): no DP claim was tested, so nothing passes or fails; "
            + (
                "reported only, exit 0 (--allow-leak, or a reference target that is not your release)"
                if word == "LEAKS"
                else "exit 0"
            ),
            highlight=False,
            soft_wrap=True,
        )
        return
    caveat = pass_caveat(verdict)
    console.print(
        f"[green]PASS[/green] ({safe(by)}): every claim held ({safe(counts)})"
        + (f"; {safe(caveat)}" if caveat else ""),
        highlight=False,
        soft_wrap=True,
    )


def publish_results(
    compute,
    *,
    out: Path,
    folder_name: str,
    experiment: str,
    tracking_uri: str | None,
    run_name: str,
    tags: dict,
    metrics_of,
    policy,
    progress: Progress | None = None,
    what: str | None = "audit",
    inputs: list[dict] | None = None,
) -> tuple[dict, Path]:
    """Compute a results dict into a staged run folder, log one MLflow run, write report/summary/JUnit.

    `compute(staging)` returns the results (it may write files into the staging folder);
    `metrics_of(results)` the MLflow metrics. The folder appears complete or not at all.
    `progress` shows the two steps (`what` unless None, then the report and MLflow) and is closed at the end.
    `experiment` is the command (`privacy-audit/<command>` in MLflow); `inputs` are tables logged as
    MLflow datasets: dicts with frame, name, source, context.
    """
    progress = progress or Progress()
    try:
        return _publish_results(
            compute,
            out=out,
            folder_name=folder_name,
            experiment=experiment,
            tracking_uri=tracking_uri,
            run_name=run_name,
            tags=tags,
            metrics_of=metrics_of,
            policy=policy,
            progress=progress,
            what=what,
            inputs=inputs or [],
        )
    finally:
        progress.close()


def _publish_results(
    compute, *, out, folder_name, experiment, tracking_uri, run_name, tags, metrics_of, policy, progress, what, inputs
) -> tuple[dict, Path]:
    from audit.machinery.run_directory import StagedRunDirectory
    from audit.machinery.tracking import AuditTracker, experiment_name
    from audit.sweep.outputs import write_outputs

    run_dir = StagedRunDirectory(out, folder_name)
    staging = run_dir.create()
    tracker = None
    try:
        with progress.step(what) if what else nullcontext():
            results = compute(staging)
        report_step = progress.begin("report, summary and MLflow run")
        tracker = AuditTracker(tracking_uri, experiment_name(experiment), command=experiment)
        run_id = tracker.start_run(run_name, tags=tags)
        for table in inputs:
            tracker.log_table(
                run_id, table["frame"], name=table["name"], source=table.get("source"), context=table["context"]
            )
        tracker.log_metrics(run_id, metrics_of(results))
        results["mlflow"] = {"tracking_uri": redact(tracker.tracking_uri), "parent_run_id": run_id}
        write_outputs(results, staging, policy, tracker, run_id)
        tracker.set_verdict(run_id, results.get("verdict"))
        final = run_dir.commit()
        tracker.finish(run_id)
        progress.end(report_step)
    except BaseException as exc:
        _end_open_runs(tracker, exc)
        run_dir.discard()
        raise
    return results, final


def _end_open_runs(tracker, exc: BaseException) -> None:
    """MLflow runs left open by `exc`: KILLED for Ctrl-C / SIGTERM (also when a library re-raised it as
    its own error), FAILED for anything else; never RUNNING."""
    from audit.machinery.interrupts import interrupt_received

    if tracker is not None:
        interrupted = isinstance(exc, KeyboardInterrupt) or interrupt_received()
        tracker.fail_open_runs("KILLED" if interrupted else "FAILED")


def record_audit(kind: str, result: dict, out: Path, tracking_uri: str | None, params: dict) -> tuple[Path, dict]:
    """Write `<out>/<timestamp>-<kind>/<kind>.json` atomically and log one MLflow run in `privacy-audit/<kind>`."""
    from audit.machinery.run_directory import StagedRunDirectory, write_result_json_atomic
    from audit.machinery.single_audit_verdicts import single_audit_verdict
    from audit.machinery.tracking import AuditTracker, experiment_name
    from audit.machinery.verdict_words import verdict_tags
    from reports.audit_report import write_audit_report

    result = {**result, "verdict": single_audit_verdict(kind, result)}
    run_dir = StagedRunDirectory(out, kind)
    staging = run_dir.create()
    tracker = AuditTracker(tracking_uri, experiment_name(kind), command=kind)
    run_id = tracker.start_run(kind, tags=params)
    try:
        tracker.log_params(run_id, params)
        tracker.set_tags(run_id, verdict_tags(result["verdict"]))
        verdict = result["verdict"]
        failed = verdict["status"] == "fail"
        tracker.log_metrics(
            run_id,
            {
                "epsilon_lower_bound": result.get("epsilon_lower_bound"),
                "claimed_epsilon": result.get("claimed_epsilon"),
                "violation": float(failed),
                "ceiling": verdict.get("ceiling"),
                "inconclusive": float(verdict.get("status") == "inconclusive") if verdict else None,
                **{f"n_{label}": float(n) for label, n in result.get("counts", {}).items()},
                **(
                    {
                        "profile_refuted": float(bool(result["profile_test"].get("refuted"))),
                        "profile_p_value": result["profile_test"].get("p_value"),
                        "profile_refutable": float(bool((result.get("profile_ceiling") or {}).get("refutable"))),
                    }
                    if isinstance(result.get("profile_test"), dict)
                    else {}
                ),
            },
        )

        result = {**result, "mlflow": {"tracking_uri": redact(tracker.tracking_uri), "run_id": run_id}}
        write_result_json_atomic(staging / f"{kind}.json", result)
        write_audit_report(kind, result, staging)
        final = run_dir.commit()
        tracker.log_artifact(run_id, final / f"{kind}.json")
        tracker.log_artifact(run_id, final / "report.html")
        tracker.finish(run_id)
    except BaseException as exc:
        _end_open_runs(tracker, exc)
        run_dir.discard()
        raise
    return final / f"{kind}.json", result


def print_bound(result: dict, what: str, path: Path, fail_on_inconclusive: bool = False) -> None:
    claim = result.get("claimed_epsilon")
    bound = result.get("epsilon_lower_bound")
    profile = isinstance(result.get("profile_test"), dict)
    console.print(
        f"{what}: empirical ε lower bound {bound:.3f} at {result.get('confidence', 0.95):.0%} confidence "
        f"(claimed ε {claim if claim is None else f'{claim:.3f}'}, δ {result.get('delta')})"
        + ("; shown beside the profile test, which decides" if profile else "")
    )
    gdp = result.get("gdp_estimate")
    if isinstance(gdp, dict) and isinstance(gdp.get("epsilon"), (int, float)):
        mu = f", μ {gdp['mu']:.3f}" if isinstance(gdp.get("mu"), (int, float)) else ""
        console.print(f"GDP estimate (assumes a Gaussian trade-off; not a bound): ε {gdp['epsilon']:.3f}{mu}")
    elif gdp is not None:
        console.print(f"GDP estimate (assumes a Gaussian trade-off; not a bound): {gdp}")
    test = result.get("profile_test")
    if isinstance(test, dict):
        console.print(
            f"profile test ({test.get('profile')}): FPR {test['fpr']:.3f}, FNR {test['fnr']:.3f} "
            f"vs the claimed floor {test['claimed_fnr_floor']:.3f}; exact test of {test['statistic']}: "
            f"p = {test['p_value']:.2g}: " + ("REFUTED" if test.get("refuted") else "consistent with the claim")
        )
        if isinstance(result.get("one_run_epsilon_lower_bound"), (int, float)):
            console.print(
                "one-run bound (Steinke et al. 2023) over the same runs: "
                f"ε ≥ {result['one_run_epsilon_lower_bound']:.3f}"
            )
    fdp = result.get("fdp_one_run")
    if isinstance(fdp, dict) and "refuted" in fdp:
        gdp = fdp.get("gdp_epsilon")
        decides = not isinstance(test, dict)  # beside the profile test it is a figure, not the decision
        console.print(
            f"one-run f-DP test (Mahloujifar et al. 2024) of the claimed curve over {fdp['m']} canaries: "
            + ("refuted" if fdp["refuted"] else "not refuted")
            + ("" if decides else " (shown only: the profile test above decides)")
            + (
                f"; GDP-family ε ≥ {gdp:.3f} (assumes a Gaussian trade-off curve)"
                if isinstance(gdp, (int, float))
                else "; GDP-family ε withheld (the scores contradict a Gaussian trade-off curve)"
                if fdp.get("gdp_epsilon_withheld")
                else ""
            )
        )
        ceiling_point = result.get("profile_ceiling") or {}
        console.print(
            "ceiling: "
            + (
                "a perfect attack with these runs could refute the claim's profile"
                if ceiling_point.get("refutable")
                else "no attack with these runs could refute the claim's profile (inconclusive)"
            )
        )
    verdict = result.get("verdict") or {}
    if verdict.get("ceiling") is not None:
        needed = verdict.get("needed")
        console.print(
            f"ceiling: a perfect attack could reach at most {verdict['ceiling']:.3f} with these runs"
            + (f"; exceeding the claim needs ≥ {needed} {verdict.get('needed_unit')}" if needed else "")
        )
    console.print(f"details: {shown(path)}")
    ceiling = result.get("ceiling")
    if isinstance(ceiling, (int, float)) and ceiling != verdict.get("ceiling"):  # one ceiling, said once
        console.print(
            ("(ε, δ) bound's ceiling" if isinstance(result.get("profile_test"), dict) else "ceiling")
            + f": a perfect attack reaches at most {ceiling:.3f} with these runs at this confidence"
        )
    if result["verdict"]["status"] == "pass":
        console.print("(a bound below the claim is not a proof that the claim holds)")
    print_verdict(result, fail_on_inconclusive=fail_on_inconclusive)


def _one_run_line(label: str, attacks: list[tuple[str, dict]]) -> list[str]:
    parts, m, claim_words = [], None, set()
    for name, attack in attacks:
        bound = (attack.get("epsilon_lb") or {}).get("one_run")
        fdp = attack.get("fdp_one_run")
        if not isinstance(bound, (int, float)) or not isinstance(fdp, dict):
            continue
        m = fdp.get("m")
        gdp = fdp.get("epsilon_gdp")
        gdp_text = (
            f"{gdp:.2f}"
            if isinstance(gdp, (int, float))
            else "withheld (scores not Gaussian)"
            if fdp.get("epsilon_gdp_withheld")
            else "not bounded"
        )
        refuted = fdp.get("claim_refuted")
        if refuted is not None:
            claim_words.add("refuted" if refuted else "not refuted")
        parts.append(f"{name} {bound:.2f} / {gdp_text}" + (" (f-DP refutes the claimed curve)" if refuted else ""))
    if not parts:
        return []
    claim = f"; f-DP test of the claimed (ε, δ) curve: {' / '.join(sorted(claim_words))}" if claim_words else ""
    return [
        f"{label}: one-run bounds over {m} coin-flip candidates, Steinke et al. ε ≥ (decides; sound for any "
        f"mechanism) / f-DP, Mahloujifar et al. 2024, ε ≥ if the trade-off curve is Gaussian (shown only): "
        + " · ".join(parts)
        + claim
    ]


def one_run_lines(results: dict) -> list[str]:
    """One line per target (or synthetic release) whose membership was randomized: both one-run bounds
    of each attack, their assumptions, and which decides (Steinke et al.'s, pre-declared; the f-DP
    result is shown beside it). One line per target, not per attack: the rule is said once."""
    lines: list[str] = []
    for target in results.get("targets") or []:
        eps = target.get("epsilon_target")
        name = target.get("name") or (
            f"target ε {eps:g}" if isinstance(eps, (int, float)) else "target ε ∞ (no DP claim)"
        )
        attacks = [a for a in target.get("attacks") or [] if isinstance(a, dict)]
        lines += _one_run_line(name, [(str(a.get("name")), a) for a in attacks])
    for entry in results.get("synthetic") or []:
        if isinstance(entry, dict) and isinstance(entry.get("mia"), dict):
            lines += _one_run_line(str(entry.get("generator", "synthetic")), [("distance MIA", entry["mia"])])
    return lines


def print_one_run_bounds(results: dict) -> None:
    for line in one_run_lines(results):
        console.print(line, soft_wrap=True, highlight=False)
