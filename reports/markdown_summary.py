"""A short Markdown summary of an audit for pull-request comments and CI job summaries.

Verdict line, one compact table row per target ε (and per synthetic entry), the failed rules.
GitHub renders HTML inside Markdown, so `&` and `<` in text from results are escaped (no tag can
open) and `|` is escaped, so that a name can neither inject markup nor break the table.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from audit.machinery.run_directory import write_text_atomic
from audit.machinery.verdict import claim_sentence, extra_reasons, status_word
from audit.machinery.verdict_words import counts_line, pass_caveat, rule_line
from reports.results_access import confidence as _confidence
from reports.results_access import finetuning_label, subject_status
from reports.results_access import get as _get
from reports.results_access import tpr_at as _tpr
from reports.synthetic_report import claimed_epsilon_text

__all__ = ["render_summary_markdown", "write_summary_markdown"]


def render_summary_markdown(results: dict[str, Any], *, evaluation: Any = None) -> str:
    """Markdown for a PR comment: the claims, then a policy's rules (`verdict.rules`), counted apart.
    `evaluation` is accepted for callers that hold one and is not needed."""
    verdict = results.get("verdict") or {}
    policy = verdict.get("policy")
    name = _cell(_get(results, "config", "name") or "audit")
    status = verdict.get("status") or ("fail" if verdict.get("passed") is False else "pass")
    word = status_word(status, verdict)
    icon = {"fail": "❌", "inconclusive": "⚪", "pass": "✅"}.get(status, "🔴" if word == "LEAKS" else "⚪")
    lines = [f"### {icon} privacy-audit `{name}`: {word}", ""]
    caveat = pass_caveat(verdict) if status == "pass" else ""
    if caveat:
        lines[-1:] = [f"{_cell(caveat, table=False)} (its statement is below).", ""]
    lines.append(
        f"Decided by: {_cell(verdict.get('decided_by') or ('policy ' + str(policy) if policy else 'built-in checks'))}"
        f" — {_cell(counts_line(verdict), table=False)}"
    )
    statement = (verdict.get("family_wise_error") or {}).get("statement")
    if statement:
        lines.append(f"<sub>{_cell(statement, table=False)}</sub>")
    lines.append("")

    targets = results.get("targets") or []
    if targets:
        accountant = _get(results, "config", "privacy", "accountant") or "accountant"
        # Few columns (a PR comment): the claim, the best proven bound, the strongest attack, the status.
        header = ["ε target", f"{_cell(accountant)} ε", "best ε LB", "strongest attack: AUC (CI) · TPR@1%", "claim"]
        # The main job's white-box one-run twins: the canaries' cost in accuracy, side by side. The llm job's
        # targets carry a one-run block too but no accuracy: their column is the test perplexity.
        twins = any(
            isinstance(t.get("whitebox_one_run"), dict) and "test_accuracy_with_canaries" in t["whitebox_one_run"]
            for t in targets
        )
        language_models = any(isinstance(t.get("llm"), dict) for t in targets)
        if twins:
            header.insert(4, "test acc (with canaries)")
        elif language_models:
            header.insert(4, "test perplexity")
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join("---:" for _ in header) + "|")
        for index, target in enumerate(targets):
            eps_acc = target.get("epsilon_accountant")
            if eps_acc is None:
                eps_acc = (target.get("epsilon") or {}).get(accountant)
            best = _num(target.get("epsilon_lb_best"), 2)
            if target.get("epsilon_lb_best_method"):
                best += f" ({_cell(target['epsilon_lb_best_method'])})"
            row = [
                _eps(target.get("epsilon_target")) + _finetuning(target),
                _num(eps_acc) if eps_acc is not None else "no DP claim",
                best,
            ]
            found = [a for a in target.get("attacks") or [] if isinstance(a, dict)]
            top = max(found, key=lambda a: (_tpr(a, 0.01) or 0.0, a.get("auc") or 0.0), default=None)
            if top is None:
                row.append("—")
            else:
                ci = top.get("auc_ci") or [None, None]
                row.append(
                    f"{_cell(top.get('name'))}: {_num(top.get('auc'))} ({_num(ci[0], 2)}–{_num(ci[1], 2)}) · "
                    f"{_num(_tpr(top, 0.01), 3)}"
                )
            if not twins and language_models:
                row.append(_num((target.get("llm") or {}).get("test_perplexity"), 1))
            if twins:
                twin = twin_found if isinstance(twin_found := target.get("whitebox_one_run"), dict) else {}
                row.append(
                    _num(target.get("test_accuracy"))
                    + (f" ({_num(twin.get('test_accuracy_with_canaries'))})" if twin else "")
                )
            word_here = subject_status(verdict, f"targets[{index}]")
            row.append(f"**{word_here}**" if word_here in ("refuted", "no DP claim · LEAKS") else word_here)
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
        from reports.federated_tables import LEVEL_HEADERS, level_rows

        federated = level_rows(results)
        if federated:  # the federated job: each level's rows and the canary clients' one-run row, with their status
            lines.append("| " + " | ".join(LEVEL_HEADERS) + " |")
            lines.append("|" + "|".join("---:" for _ in LEVEL_HEADERS) + "|")
            lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in federated]
            lines.append("")

    synthetic = [s for s in results.get("synthetic") or [] if isinstance(s, dict)]
    if synthetic:
        lines.append("| generator | ε | DCR share (CI) | distance-MIA AUC | claim |")
        lines.append("|---|---:|---:|---:|---:|")
        for index, entry in enumerate(synthetic):
            dcr = dcr_found if isinstance(dcr_found := entry.get("dcr"), dict) else {}
            mia = mia_found if isinstance(mia_found := entry.get("mia"), dict) else {}
            ci = dcr.get("dcr_share_ci") or [None, None]
            lines.append(
                f"| {_cell(entry.get('generator') or '—')} | {_cell(claimed_epsilon_text(entry))} "
                f"| {_num(dcr.get('dcr_share'))} ({_num(ci[0], 2)}–{_num(ci[1], 2)}) | {_num(mia.get('auc'))} "
                f"| {'baseline (shown)' if entry.get('baseline') else subject_status(verdict, f'synthetic[{index}]')} |"
            )
        lines.append("")

    claims = [c for c in verdict.get("claims") or [] if isinstance(c, dict)]
    if claims:
        lines.append(f"**Claims** ({_cell(counts_line({'claims': claims}), table=False)}):")
        lines += [f"- {_cell(claim_sentence(c), table=False)}" for c in claims]
        lines.append("")
    rules = [r for r in verdict.get("rules") or [] if isinstance(r, dict)]
    if rules:  # a policy's rules: a list of their own, after the claims, never counted as claims
        lines.append(
            f"**Policy rules** ({_cell(counts_line({'rules': rules}).split('; policy: ', 1)[-1], table=False)}):"
        )
        lines += [f"- {_cell(rule_line(r), table=False)}" for r in rules]
        lines.append("")
    leakage = [e for e in verdict.get("leakage") or [] if isinstance(e, dict)]
    if leakage:
        lines.append("**No DP claim — leakage:**")
        lines += [f"- {_cell(e.get('statement'), table=False)}" for e in leakage]
        lines.append("")
    reasons = extra_reasons(verdict)
    if reasons:
        lines.append(
            "**Why it fails:**"
            if status == "fail"
            else "**Why it is inconclusive:**"
            if status == "inconclusive"
            else "**Reasons:**"
        )
        lines += [f"- {_cell(reason, table=False)}" for reason in reasons]
        lines.append("")
    unit = _get(results, "data", "epsilon_unit")  # the text job says what one ε is about (person / document)
    if unit:
        lines += [f"**Unit of privacy:** {_cell(unit, table=False)}", ""]
    findings = [str(n) for n in verdict.get("notes") or []]
    if findings:
        lines.append("**Findings (decide nothing):**")
        lines += [f"- {_cell(note, table=False)}" for note in findings]
        lines.append("")

    confidence = _confidence(results)
    foot = [
        "best ε LB: the one-run bound (proven for one model with coin-flip membership)"
        + (f" at {100 * confidence:g} % confidence" if confidence else "")
        + "; Clopper-Pearson over one model's candidates assumes independent trials and decides nothing"
        + "; a bound of 0 is not a proof of privacy"
    ]
    sha = _get(results, "environment", "git_sha")
    if sha:
        foot.append(f"commit `{_cell(str(sha)[:12])}`")
    run_id = _get(results, "mlflow", "parent_run_id")
    if run_id:
        foot.append(f"MLflow run `{_cell(run_id)}`")
    lines.append("<sub>" + " · ".join(foot) + "</sub>")
    return "\n".join(lines) + "\n"


def write_summary_markdown(results: dict[str, Any], path: Path, *, evaluation: Any = None) -> Path:
    """Write the summary to `path` atomically (temp file in the same folder, then os.replace)."""
    path = Path(path)
    write_text_atomic(path, render_summary_markdown(results, evaluation=evaluation))
    return path


def _finetuning(target: dict[str, Any]) -> str:
    """' · full' / ' · LoRA' for the llm job's targets: the same ε is fine-tuned both ways, one row each."""
    label = finetuning_label(target)
    return f" · {_cell(label)}" if label else ""


def _cell(value: Any, *, table: bool = True) -> str:
    text = (
        ("" if value is None else str(value))
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace("`", "'")
        .replace("\n", " ")
    )
    return text.replace("|", "\\|") if table else text


def _num(value: Any, digits: int = 3) -> str:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return "—"
    if math.isinf(value):
        return "∞"
    return f"{value:.{digits}f}"


def _eps(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isinf(value)):
        return "∞"
    return f"{value:g}" if isinstance(value, (int, float)) else _cell(value)
