"""Writing a decided run: the verdict, then results.json, report.html, summary.md, junit.xml and the
MLflow tags, all from that one verdict.

Its own module (not audit.sweep.runner) so that the single-audit commands (audit-scores, synth-check,
mechanism-audit, …) that publish through audit/cli/output.py do not import the sweep's training and
attack stack — torch, Opacus, every attack, matplotlib's figures — only to write their outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from audit.machinery.policy import Policy, PolicyEvaluation
from audit.machinery.run_directory import write_result_json_atomic
from audit.machinery.tracking import AuditTracker
from audit.machinery.verdict import verdict_for_results, verdict_tags
from reports.html_report import write_html_report
from reports.junit import write_junit_xml
from reports.markdown_summary import write_summary_markdown

__all__ = ["write_outputs"]


def write_outputs(
    results: dict[str, Any],
    folder: Path,
    policy: Policy | None,
    tracker: AuditTracker | None,
    parent_id: str | None,
    on_written: Callable[[int, int], None] | None = None,
) -> PolicyEvaluation | None:
    """The verdict (audit.machinery.verdict: built-in checks, or the policy folded in), then
    results.json, report.html, summary.md, junit.xml and the MLflow tags — all from that one verdict.

    `results` is updated in place (verdict, targets' violation, policy_evaluation). `on_written(done, OUTPUTS)`
    after each of the OUTPUTS pieces (progress).
    """
    written = [0]

    def one_more() -> None:
        written[0] += 1
        if on_written is not None:
            on_written(written[0], OUTPUTS)

    decided, evaluation = verdict_for_results(results, policy)
    results.clear()
    results.update(decided)
    write_result_json_atomic(folder / "results.json", results)  # first: the report quotes its SHA-256
    one_more()
    report = write_html_report(results, folder, evaluation=evaluation)
    one_more()
    summary = write_summary_markdown(results, folder / "summary.md", evaluation=evaluation)
    one_more()
    junit = write_junit_xml(results, folder / "junit.xml", evaluation=evaluation)
    one_more()
    if tracker is not None and parent_id is not None:
        tracker.set_tags(parent_id, verdict_tags(results["verdict"]))
        tracker.log_metrics(
            parent_id, {"n_violations": float(sum(bool(t.get("violation")) for t in results["targets"]))}
        )
        for path in (report, summary, junit):
            tracker.log_artifact(parent_id, path)
    one_more()
    return evaluation


# Pieces write_outputs reports: results.json, report.html, summary.md, junit.xml, the MLflow tags and artifacts.
OUTPUTS = 5
