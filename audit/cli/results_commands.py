"""`gate` and `report`: a policy or a re-render on an existing results.json.

Both recompute the verdict with audit.machinery.verdict from the numbers in results.json, so the
run, the gate and a re-render cannot disagree. `gate` (and `report --policy F`) write the gated
results.json, report.html, summary.md and junit.xml together, recording the policy it applied
(`policy_applied`), so a later plain `report` re-renders the same policy verdict instead of
silently undoing it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from audit.cli.app import app, console, shown
from audit.cli.output import print_verdict
from audit.cli.verdict_flags import FailOnInconclusiveOption
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


def _render_all(results: dict[str, Any], policy: Any, results_file: Path, folder: Path) -> tuple[dict, Path]:
    """Verdict (with the policy, if any), then results.json, report.html, summary.md, junit.xml in `folder`.

    Every output is rendered once, before the first is written (--out not even created): a results
    file that breaks one of them, or a run folder holding a link or a FIFO, leaves no trace; the
    page quotes the SHA-256 of the results.json written beside it."""
    import json

    from audit.machinery.result_integrity import signing_key, with_integrity
    from audit.machinery.run_directory import write_text_atomic
    from audit.machinery.verdict import verdict_for_results
    from reports.html_report import REPORT_FILENAME, render_html_report
    from reports.junit import render_junit_xml
    from reports.markdown_summary import render_summary_markdown

    decided, evaluation = verdict_for_results(results, policy)
    decided["policy_applied"] = (
        {**_json_safe(policy.model_dump(mode="json", exclude_none=True)), "path": policy.path}
        if policy is not None
        else None
    )
    decided = with_integrity(decided, signing_key())  # a new file: its own digest (and signature)
    payload = json.dumps(decided, indent=2, allow_nan=False) + "\n"  # as write_json_atomic writes it
    page = render_html_report(decided, results_file.parent, evaluation=evaluation, results_json=payload.encode("utf-8"))
    summary = render_summary_markdown(decided, evaluation=evaluation)
    junit = render_junit_xml(decided, evaluation=evaluation)
    writable_folder(folder)
    write_text_atomic(folder / "results.json", payload)
    report = folder / REPORT_FILENAME
    write_text_atomic(report, page)
    write_text_atomic(folder / "summary.md", summary)
    write_text_atomic(folder / "junit.xml", junit)
    return decided, report


def _json_safe(value: Any) -> Any:
    # JSON has no infinity: an override for the non-private target (ε = .inf) is stored as "inf".
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def _stored_policy(results: dict[str, Any], results_file: Path):
    from audit.machinery.policy import policy_from_dict

    stored = results.get("policy_applied")
    if not isinstance(stored, dict):
        return None
    content = {k: v for k, v in stored.items() if k != "path"}
    return policy_from_dict(
        content, source=f"results file '{results_file}': field 'policy_applied'", path=stored.get("path")
    )


def _results_or_audit_file(path: Path) -> tuple[Path, str | None, bool]:
    """(file, audit kind or None, found inside a folder): a run folder or results.json → results.json;
    a single audit's folder or `<kind>.json` (any kind of audit/machinery/audit_kinds.py) → that file. A
    file found inside a folder must be a regular file there, not a link (audit.machinery.safe_files)."""
    import os

    from audit.machinery.audit_kinds import AUDIT_KINDS as SINGLE_AUDIT_KINDS  # live: a plug-in kind too

    if path.is_dir():
        names = ["results.json"] + [f"{kind}.json" for kind in SINGLE_AUDIT_KINDS]
        present = [name for name in names if os.path.lexists(path / name)]
        if "results.json" in present:
            return path / "results.json", None, True
        if len(present) != 1:
            raise AuditInputError(
                f"RESULTS '{path}'",
                "expected a folder holding results.json or one of "
                + ", ".join(f"{k}.json" for k in SINGLE_AUDIT_KINDS),
            )
        return path / present[0], present[0].removesuffix(".json"), True
    kind = path.name.removesuffix(".json")
    return path, (kind if kind in SINGLE_AUDIT_KINDS and path.name.endswith(".json") else None), False


def _as_input_error(where: str, what: str):
    """A results file that passed its schema but still breaks the verdict or the report is a
    malformed file (exit 2 naming it), not a crash: the schema cannot say everything."""
    from contextlib import contextmanager

    @contextmanager
    def guard():
        try:
            yield
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError, OverflowError) as exc:
            if isinstance(exc, AuditInputError):
                raise
            raise AuditInputError(
                where, f"does not hold what {what} holds ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})"
            ) from None

    return guard()


def _read_result_file(path: Path, kind: str | None, inside: bool):
    """The one reader of gate and report (audit.dp_validation.result_files.read_result_file); its
    integrity sentence printed as one line."""
    from audit.dp_validation.result_files import read_result_file

    loaded = read_result_file(path, kind, follow=not inside)
    console.print(f"integrity: {shown(loaded.integrity.sentence)}", highlight=False, soft_wrap=True)
    return loaded


def _gate_tags(verdict: dict[str, Any], policy: Any, integrity: dict[str, Any] | None, written: Path) -> dict[str, str]:
    status = str(verdict.get("status"))
    return {
        "verdict.gate": status,
        "verdict.gate.policy": f"{policy.display_name} ({policy.path})"[:4900],
        "verdict.gate.reasons": " | ".join(map(str, verdict.get("reasons") or []))[:4900] or "-",
        "verdict.gate.integrity": (
            f"{integrity.get('state')}; signature {integrity.get('signature')}" if isinstance(integrity, dict) else "-"
        ),
        "verdict.gate.results": str(written.resolve())[:4900],
    }


def _log_gate_to_mlflow(
    results: dict[str, Any], verdict: dict[str, Any], policy: Any, written: Path, tracking_uri: str | None
) -> None:
    """The gate's verdict on the MLflow run the results point to (tags verdict.gate*, the policy file as
    an artifact under gate/), beside the run's own `verdict` tag; or one line saying why not."""
    from audit.machinery.tracking import gate_run_target, log_gate_verdict

    target = gate_run_target(results, tracking_uri)
    if isinstance(target, str):
        console.print(shown(target), highlight=False, soft_wrap=True)
        return
    uri, run_id = target
    problem = log_gate_verdict(
        uri,
        run_id,
        _gate_tags(verdict, policy, results.get("integrity_check"), written),
        Path(policy.path) if policy.path else None,
    )
    console.print(
        shown(problem)
        if problem
        else f"MLflow: tag verdict.gate = {verdict.get('status')} on run {run_id} in {shown(uri)} (its own "
        "verdict tag unchanged; the policy file under artifacts gate/)",
        highlight=False,
        soft_wrap=True,
    )


def _gate_single_audit(
    kind: str,
    path: Path,
    policy: Any,
    folder: Path,
    inside: bool = False,
    tracking_uri: str | None = None,
    fail_on_inconclusive: bool = False,
) -> None:
    """`gate` on one pre-declared audit: the file validated against its schema and its flags against
    its numbers (audit.dp_validation.result_files), the policy folded into its verdict
    (audit.machinery.verdict); the gated `<kind>.json`, report.html and junit.xml written together."""
    from audit.machinery.run_directory import check_output_folder, write_result_json_atomic
    from audit.machinery.single_audit_verdicts import single_audit_verdict_with_policy

    where = f"results file '{path}'"
    result = _read_result_file(path, kind, inside).content
    check_output_folder(folder)  # cheap, creates nothing: before the dry render
    if isinstance(result.get("audit_verdict"), dict):  # gated before: judge the audit's own verdict again
        result = {**result, "verdict": result["audit_verdict"]}
    with _as_input_error(where, f"a {kind}.json written by privacy-audit"):
        verdict, evaluation = single_audit_verdict_with_policy(kind, result, policy, source=where)
    if not any(check.applicable for check in evaluation.checks):
        raise AuditInputError(
            f"--policy '{policy.path}'", f"no rule applies to a {kind} result: a gate that checks nothing cannot pass"
        )
    gated = {
        **result,
        "verdict": verdict,
        "audit_verdict": result.get("verdict"),
        "policy_evaluation": evaluation.as_dict(),
        "policy_applied": {**_json_safe(policy.model_dump(mode="json", exclude_none=True)), "path": policy.path},
    }
    from audit.machinery.run_directory import write_text_atomic
    from reports.audit_report import render_audit_report
    from reports.junit import render_junit_xml

    with _as_input_error(where, f"a {kind}.json written by privacy-audit"):  # render once, first: nothing half-written
        page = render_audit_report(kind, gated)
        junit = render_junit_xml(gated)
    writable_folder(folder)
    write_result_json_atomic(folder / path.name, gated)
    report_path = folder / "report.html"
    write_text_atomic(report_path, page)
    write_text_atomic(folder / "junit.xml", junit)
    # the rules' counts are in the verdict's top line (verdict_words.counts_line), apart from the claims'
    console.print(f"junit: {shown(folder / 'junit.xml')}; report: {shown(report_path)}")
    _log_gate_to_mlflow(gated, verdict, policy, folder / path.name, tracking_uri)
    print_verdict(gated, fail_on_inconclusive=fail_on_inconclusive)


@app.command()
def gate(
    results_file: Annotated[
        Path,
        typer.Argument(
            metavar="RESULTS",
            help="a results.json or run folder, or a canary-audit / mechanism-audit / whitebox-audit / conformance "
            "/ accountant-check JSON or folder",
        ),
    ],
    policy: Annotated[Path, typer.Option("--policy", help="YAML policy")],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="where the gated results.json, report.html, summary.md and junit.xml go (default: beside RESULTS)",
        ),
    ] = None,
    tracking_uri: Annotated[
        str | None,
        typer.Option(
            "--tracking-uri",
            help="MLflow store of the run the results name "
            "(default: the SQLite store the results point to, if it exists here)",
        ),
    ] = None,
    fail_on_inconclusive: FailOnInconclusiveOption = False,
) -> None:
    """Evaluate a policy on a results file and re-render every output with it: exit 0 pass/inconclusive, 1 fail, 2 bad input."""
    from audit.machinery.crash_log import set_log_folder
    from audit.machinery.policy import evaluate_policy, load_policy

    results_file, kind, inside = _results_or_audit_file(results_file)
    folder = out or results_file.parent
    set_log_folder(folder)
    loaded_policy = load_policy(policy)
    if kind is not None:  # a canary / mechanism / conformance / accountant-check result
        _gate_single_audit(kind, results_file, loaded_policy, folder, inside, tracking_uri, fail_on_inconclusive)
        return
    results = _read_result_file(results_file, None, inside).content
    from audit.machinery.run_directory import check_output_folder

    check_output_folder(folder)  # cheap, creates nothing: before the dry render
    evaluation = evaluate_policy(loaded_policy, results, source=f"results file '{results_file}'")
    if not any(check.applicable for check in evaluation.checks):
        # Nothing was checked, so nothing passed: an empty results file must not open a CI gate.
        raise AuditInputError(
            f"--policy '{policy}'",
            f"no rule applies to results file '{results_file}' "
            f"({len(results.get('targets') or [])} targets, {len(results.get('synthetic') or [])} "
            "synthetic entries): a gate that checks nothing cannot pass",
        )
    with _as_input_error(f"results file '{results_file}'", "a results.json written by privacy-audit"):
        gated, report_path = _render_all(results, loaded_policy, results_file, folder)
    console.print(f"junit: {shown(folder / 'junit.xml')}; report: {shown(report_path)}")
    _log_gate_to_mlflow(gated, gated.get("verdict") or {}, loaded_policy, folder / "results.json", tracking_uri)
    print_verdict(gated, fail_on_inconclusive=fail_on_inconclusive)


@app.command()
def report(
    results_file: Annotated[Path, typer.Argument(metavar="RESULTS", help="a results.json")],
    out: Annotated[Path | None, typer.Option("--out", help="folder for report.html (default: beside RESULTS)")] = None,
    policy: Annotated[
        Path | None,
        typer.Option(
            "--policy",
            help="YAML policy to decide the verdict (default: the one a gate applied, else the built-in checks)",
        ),
    ] = None,
    tracking_uri: Annotated[
        str | None,
        typer.Option(
            "--tracking-uri",
            help="with --policy: MLflow store of the run the results name "
            "(default: the SQLite store the results point to, if it exists here)",
        ),
    ] = None,
    fail_on_inconclusive: FailOnInconclusiveOption = False,
) -> None:
    """Re-render report.html, summary.md and junit.xml from a results file (the verdict recomputed, never undone)."""
    from audit.machinery.crash_log import set_log_folder
    from audit.machinery.policy import load_policy
    from reports.console import results_summary_table, synthetic_summary_table

    results_file, kind, inside = _results_or_audit_file(results_file)
    if kind is not None:
        raise AuditInputError(
            f"RESULTS '{results_file}'",
            f"is a {kind} result: its report.html is written by the "
            f"audit; re-render it with `privacy-audit gate {results_file} --policy P`",
        )
    folder = out or results_file.parent
    set_log_folder(folder)
    loaded_policy = load_policy(policy) if policy is not None else None
    results = _read_result_file(results_file, None, inside).content
    from audit.machinery.run_directory import check_output_folder

    check_output_folder(folder)  # cheap, creates nothing: before the dry render
    if loaded_policy is None:
        loaded_policy = _stored_policy(results, results_file)
    with _as_input_error(f"results file '{results_file}'", "a results.json written by privacy-audit"):
        decided, path = _render_all(results, loaded_policy, results_file, folder)
    if decided.get("targets"):
        console.print(results_summary_table(decided))
    synthetic_table = synthetic_summary_table(decided)
    if synthetic_table is not None:
        console.print(synthetic_table)
    console.print(f"report: {shown(path)}")
    if policy is not None:  # `report --policy` is a gate: its verdict goes where the run wrote, like gate's
        _log_gate_to_mlflow(decided, decided.get("verdict") or {}, loaded_policy, folder / "results.json", tracking_uri)
    print_verdict(
        decided, fail_on_inconclusive=fail_on_inconclusive
    )  # the same verdict, the same exit code as the command that made the results
