"""`gate` and `report`: a policy or a re-render on an existing results.json."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from audit.cli.app import app, console
from audit.cli.output import print_verdict
from audit.errors import AuditInputError


def writable_folder(folder: Path) -> None:
    """Create `folder` if needed and make sure files can be written into it (exit 2, not a crash)."""
    import os

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AuditInputError(f"--out '{folder}'", f"is not a writable directory ({exc.strerror})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise AuditInputError(f"--out '{folder}'", "is not a writable directory (permission denied)")


@app.command()
def gate(
    results_file: Annotated[Path, typer.Argument(metavar="RESULTS", help="a results.json")],
    policy: Annotated[Path, typer.Option("--policy", help="YAML policy")],
    out: Annotated[Optional[Path], typer.Option("--out", help="where junit.xml and summary.md go (default: beside RESULTS)")] = None,
) -> None:
    """Evaluate a policy on a results file: exit 0 pass, 1 fail, 2 bad input."""
    from audit.machinery.crash_log import set_log_folder
    from audit.machinery.policy import evaluate_policy, load_policy, load_results, verdict_from_evaluation
    from reports.junit import write_junit_xml
    from reports.markdown_summary import write_summary_markdown

    folder = out or results_file.parent
    set_log_folder(folder)
    loaded_policy = load_policy(policy)
    results = load_results(results_file)
    evaluation = evaluate_policy(loaded_policy, results, source=f"results file '{results_file}'")
    if not any(check.applicable for check in evaluation.checks):
        # Nothing was checked, so nothing passed: an empty results file must not open a CI gate.
        raise AuditInputError(f"--policy '{policy}'", f"no rule applies to results file '{results_file}' "
                              f"({len(results.get('targets') or [])} targets, {len(results.get('synthetic') or [])} "
                              "synthetic entries): a gate that checks nothing cannot pass")
    gated = {**results, "verdict": verdict_from_evaluation(evaluation), "policy_evaluation": evaluation.as_dict()}
    writable_folder(folder)
    write_junit_xml(evaluation, folder / "junit.xml")
    write_summary_markdown(gated, folder / "summary.md", evaluation=evaluation)
    n_fail = len(evaluation.failures)
    console.print(f"{len(evaluation.checks)} checks, {n_fail} failed; junit: {folder / 'junit.xml'}")
    print_verdict(gated)


@app.command()
def report(
    results_file: Annotated[Path, typer.Argument(metavar="RESULTS", help="a results.json")],
    out: Annotated[Optional[Path], typer.Option("--out", help="folder for report.html (default: beside RESULTS)")] = None,
) -> None:
    """Re-render report.html (and summary.md) from a results file, and print its tables."""
    from audit.machinery.crash_log import set_log_folder
    from audit.machinery.policy import load_results
    from reports.console import results_summary_table, synthetic_summary_table
    from reports.html_report import write_html_report
    from reports.markdown_summary import write_summary_markdown

    folder = out or results_file.parent
    set_log_folder(folder)
    results = load_results(results_file)
    writable_folder(folder)
    path = write_html_report(results, results_file.parent, out_dir=folder)
    write_summary_markdown(results, folder / "summary.md")
    if results.get("targets"):
        console.print(results_summary_table(results))
    synthetic_table = synthetic_summary_table(results)
    if synthetic_table is not None:
        console.print(synthetic_table)
    console.print(f"report: {path}")
