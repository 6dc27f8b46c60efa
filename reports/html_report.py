"""The audit report as one self-contained HTML page a compliance reviewer can read, print and sign.

Self-contained: figures are inlined as base64 PNG, the CSS is inline, nothing is fetched (no
scripts, fonts, stylesheets or remote images), so the file can be archived or mailed as is.
Every string that comes from results (config names, attack and generator names, notes, paths)
goes through `html.escape`.

`render_html_report(results, run_dir)` uses the PNGs in `run_dir/figures` when present; without a
run folder (re-rendering from a results.json alone) it redraws what results.json suffices for
(empirical vs accountant ε, privacy-utility) with `reports.figures` and says which figures are
missing.
"""
from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from attacks.registry import ATTACKS, citation, method_note
from audit.machinery.run_directory import write_text_atomic
from reports.results_access import attack_names as _attack_names
from reports.results_access import confidence as _confidence
from reports.results_access import get as _get
from reports.results_access import is_number as _is_number
from reports.results_access import tpr_at as _tpr
from reports.results_access import subject_status
from audit.machinery.verdict import claim_sentence, extra_reasons, status_word
from audit.machinery.verdict_words import counts_line, pass_caveat
from reports.synthetic_report import (
    claimed_epsilon_text,
    is_synthetic_release,
    synthetic_method_notes,
    synthetic_overview,
)
from reports.federated_tables import federated_html_section
from reports.text_tables import text_html_section

__all__ = ["render_html_report", "write_html_report"]

REPORT_FILENAME = "report.html"

_ESTIMATOR_NAMES = {"clopper_pearson": "Clopper-Pearson", "one_run": "one run"}

_CSS = """
:root { --ink: #1f2328; --muted: #59636e; --rule: #d0d7de; --head: #f3f5f7;
        --pass: #1a7f37; --pass-bg: #dafbe1; --fail: #b3261e; --fail-bg: #ffebe9;
        --none: #6e5a00; --none-bg: #fff8c5; }
* { box-sizing: border-box; }
html { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
body { margin: 0; color: var(--ink); background: #fff; font: 14px/1.5 system-ui, -apple-system, "Segoe UI",
       "DejaVu Sans", "Liberation Sans", Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 24px; margin: 0 0 2px; }
h2 { font-size: 18px; margin: 30px 0 8px; padding-bottom: 4px; border-bottom: 2px solid var(--rule); }
h3 { font-size: 15px; margin: 18px 0 6px; }
p, li { max-width: 75em; }
.sub { color: var(--muted); margin: 0 0 16px; }
.verdict { border: 2px solid; border-radius: 6px; padding: 12px 18px; margin: 8px 0 18px;
           display: flex; gap: 22px; align-items: flex-start; }
.verdict .word { font-size: 30px; font-weight: 800; letter-spacing: .04em; line-height: 1.1; white-space: nowrap; }
.verdict p { margin: 2px 0; }
.verdict ul { margin: 6px 0 0; padding-left: 20px; }
.verdict.pass { color: var(--pass); background: var(--pass-bg); border-color: var(--pass); }
.verdict.fail { color: var(--fail); background: var(--fail-bg); border-color: var(--fail); }
.verdict.none { color: var(--none); background: var(--none-bg); border-color: #d4a72c; }
.verdict .detail { color: var(--ink); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 3px 18px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 4px; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid var(--rule); padding: 4px 8px; vertical-align: top; }
th { background: var(--head); text-align: left; font-weight: 600; }
td.num, th.num { text-align: right; white-space: nowrap; }
td small, th small { color: var(--muted); font-weight: normal; }
tbody tr:nth-child(even) td { background: #fafbfc; }
table.inner { width: auto; margin: 0; }
table.inner td { border: 0; padding: 0 10px 0 0; background: transparent !important; }
.badge { display: inline-block; border-radius: 3px; padding: 0 6px; font-weight: 700; font-size: 12px; }
.badge.fail { color: #fff; background: var(--fail); }
.badge.pass { color: #fff; background: var(--pass); }
.badge.na { color: var(--ink); background: #e6e8eb; }
.caption, .note { color: var(--muted); font-size: 12.5px; margin: 2px 0 8px; }
.figures { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 14px; }
.figures.cols3 { grid-template-columns: repeat(3, minmax(0, 1fr)); }
.figures.cols1 { grid-template-columns: minmax(0, 1fr); }
th:first-child { white-space: nowrap; }
/* Eleven numeric columns: headers wrap and intervals go under their value so the table fits the page. */
#attacks table { font-size: 13px; }
#attacks th.num { white-space: normal; }
/* A wide table scrolls inside its own box instead of pushing the page past a 1280 px window. */
.scroll { overflow-x: auto; max-width: 100%; }
td { overflow-wrap: anywhere; }
details > summary { cursor: pointer; color: var(--muted); margin: 6px 0; }
figure { margin: 0; border: 1px solid var(--rule); border-radius: 4px; padding: 8px; break-inside: avoid; }
figure img { display: block; max-width: 100%; height: auto; margin: 0 auto; }
figcaption { font-size: 12.5px; color: var(--muted); margin-top: 4px; }
pre { background: #f6f8fa; border: 1px solid var(--rule); border-radius: 4px; padding: 10px; overflow-x: auto;
      font-size: 12.5px; white-space: pre-wrap; word-break: break-word; }
code { font-family: ui-monospace, "DejaVu Sans Mono", "Liberation Mono", monospace; font-size: 12.5px; }
.signoff { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 26px 40px; margin-top: 14px; }
.signoff div { border-bottom: 1px solid var(--ink); height: 40px; position: relative; }
.signoff span { position: absolute; bottom: -20px; left: 0; font-size: 12px; color: var(--muted); }
footer { margin-top: 46px; color: var(--muted); font-size: 12px; }
@page { size: A4; margin: 12mm; }
@media print {
  body { font-size: 10.5pt; }
  main { max-width: none; padding: 0; }
  h2 { break-after: avoid; }
  table, figure, .verdict, .signoff { break-inside: avoid; }
}
"""


@dataclass(frozen=True)
class _Figure:
    title: str
    caption: str
    png: bytes
    source: str  # "run folder" or "redrawn from results.json"


# ---------------------------------------------------------------------------------------------
# Public API


def render_html_report(results: dict[str, Any], run_dir: Path | None = None, *, evaluation: Any = None,
                       results_json: bytes | None = None) -> str:
    """The report page for `results` (a results.json dict) as one HTML string.

    `run_dir`: the run folder whose `figures/` PNGs are inlined (None: redraw what results.json
    allows). `evaluation`: an `audit.machinery.policy.PolicyEvaluation` whose checks are listed; without it
    `results["policy_evaluation"]` (its `as_dict()`) is used when present. `results_json`: the bytes
    of the results.json written beside the page, whose SHA-256 it quotes (default: run_dir's file
    when it holds exactly these results).
    """
    run_dir = Path(run_dir) if run_dir is not None else None
    checks = _policy_checks(results, evaluation)
    name = _text(_get(results, "config", "name") or "audit")
    head = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Privacy audit report: {name}</title>",
        f"<style>{_CSS}</style></head><body><main>",
        _header(results, run_dir),
    ]
    if is_synthetic_release(results):  # synth-check: no target, accountant or coin-flip candidates to speak of
        body = [
            _verdict_banner(results, checks),  # the one verdict, as every output shows it
            synthetic_overview(results),
            _policy_section(checks),
            _ledger_section(results),
            _verdict_checks_section(results),
            _synthetic_section(results),
            _figures_section(results, run_dir),
            _notes_section(results),
            synthetic_method_notes(results),
        ]
    else:
        body = [
            _verdict_banner(results, checks),
            _overview(results),
            _targets_table(results),
            federated_html_section(results),
            text_html_section(results),
            _policy_section(checks),
            _ledger_section(results),
            _verdict_checks_section(results),
            _synthetic_section(results),
            _figures_section(results, run_dir),
            _attack_details(results),
            _training_table(results),
            _notes_section(results),
            _method_notes(results),
        ]
    parts = [*head, *body, _reproducibility(results, run_dir, results_json), _signoff(), "</main></body></html>"]
    return "\n".join(part for part in parts if part) + "\n"


def _ledger_section(results: dict[str, Any]) -> str:
    """The dataset's spent privacy budget after this run's release(s), as `--ledger` recorded it."""
    entry = results.get("ledger")
    if not isinstance(entry, dict):
        return ""
    spent = entry.get("epsilon_spent")
    spent_text = "unbounded" if entry.get("epsilon_spent_unbounded") else (
        f"{spent:.4g}" if _is_number(spent) else "—")
    limit = entry.get("max_total_epsilon")
    rows = [
        ("Dataset", _text(entry.get("dataset"))),
        ("Recorded", "yes" if entry.get("recorded") else "no"),
        ("Spent ε (after this run)", f"{spent_text} at δ = {_text(entry.get('delta'))} ({_text(entry.get('method'))})"),
        ("Basic / advanced composition", f"{_text(entry.get('basic_epsilon'))} / {_text(entry.get('advanced_epsilon'))}"),
        ("Budget (max_total_epsilon)", f"{limit:g}" if _is_number(limit) else "none set"),
    ]
    if entry.get("reason"):
        rows.append(("Why", _text(entry.get("reason"))))
    body = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return f'<section id="ledger"><h2>Privacy budget (ledger)</h2><dl class="facts">{body}</dl></section>'


def write_html_report(
    results: dict[str, Any], run_dir: Path | None, *, evaluation: Any = None, out_dir: Path | None = None
) -> Path:
    """Render and write `report.html` atomically (temp file in the same folder, then os.replace).

    Figures come from `run_dir/figures`; the page goes to `out_dir` (default: `run_dir`).
    """
    run_dir = Path(run_dir) if run_dir is not None else None
    target_dir = Path(out_dir) if out_dir is not None else run_dir
    if target_dir is None:
        raise ValueError("write_html_report needs run_dir or out_dir to know where report.html goes")
    page = render_html_report(results, run_dir, evaluation=evaluation)
    path = target_dir / REPORT_FILENAME
    write_text_atomic(path, page)
    return path


# ---------------------------------------------------------------------------------------------
# Small helpers


def _text(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)






def _num(value: Any, digits: int = 3) -> str:
    if value is None or not _is_number(value):
        return "—" if value is None else _text(value)
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "∞"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def _eps(value: Any) -> str:
    if value is None or (_is_number(value) and math.isinf(value)) or value == "inf":
        return "∞"
    return f"{value:g}" if _is_number(value) else _text(value)


def _ci(interval: Any, digits: int = 3) -> str:
    if isinstance(interval, (list, tuple)) and len(interval) == 2:
        return f"{_num(interval[0], digits)}–{_num(interval[1], digits)}"
    return "—"






def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:g} %"


def _method_text(method: Any) -> str:
    """'loss/clopper_pearson' → 'loss, Clopper-Pearson'."""
    if not method:
        return ""
    attack, _, estimator = str(method).partition("/")
    return f"{attack}, {_ESTIMATOR_NAMES.get(estimator, estimator)}" if estimator else str(method)




def _accountant(results: dict[str, Any]) -> str | None:
    value = _get(results, "config", "privacy", "accountant")
    if value:
        return str(value)
    for target in results.get("targets") or []:
        if target.get("accountant"):
            return str(target["accountant"])
    return None


# ---------------------------------------------------------------------------------------------
# Sections


def _header(results: dict[str, Any], run_dir: Path | None) -> str:
    name = _text(_get(results, "config", "name") or "audit")
    bits = [f"audit <strong>{name}</strong>"]
    if _get(results, "data", "description"):
        bits.append(_text(results["data"]["description"]))
    if run_dir is not None:
        # A run renders its report while still in its hidden staging folder: show the final name.
        folder_name = run_dir.name.removeprefix(".").removesuffix(".partial")
        bits.append(f"run folder <code>{_text(folder_name)}</code>")
    bits.append(f"rendered {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}")
    return (
        "<header><h1>Privacy audit report</h1>"
        f'<p class="sub">{" · ".join(bits)}</p></header>'
    )


def _verdict_banner(results: dict[str, Any], checks: list[dict[str, Any]] | None) -> str:
    """The one verdict (audit.machinery.verdict): the same status as the console, summary.md and junit.xml."""
    verdict = results.get("verdict") or {}
    status = verdict.get("status") or ("fail" if verdict.get("passed") is False else "pass")
    decided_by = verdict.get("decided_by") or (f"policy {verdict['policy']}" if verdict.get("policy") else "built-in checks")
    reasons = extra_reasons(verdict)
    word = status_word(status, verdict)
    kind = {"fail": "fail", "inconclusive": "none", "pass": "pass"}.get(status, "fail" if word == "LEAKS" else "none")
    if status == "fail":
        refuted = any(isinstance(c, dict) and c.get("status") == "refuted" for c in verdict.get("claims") or [])
        failed = any(isinstance(r, dict) and r.get("status") == "failed" for r in verdict.get("rules") or [])
        why = " and ".join(w for w, on in (("a claim was refuted", refuted), ("a policy rule failed", failed)) if on)
        detail = f"<p>Decided by {_text(decided_by)}: {why or 'see the reasons below'}.</p>"
    elif status == "inconclusive":
        detail = (f"<p>Decided by {_text(decided_by)}: nothing was refuted, but at least one claim was not tested "
                  "by a check with power against it: untestable here (its ceiling is at or below the claim, or no "
                  "bound is proven for the setting) or not refuted (the check that ran cannot detect every "
                  "violation of the claim). This is not a pass for that claim.</p>")
    elif status == "no_claim":
        detail = (f"<p>Decided by {_text(decided_by)}: no DP claim was tested, so nothing passes or fails; the "
                  "statement below says whether membership leaks, by which test.</p>")
    else:
        detail = (f"<p>Decided by {_text(decided_by)}: every claim held (tested by an audit able to refute it, and "
                  "not refuted). A lower bound below a claim is not a proof that the claim holds.</p>")
        caveat = pass_caveat(verdict)
        if caveat:
            detail += f"<p>{_text(caveat)} (its statement is below).</p>"
    claims = [c for c in verdict.get("claims") or [] if isinstance(c, dict)]
    if claims:
        detail += ("<p><strong>Claims:</strong></p><ul>"
                   + "".join(f'<li data-claim-status="{_text(c.get("status"))}">{_text(claim_sentence(c))}</li>'
                             for c in claims) + "</ul>")
    leakage = [e for e in verdict.get("leakage") or [] if isinstance(e, dict)]
    if leakage:
        detail += ("<p><strong>No DP claim — leakage:</strong></p><ul>"
                   + "".join(f'<li data-leakage="{_text(e.get("status"))}">{_text(e.get("statement"))}</li>'
                             for e in leakage) + "</ul>")
    statement = (verdict.get("family_wise_error") or {}).get("statement")
    if statement:
        detail += f"<p><strong>Multiplicity:</strong> {_text(statement)}.</p>"
    rules = [r for r in verdict.get("rules") or [] if isinstance(r, dict)]
    if rules:  # the policy's rules: their own list after the claims, never counted as claims
        detail += ("<p><strong>Policy rules:</strong></p><ul>"
                   + "".join(f'<li data-rule-status="failed">policy rule {_text(r.get("rule"))} failed: '
                             f'{_text(r.get("message"))}</li>' for r in rules if r.get("status") == "failed")
                   + "</ul>" if any(r.get("status") == "failed" for r in rules) else "")
    detail += f"<p><strong>Counts:</strong> {_text(counts_line(verdict))}" + (
        " (every rule is listed under “Policy rules”)" if rules or checks else "") + ".</p>"
    if reasons:
        detail += "<p><strong>Reasons:</strong></p><ul>" + "".join(f"<li>{_text(r)}</li>" for r in reasons) + "</ul>"
    notes = [str(n) for n in verdict.get("notes") or []]
    if notes:
        detail += ("<p><strong>Findings (decide nothing):</strong></p><ul>"
                   + "".join(f"<li>{_text(n)}</li>" for n in notes) + "</ul>")
    return (f'<section class="verdict {kind}" id="verdict" data-status="{_text(status)}"><div class="word">{word}</div>'
            f'<div class="detail">{detail}</div></section>')


def _verdict_checks_section(results: dict[str, Any]) -> str:
    """Every check behind the verdict, and what each ε bound assumes and where it is proven."""
    verdict = results.get("verdict") or {}
    rows = [c for c in verdict.get("checks") or [] if isinstance(c, dict)]
    scopes: dict[str, dict[str, Any]] = {}
    for entry in list(results.get("targets") or []) + [s.get("mia") or {} for s in results.get("synthetic") or []
                                                       if isinstance(s, dict)]:
        attacks = entry.get("attacks") if isinstance(entry.get("attacks"), list) else [entry]
        for attack in attacks:
            for method, scope in (attack.get("epsilon_lb_scope") or {}).items():
                if isinstance(scope, dict) and (method not in scopes or scope.get("decides")):
                    scopes[method] = scope
    if not rows and not scopes:
        return ""
    html_parts = ['<section id="verdict-checks"><h2>What decides the verdict</h2>']
    if scopes:
        html_parts.append("<table><thead><tr><th>bound</th><th>assumption</th><th>scope</th><th>decides?</th></tr></thead><tbody>")
        for method, scope in sorted(scopes.items()):
            html_parts.append(f"<tr><td>{_text(_readable_check(method))}</td><td>{_text(scope.get('assumption'))}</td>"
                              f"<td>{_text(scope.get('scope'))}</td><td>{'yes' if scope.get('decides') else 'no'}</td></tr>")
        html_parts.append("</tbody></table>")
    deciding = [r for r in rows if r.get("outcome") != "shown"]
    shown = [r for r in rows if r.get("outcome") == "shown"]
    head = ("<div class=\"scroll\"><table><thead><tr><th>subject</th><th>check</th><th>says</th><th>p-value</th>"
            "<th>assumption</th><th>detail</th></tr></thead><tbody>")
    if deciding:  # the checks that decide the claims, in the claims' words, first
        html_parts.append("<h3>Checks that decide the claims</h3>" + head
                          + "".join(_check_row(results, row) for row in deciding) + "</tbody></table></div>")
    if shown:  # figures shown beside them, each under its assumption: folded away, they decide nothing
        html_parts.append(f"<details><summary>{len(shown)} figure(s) shown only (they decide nothing; each rests on "
                          "the assumption named)</summary>" + head
                          + "".join(_check_row(results, row) for row in shown) + "</tbody></table></div></details>")
    html_parts.append("</section>")
    return "".join(html_parts)


# Internal names of the verdict's checks, in words a reader knows.
_CHECK_WORDS = (("clopper_pearson", "Clopper-Pearson bound"), ("one_run", "one-run bound"),
                ("fdp_one_run", "f-DP one-run test"),
                ("no proven bound", "no proven bound"), ("accountant vs PLD", "accountant vs the tight PLD interval"))


def _readable_subject(results: dict[str, Any], subject: Any) -> str:
    """`targets[0]` → "ε = 1 target", `synthetic[1]` → "synthetic 'ctgan'"; other subjects as they are."""
    text = str(subject or "")
    for kind, key in (("targets", "targets"), ("synthetic", "synthetic")):
        if text.startswith(f"{kind}[") and text.endswith("]") and text[len(kind) + 1:-1].isdigit():
            entries = results.get(key) or []
            index = int(text[len(kind) + 1:-1])
            entry = entries[index] if index < len(entries) and isinstance(entries[index], dict) else {}
            if kind == "targets":
                return f"ε = {_eps(entry.get('epsilon_target'))} target"
            return f"synthetic '{entry.get('generator') or index}'"
    return text


def _readable_check(name: Any) -> str:
    parts = [str(p) for p in str(name or "").split(" · ")]
    words = dict(_CHECK_WORDS)
    return " · ".join(words.get(p, p) for p in parts)


def _check_word(row: dict[str, Any]) -> str:
    """A check's outcome in the claims' words: held / not refuted / refuted / untestable here / shown only."""
    outcome = row.get("outcome")
    if outcome == "fail":
        return "refuted"
    if outcome == "inconclusive":
        return "untestable here"
    if outcome == "shown":
        return "shown only"
    power = row.get("power")
    return "not refuted" if isinstance(power, dict) and power.get("kind") == "none" else "held"


def _check_row(results: dict[str, Any], row: dict[str, Any]) -> str:
    p = row.get("p_value")
    word = _check_word(row)
    badge = {"refuted": "fail", "held": "pass"}.get(word, "na")
    return (f"<tr><td>{_text(_readable_subject(results, row.get('subject')))}</td>"
            f"<td>{_text(_readable_check(row.get('name')))}</td>"
            f'<td><span class="badge {badge}">{_text(word)}</span></td><td>{"—" if p is None else _text(f"{p:.3g}")}</td>'
            f"<td>{_text(row.get('assumption'))}</td><td>{_text(row.get('message'))}</td></tr>")


def _overview(results: dict[str, Any]) -> str:
    data = results.get("data") or {}
    targets = results.get("targets") or []
    confidence = _confidence(results)
    deltas = sorted({t.get("delta") for t in targets if _is_number(t.get("delta"))})
    delta = deltas or ([_get(results, "config", "privacy", "delta")] if _get(results, "config", "privacy", "delta") else [])
    rows = [
        ("Audit name", _text(_get(results, "config", "name"))),
        ("Data", _text(data.get("description")) or "—"),
    ]
    if data.get("n_rows") is not None:
        rows.append(("Rows", _split_counts(data)))
    elif data.get("n_candidates") is not None:
        rows.append(("Candidates", _num(data["n_candidates"])))
    if data.get("membership"):
        rows.append(("Candidate membership", _text(data["membership"])))
    rows += [
        ("Targets", ", ".join(_eps(t.get("epsilon_target")) for t in targets) or "none"),
        ("Attacks", _text(", ".join(_attack_names(results))) or "none"),
        ("Accountant", _text(_accountant(results) or "—") + " (the ε each claim is tested against); "
                       "PLD (dp_accounting) as the tight reference"),
        ("δ", ", ".join(f"{d:g}" for d in delta if _is_number(d)) or "—"),
        ("Confidence", f"{_pct(confidence)} (one-sided lower bounds, two-sided AUC intervals)"),
        ("Claims", _text(counts_line(results.get("verdict") or {}))),
    ]
    if results.get("synthetic"):
        rows.append(("Synthetic-data checks", f"{len(results['synthetic'])} generator/ε entries"))
    body = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return f'<section id="overview"><h2>Overview</h2><dl class="facts">{body}</dl></section>'


def _split_counts(data: dict[str, Any]) -> str:
    """Rows per split, written so the numbers add up: the training set is not a fourth split but the
    candidates whose coin came up heads (the rest of the candidates are the non-members)."""
    parts = [(data.get("n_test"), "utility test"), (data.get("n_candidates"), "audit candidates"),
             (data.get("n_pool"), "population pool")]
    total = data.get("n_rows")
    listed = " + ".join(f"{_num(n)} {name}" for n, name in parts if n is not None)
    adds_up = all(_is_number(n) for n, _ in parts) and _is_number(total) and sum(n for n, _ in parts) == total
    text = f"{_num(total)} total {'=' if adds_up else ':'} {listed}"
    n_train, n_candidates = data.get("n_train"), data.get("n_candidates")
    if _is_number(n_train) and _is_number(n_candidates):
        text += (f"; the target trained on the {_num(n_train)} candidates whose coin came up heads (members), "
                 f"the other {_num(n_candidates - n_train)} are its non-members")
    elif _is_number(n_train):
        text += f"; {_num(n_train)} training rows"
    return text


def _targets_table(results: dict[str, Any]) -> str:
    targets = results.get("targets") or []
    if not targets:
        return ('<section id="targets"><h2>Results per target ε</h2>'
                "<p>No trained targets in these results.</p></section>")
    accountant = _accountant(results) or "accountant"
    confidence = _confidence(results)
    head = [
        "<th>target ε</th>",
        f'<th class="num">{_text(accountant)} ε<br><small>accountant</small></th>',
        '<th class="num">PLD ε<br><small>tight reference</small></th>',
        f'<th class="num">best ε lower bound<br><small>sound, {_pct(confidence)}</small></th>',
        '<th class="num">LB / accountant ε</th>',
        "<th>claim</th>",
        '<th class="num">test accuracy</th>',
    ]
    head.append('<th>attacks<br><small>AUC (CI) · TPR at 0.1 % FPR</small></th>')
    rows = []
    verdict = results.get("verdict") or {}
    for index, target in enumerate(targets):
        eps_acc = target.get("epsilon_accountant")
        if eps_acc is None:
            eps_acc = (target.get("epsilon") or {}).get(accountant)
        ratio = target.get("epsilon_lb_ratio")
        if ratio is None and _is_number(eps_acc) and eps_acc > 0 and _is_number(target.get("epsilon_lb_best")):
            ratio = target["epsilon_lb_best"] / eps_acc
        method = _method_text(target.get("epsilon_lb_best_method"))
        best = _num(target.get("epsilon_lb_best"), 2)
        if method:
            best += f"<br><small>{_text(method)}</small>"
        word_here = subject_status(verdict, f"targets[{index}]")
        badge = {"refuted": "fail", "held": "pass", "no DP claim · LEAKS": "fail"}.get(word_here)
        violation = f'<span class="badge {badge}">{_text(word_here)}</span>' if badge else f"<small>{_text(word_here)}</small>"
        cells = [
            f"<td><strong>{_eps(target.get('epsilon_target'))}</strong></td>",
            f'<td class="num">{_num(eps_acc)}</td>',
            f'<td class="num">{_num((target.get("epsilon") or {}).get("pld"))}</td>',
            f'<td class="num">{best}</td>',
            f'<td class="num">{_num(ratio, 2)}</td>',
            f"<td>{violation}</td>",
            f'<td class="num">{_num(target.get("test_accuracy"))}{_twin_accuracy(target)}</td>',
        ]
        cells.append(f"<td>{_attack_cell(target.get('attacks') or [])}{_whitebox_cell(target)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        '<section id="targets"><h2>Results per target ε</h2>'
        f"<table class=\"targets\"><thead><tr>{''.join(head)}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        '<p class="caption">Best ε lower bound: the largest Clopper-Pearson or one-run bound over all attacks '
        "(the GDP estimate is never used). Claim: <em>held</em> = tested by a check with power against it (proven, "
        "measured or a positive control) and not refuted; <em>not refuted</em> = tested only by checks that cannot "
        "detect every violation (black-box attacks on the final model); <em>refuted</em> = a proven bound's test rejects the accountant's ε for the same δ (Holm over the "
        "run's tests); <em>untestable here</em> = even a perfect attack could not have refuted it with these "
        "candidates; without a DP claim, the leakage statement. AUC: area under the ROC curve (0.5 = chance) with its DeLong confidence interval; "
        "TPR at 0.1 % FPR: share of members detected while wrongly flagging 0.1 % of non-members. The largest AUC "
        "of a target is in bold. ε = ∞ is the non-private baseline (no accountant ε).</p></section>"
    )


def _twin_accuracy(target: dict[str, Any]) -> str:
    """The main job's twin trained with canaries: its test accuracy beside the released target's."""
    twin = target.get("whitebox_one_run")
    if not isinstance(twin, dict):
        return ""
    return f'<br><small>{_num(twin.get("test_accuracy_with_canaries"))} with {_text(twin.get("m"))} canaries</small>'


def _whitebox_cell(target: dict[str, Any]) -> str:
    """The row family "white-box one-run" under the attacks: what the twin's canaries showed."""
    twin = target.get("whitebox_one_run")
    if not isinstance(twin, dict):
        return ""
    p_value = f"{float(twin['p_value']):.2g}" if _is_number(twin.get("p_value")) else "—"
    if str(twin.get("family") or "").startswith("canary clients"):  # the federated job's twin federation
        what = f'canary clients (one-run) ({_text(twin.get("m"))} canary clients in a twin federation, every round)'
    else:
        what = (f'white-box one-run ({_text(twin.get("m"))} {_text(twin.get("kind"))} canaries in a twin, every '
                f'iterate)')
    return (f'<p><small>{what}: Steinke et al. ε ≥ {_num(twin.get("steinke_epsilon"), 2)}; f-DP test '
            f'{"refutes" if twin.get("fdp_refuted") else "does not refute"} the claim\'s curve; p = '
            f'{_text(p_value)}; '
            f'estimates (not bounds): Gaussian sum ε ≈ {_num(twin.get("gaussian_sum_epsilon"), 2)}, Andrew et al. '
            f'ε ≈ {_num(twin.get("andrew_epsilon"), 2)}</small></p>')


def _attack_cell(attacks: list[dict[str, Any]]) -> str:
    """Every attack on one target as a small borderless table inside the target's row."""
    if not attacks:
        return "—"
    aucs = [a.get("auc") for a in attacks if _is_number(a.get("auc"))]
    top = max(aucs) if len(aucs) > 1 else None
    rows = []
    for attack in attacks:
        auc = _num(attack.get("auc"))
        if top is not None and attack.get("auc") == top:
            auc = f"<strong>{auc}</strong>"
        rows.append(
            f"<tr><td>{_text(attack.get('name'))}</td><td class=\"num\">{auc}</td>"
            f"<td class=\"num\"><small>({_ci(attack.get('auc_ci'), 2)})</small></td>"
            f"<td class=\"num\">{_num(_tpr(attack, 0.001), 4)}</td></tr>"
        )
    return f'<table class="inner">{"".join(rows)}</table>'


def _attack_details(results: dict[str, Any]) -> str:
    targets = results.get("targets") or []
    if not any(t.get("attacks") for t in targets):
        return ""
    head = ("<tr><th>target ε</th><th>attack</th><th class=\"num\">AUC (CI)</th><th class=\"num\">TPR@0.1%</th>"
            "<th class=\"num\">TPR@1%</th><th class=\"num\">TPR@10%</th><th class=\"num\">advantage<br>"
            "<small>bound under DP</small></th><th class=\"num\">ε LB<br><small>Clopper-Pearson</small></th>"
            "<th class=\"num\">ε LB<br><small>one run</small></th><th class=\"num\">GDP ε<br><small>estimate†"
            "</small></th><th class=\"num\">members / non-members</th></tr>")
    rows = []
    for target in targets:
        for attack in target.get("attacks") or []:
            bounds = attack.get("epsilon_lb") or {}
            gdp = _get(attack, "epsilon_estimate_gdp", "epsilon")
            adv = _num(attack.get("advantage"))
            if attack.get("advantage_bound") is not None:
                adv += f"<br><small>≤ {_num(attack['advantage_bound'])}</small>"
            extra = {k: v for k, v in bounds.items() if k not in _ESTIMATOR_NAMES}
            one_run = _num(bounds.get("one_run"), 2)
            if extra:
                one_run += "".join(f"<br><small>{_text(k)}: {_num(v, 2)}</small>" for k, v in extra.items())
            fdp = attack.get("fdp_one_run")
            if isinstance(fdp, dict):  # shown beside Steinke et al.'s bound, which decides (stats helper)
                one_run += (f"<br><small>f-DP one run: {_num(fdp.get('epsilon_gdp'), 2)} "
                            "(assumes a Gaussian trade-off curve; shown only)</small>")
            rows.append(
                f"<tr><td>{_eps(target.get('epsilon_target'))}</td><td>{_text(attack.get('name'))}</td>"
                f'<td class="num">{_num(attack.get("auc"))}<br><small>({_ci(attack.get("auc_ci"), 3)})</small></td>'
                f'<td class="num">{_num(_tpr(attack, 0.001), 4)}</td>'
                f'<td class="num">{_num(_tpr(attack, 0.01), 4)}</td>'
                f'<td class="num">{_num(_tpr(attack, 0.1), 4)}</td>'
                f'<td class="num">{adv}</td>'
                f'<td class="num">{_num(bounds.get("clopper_pearson"), 2)}</td>'
                f'<td class="num">{one_run}</td>'
                f'<td class="num">{_num(gdp, 2)}</td>'
                f'<td class="num">{_num(attack.get("n_members"))} / {_num(attack.get("n_nonmembers"))}</td></tr>'
            )
    return (
        '<section id="attacks"><h2>Attack details</h2>'
        f"<div class=\"scroll\"><table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table></div>"
        '<p class="caption">Advantage: max over thresholds of TPR − FPR; under (ε, δ)-DP it cannot exceed '
        "(e^ε − 1 + 2δ)/(e^ε + 1). † The GDP number assumes the mechanism's trade-off curve is Gaussian: it is an "
        "estimate, not a lower bound, and never decides a verdict.</p></section>"
    )


def _training_table(results: dict[str, Any]) -> str:
    targets = results.get("targets") or []
    if not targets:
        return ""
    accountants: list[str] = []
    for target in targets:
        for key in target.get("epsilon") or {}:
            if key not in accountants:
                accountants.append(str(key))
    head = ("<tr><th>target ε</th><th class=\"num\">σ<br><small>noise multiplier</small></th>"
            "<th class=\"num\">q<br><small>sample rate</small></th><th class=\"num\">T<br><small>steps</small></th>"
            "<th class=\"num\">C<br><small>clip norm</small></th><th>Poisson sampling</th><th class=\"num\">δ</th>"
            + "".join(f'<th class="num">{_text(a)} ε</th>' for a in accountants)
            + "<th class=\"num\">seed</th><th class=\"num\">train time</th></tr>")
    rows = []
    for target in targets:
        poisson = target.get("poisson_sampling")
        rows.append(
            f"<tr><td>{_eps(target.get('epsilon_target'))}</td>"
            f'<td class="num">{_num(target.get("noise_multiplier"), 4)}</td>'
            f'<td class="num">{_num(target.get("sample_rate"), 4)}</td>'
            f'<td class="num">{_num(target.get("steps"))}</td>'
            f'<td class="num">{_num(target.get("max_grad_norm"), 2)}</td>'
            f"<td>{'yes' if poisson else ('no' if poisson is False else '—')}</td>"
            f'<td class="num">{_text(format(target["delta"], "g")) if _is_number(target.get("delta")) else "—"}</td>'
            + "".join(f'<td class="num">{_num((target.get("epsilon") or {}).get(a))}</td>' for a in accountants)
            + f'<td class="num">{_num(target.get("seed"))}</td>'
            f'<td class="num">{_num(target.get("train_seconds"), 1)} s</td></tr>'
        )
    return (
        '<section id="training"><h2>Training and accounting</h2>'
        f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
        '<p class="caption">Every accountant is evaluated on the same (σ, q, T, δ). The ε = ∞ target is trained '
        "with the same optimizer but without clipping, noise or Poisson sampling.</p></section>"
    )


def _policy_checks(results: dict[str, Any], evaluation: Any) -> list[dict[str, Any]] | None:
    rules = (results.get("verdict") or {}).get("rules")
    if isinstance(rules, list) and rules:  # the verdict's own list of rules (audit.machinery.verdict)
        word = {"passed": "pass", "failed": "fail", "not_applicable": "not applicable"}
        return [{"rule": r.get("rule"), "target_label": r.get("subject"), "attack": r.get("attack"),
                 "measured": r.get("figure"), "limit": r.get("threshold"), "message": r.get("message"),
                 "status": word.get(str(r.get("status")), r.get("status"))} for r in rules if isinstance(r, dict)]
    if evaluation is not None:
        return [
            {"rule": c.rule, "target_label": c.target_label, "attack": c.attack, "measured": c.measured,
             "limit": c.limit, "passed": c.passed, "message": c.message, "status": c.status}
            for c in evaluation.checks
        ]
    stored = results.get("policy_evaluation")
    if isinstance(stored, dict) and isinstance(stored.get("checks"), list):
        checks = []
        for check in stored["checks"]:
            if not isinstance(check, dict):
                continue
            status = check.get("status") or (
                "not applicable" if check.get("applicable") is False else ("pass" if check.get("passed") else "fail"))
            checks.append({**check, "status": status})
        return checks
    return None


def _policy_section(checks: list[dict[str, Any]] | None) -> str:
    if not checks:
        return ""
    order = {"fail": 0, "pass": 1, "not applicable": 2}
    badge = {"fail": '<span class="badge fail">failed</span>', "pass": '<span class="badge pass">passed</span>',
             "not applicable": '<span class="badge na">not applicable</span>'}
    rows = []
    for check in sorted(checks, key=lambda c: order.get(c.get("status"), 3)):
        rows.append(
            f"<tr><td>{badge.get(check.get('status'), _text(check.get('status')))}</td>"
            f"<td><code>{_text(check.get('rule'))}</code></td><td>{_text(check.get('target_label'))}</td>"
            f"<td>{_text(check.get('attack') or '')}</td>"
            f'<td class="num">{_value(check.get("measured"))}</td><td class="num">{_value(check.get("limit"))}</td>'
            f"<td>{_text(_without_label(check))}</td></tr>"
        )
    return (
        '<section id="policy"><h2>Policy rules</h2>'
        '<p class="caption">A policy adds these rules beside the claims; it never changes a claim\'s status. The top '
        "line fails when a claim is refuted or a rule failed.</p>"
        "<div class=\"scroll\"><table><thead><tr><th>status</th><th>rule</th><th>subject</th><th>attack</th>"
        "<th class=\"num\">figure</th>"
        f"<th class=\"num\">threshold</th><th>detail</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
        '<p class="caption">“not applicable”: the results hold nothing this rule reads (e.g. an accountant rule on a '
        "claim no accountant computed, synthetic-data rules without synthetic results); such a rule neither passes "
        "nor fails the gate.</p></section>"
    )


def _without_label(check: dict[str, Any]) -> str:
    """The check's message without its 'ε = 1, attack loss: ' prefix (the table has those columns)."""
    message = str(check.get("message") or "")
    label = str(check.get("target_label") or "")
    if label and message.startswith(label) and ": " in message:
        return message.split(": ", 1)[1]
    return message


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if _is_number(value):
        return _num(value, 4)
    return _text(value) if value is not None else "—"


def _synthetic_section(results: dict[str, Any]) -> str:
    entries = [e for e in results.get("synthetic") or [] if isinstance(e, dict)]
    if not entries:
        return ""
    rows, flag_items = [], []
    for index, entry in enumerate(entries):
        nndr, dcr, mia = (entry.get(k) if isinstance(entry.get(k), dict) else {} for k in ("nndr", "dcr", "mia"))
        bounds = mia.get("epsilon_lb") if isinstance(mia.get("epsilon_lb"), dict) else {}
        sound = [v for k, v in bounds.items() if k in _ESTIMATOR_NAMES and _is_number(v)]
        generator = entry.get("generator") or f"entry {index + 1}"
        share = _num(dcr.get("dcr_share"))
        if dcr.get("dcr_share_ci") is not None:
            share += f" <small>({_ci(dcr.get('dcr_share_ci'), 3)})</small>"
        if _is_number(dcr.get("expected_share_if_not_memorising")):
            share += f"<br><small>expected {_num(dcr['expected_share_if_not_memorising'])}</small>"
        median_train = dcr.get("median_train", dcr.get("median_dcr_train"))
        median_holdout = dcr.get("median_holdout", dcr.get("median_dcr_holdout"))
        auc = _num(mia.get("auc"))
        if mia.get("auc_ci") is not None:
            auc += f" <small>({_ci(mia.get('auc_ci'), 2)})</small>"
        flags = [f for f in entry.get("flags") or [] if isinstance(f, dict)]
        if "passed" in entry or flags:
            status = ('<span class="badge fail">flagged</span>' if flags or entry.get("passed") is False
                      else '<span class="badge pass">no flag</span>')
        else:
            status = "—"
        for flag in flags:
            flag_items.append(f"<li><strong>{_text(generator)}</strong> ({_text(flag.get('check') or 'check')}): "
                              f"{_text(flag.get('message'))}</li>")
        rows.append(
            f"<tr><td>{_text(generator)}</td><td>{_text(claimed_epsilon_text(entry))}</td>"
            f'<td class="num">{_num(nndr.get("p10"))} / {_num(nndr.get("median"))}</td>'
            f'<td class="num">{share}</td><td class="num">{_num(dcr.get("exact_match_rate"), 4)}</td>'
            f'<td class="num">{_num(median_train)} / {_num(median_holdout)}</td>'
            f'<td class="num">{auc}</td><td class="num">{_num(_tpr(mia, 0.001), 4) if mia else "—"}</td>'
            f'<td class="num">{_num(max(sound), 2) if sound else "—"}</td><td>{status}</td></tr>'
        )
    flags_html = f"<h3>Flags</h3><ul>{''.join(flag_items)}</ul>" if flag_items else ""
    return (
        '<section id="synthetic"><h2>Synthetic data</h2>'
        "<table><thead><tr><th>generator</th><th>ε</th><th class=\"num\">NNDR<br><small>p10 / median</small></th>"
        "<th class=\"num\">DCR share (CI)</th><th class=\"num\">exact matches</th>"
        "<th class=\"num\">median DCR<br><small>train / holdout</small></th><th class=\"num\">distance-MIA AUC (CI)"
        "</th><th class=\"num\">TPR@0.1%</th><th class=\"num\">ε LB<br><small>sound</small></th><th>flags</th>"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        '<p class="caption">DCR share: fraction of synthetic rows strictly closer to a training row than to any '
        "holdout row (holdout as large as train); a generator that does not copy gives about 0.5 (less half the "
        "share of ties, the “expected” value), well above it means synthetic rows sit near training rows. NNDR: "
        "distance to the nearest training row over the distance to the second nearest; values near 0 are "
        "near-copies. Distance MIA: train and holdout records scored by minus their distance to the synthetic set; "
        "ε: the generator's DP ε; ∞ / none claimed = no DP claim.</p>"
        f"{_synthetic_risks_table(entries)}{flags_html}</section>"
    )


def _risk_html(risk: Any) -> str:
    if not isinstance(risk, dict) or not _is_number(risk.get("value")):
        return "—"
    cell = f"{_num(risk['value'], 2)} <small>({_ci(risk.get('ci'), 2)})</small>"
    return cell + (' <span class="badge fail">flagged</span>' if risk.get("flagged") else "")


def _synthetic_risks_table(entries: list[dict[str, Any]]) -> str:
    """Singling-out, linkability and inference risk against the holdout as control (Giomi et al. 2022)."""
    rows = []
    for index, entry in enumerate(entries):
        risks = entry.get("risks")
        if not isinstance(risks, dict):
            continue
        inference = [r for r in risks.get("inference") or [] if isinstance(r, dict) and _is_number(r.get("value"))]
        worst = max(inference, key=lambda r: r["value"], default=None)
        baseline = risks.get("dcr_baseline_protection") or {}
        rows.append(
            f"<tr><td>{_text(entry.get('generator') or f'entry {index + 1}')}</td><td>{_text(claimed_epsilon_text(entry))}</td>"
            f'<td class="num">{_risk_html(risks.get("singling_out"))}</td>'
            f'<td class="num">{_risk_html(risks.get("linkability"))}</td>'
            f'<td class="num">{_risk_html(worst)}{"<br><small>secret " + _text(worst.get("secret")) + "</small>" if worst else ""}</td>'
            f'<td class="num">{_num(baseline.get("score"), 2)}</td></tr>'
        )
    if not rows:
        return ""
    return (
        "<h3>Re-identification risks</h3><table><thead><tr><th>generator</th><th>ε</th>"
        '<th class="num">singling out (CI)</th><th class="num">linkability (CI)</th>'
        '<th class="num">inference, worst column (CI)</th><th class="num">DCR vs random</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
        '<p class="caption">Giomi et al. 2022 (the method of anonymeter): each attack is run on training rows and '
        "on holdout rows the generator never saw; risk = (success on train − success on control) / (1 − success "
        "on control), 0 = the release tells nothing about its training rows beyond the population, 1 = total. "
        "Singling out: predicates built from synthetic rows that match exactly one real row. Linkability: two "
        "halves of a record joined through the same nearest synthetic row. Inference: a column guessed from the "
        "nearest synthetic row on all other columns. DCR vs random: median distance of synthetic rows to the "
        "closest training row over that of uniformly random rows (SDMetrics DCRBaselineProtection; 1 = like "
        "noise, 0 = copies; descriptive, not a test).</p>"
    )


# ---------------------------------------------------------------------------------------------
# Figures


_FIGURE_TEXT = {
    "empirical_vs_accountant": (
        "Empirical vs accountant ε",
        "Best sound empirical lower bound (y) against the accountant's ε (x) per private target. A point above "
        "a bound above the dashed line y = x would refute the claim.",
    ),
    "privacy_utility": (
        "Privacy-utility",
        "Test accuracy (top) and the best attack AUC (bottom, 0.5 = chance) per target ε; ∞ is drawn at the right edge.",
    ),
    "roc_all": (
        "ROC of every target",
        "One panel per target, one colour per attack; log-log axes: the low false-positive corner is where "
        "membership inference matters (Carlini et al. 2022).",
    ),
}


def _figure_sort_key(path: Path) -> tuple[float, str]:
    tag = path.stem.removeprefix("roc_eps_")
    try:
        return (float(tag), path.name)
    except ValueError:
        return (math.inf, path.name)


def _collect_figures(
    results: dict[str, Any], run_dir: Path | None
) -> tuple[list[tuple[str, int, list[_Figure]]], list[str]]:
    """Figure groups (heading, columns, figures) and the names of figures this rendering lacks."""
    from audit.machinery.safe_files import PNG_MAGIC, read_run_file, run_folder_files

    folder = run_dir / "figures" if run_dir is not None else None
    # Regular files only, no symlink below the run folder, bounded: a figure cannot pull in a system file.
    available = run_folder_files(run_dir, folder, "*.png") if folder is not None else []
    by_stem = {p.stem: p for p in available}
    summary: list[_Figure] = []
    missing: list[str] = []
    used: set[str] = set()

    every_roc: list[_Figure] = []  # one panel per target: it needs the page's full width
    redrawn = None
    for stem in ("empirical_vs_accountant", "privacy_utility"):
        title, caption = _FIGURE_TEXT[stem]
        if stem in by_stem:
            summary.append(_Figure(title, caption, read_run_file(run_dir, by_stem[stem], magic=PNG_MAGIC), "run folder"))
            used.add(stem)
            continue
        if redrawn is None:
            redrawn = _redraw_from_results(results)
        if stem in redrawn:
            summary.append(_Figure(title, caption, redrawn[stem], "redrawn from results.json"))
        elif results.get("targets"):
            missing.append(title)

    if "roc_all" in by_stem:
        title, caption = _FIGURE_TEXT["roc_all"]
        every_roc = [_Figure(title, caption, read_run_file(run_dir, by_stem["roc_all"], magic=PNG_MAGIC), "run folder")]
        used.add("roc_all")
    elif results.get("targets"):
        missing.append("ROC curves (they need the run folder's figures/; results.json holds no ROC points)")
    per_target = []
    for path in sorted((p for p in available if p.stem.startswith("roc_eps_")), key=_figure_sort_key):
        tag = path.stem.removeprefix("roc_eps_")
        label = "∞" if tag == "inf" else tag
        per_target.append(_Figure(f"ROC, ε = {label}", "Every attack on this target.", read_run_file(run_dir, path, magic=PNG_MAGIC),
                                  "run folder"))
        used.add(path.stem)
    synthetic = []
    for path in (p for p in available if p.stem.startswith("synthetic_")):
        title = path.stem.removeprefix("synthetic_").replace("_", " ")
        synthetic.append(_Figure(f"Synthetic data: {title}", "", read_run_file(run_dir, path, magic=PNG_MAGIC), "run folder"))
        used.add(path.stem)
    others = [_Figure(p.stem.replace("_", " "), "", read_run_file(run_dir, p, magic=PNG_MAGIC), "run folder") for p in available
              if p.stem not in used]
    groups = [
        ("Summary", 2, summary),
        ("ROC of every target", 1, every_roc),
        ("ROC per target (log-log axes)", 3, per_target),
        ("Synthetic data", 1, synthetic),
        ("Other figures", 2, others),
    ]
    return [g for g in groups if g[2]], missing


def _redraw_from_results(results: dict[str, Any]) -> dict[str, bytes]:
    """The figures results.json suffices for, drawn with reports.figures into a temporary folder."""
    targets = [t for t in results.get("targets") or [] if isinstance(t, dict)]
    if not targets:
        return {}
    from reports.figures import epsilon_label, plot_empirical_vs_accountant, plot_privacy_utility

    out: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="privacy-audit-figures-") as tmp:
        private = [t for t in targets if t.get("epsilon_target") is not None
                   and _is_number(t.get("epsilon_accountant")) and _is_number(t.get("epsilon_lb_best"))]
        if private:
            path = plot_empirical_vs_accountant(
                [t["epsilon_accountant"] for t in private], [t["epsilon_lb_best"] for t in private],
                [epsilon_label(t["epsilon_target"]) for t in private], Path(tmp) / "empirical_vs_accountant.png",
            )
            out["empirical_vs_accountant"] = path.read_bytes()
        usable = [t for t in targets if _is_number(t.get("test_accuracy"))
                  and any(_is_number(a.get("auc")) for a in t.get("attacks") or [])]
        if usable:
            path = plot_privacy_utility(
                [t.get("epsilon_target") for t in usable], [t["test_accuracy"] for t in usable],
                [max(a["auc"] for a in t["attacks"] if _is_number(a.get("auc"))) for t in usable],
                Path(tmp) / "privacy_utility.png",
            )
            out["privacy_utility"] = path.read_bytes()
    return out


def _figure_layout(png: bytes) -> str | None:
    """Where the figure's legends and plots are (reports.figures records it in the PNG), for layout checks."""
    from io import BytesIO

    from PIL import Image

    from reports.figures import FIGURE_LAYOUT_KEY

    try:
        with Image.open(BytesIO(png)) as image:
            return getattr(image, "text", {}).get(FIGURE_LAYOUT_KEY)
    except Exception:  # noqa: BLE001 - a figure from elsewhere without the record is still shown
        return None


def _figures_section(results: dict[str, Any], run_dir: Path | None) -> str:
    groups, missing = _collect_figures(results, run_dir)
    if not groups and not missing:
        return ""
    out = ['<section id="figures"><h2>Figures</h2>']
    if missing:
        out.append('<p class="note">Not available in this rendering: ' + "; ".join(_text(m) for m in missing) + ".</p>")
    for heading, columns, figures in groups:
        items = []
        for figure in figures:
            data = base64.b64encode(figure.png).decode("ascii")
            source = "" if figure.source == "run folder" else f" <em>({_text(figure.source)})</em>"
            caption = f" {_text(figure.caption)}" if figure.caption else ""
            layout = _figure_layout(figure.png)
            layout_attribute = f' data-layout="{_text(layout)}"' if layout else ""
            items.append(
                f'<figure><img src="data:image/png;base64,{data}" alt="{_text(figure.title)}"{layout_attribute}>'
                f"<figcaption><strong>{_text(figure.title)}.</strong>{caption}{source}</figcaption></figure>"
            )
        out.append(f"<h3>{_text(heading)}</h3><div class=\"figures cols{columns}\">{''.join(items)}</div>")
    out.append("</section>")
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Words


def _notes_section(results: dict[str, Any]) -> str:
    notes = [str(n) for n in results.get("notes") or []]
    if not notes:
        return ""
    return ('<section id="run-notes"><h2>Warnings and notes from the run</h2><ul>'
            + "".join(f"<li>{_text(n)}</li>" for n in notes) + "</ul></section>")


def _method_notes(results: dict[str, Any]) -> str:
    confidence = _confidence(results)
    names = _attack_names(results)
    if results.get("synthetic") and "distance" not in names:
        names.append("distance")
    attack_items = []
    for name in names:
        title, text = method_note(name)  # the attack class's own note (attacks/registry.py)
        attack_items.append(f"<li><strong>{_text(name)}</strong>: {_text(title)}. {_text(text)}</li>")
    deltas = sorted({t.get("delta") for t in results.get("targets") or [] if _is_number(t.get("delta"))})
    delta_text = ", ".join(f"{d:g}" for d in deltas) or "as configured"
    pct = _pct(confidence)
    not_run = [n for n in ATTACKS if n not in names]  # every registered model attack
    not_run_text = ""
    if not_run:
        not_run_text = ("<p>Not run in this audit: " + ", ".join(
            f"{_text(n)} ({_text(citation(n))})" if citation(n) else _text(n) for n in not_run)
                        + ". The bounds above hold for the attacks that were run; running more attacks can only raise "
                        "the best lower bound, never lower it.</p>")
    return f"""<section id="methods"><h2>Method notes</h2>
<h3>Attacks and their threat models</h3>
<ul>{''.join(attack_items) or '<li>No attack was run.</li>'}</ul>{not_run_text}
<h3>What an empirical ε lower bound proves, and what it does not</h3>
<p>A differentially private training procedure limits how well <em>any</em> attacker can tell whether a record
was in the training set. Turning an attack's measured true- and false-positive rates into an ε gives a
<strong>lower bound</strong>: with {pct} confidence, the procedure is <em>not</em> (ε, δ)-DP for any ε below it.
When that lower bound exceeds the accountant's ε (the claim is <strong>refuted</strong>), the privacy claim is
contradicted: the DP implementation, its accounting or its assumptions are broken.</p>
<p>The converse does not hold. <strong>A lower bound of 0 is not a proof of privacy</strong>: it says that
this attack, on these candidates, found no statistically significant evidence against the claim. Stronger
attacks, more candidates, or worst-case records (canaries) can give larger bounds, and the bound can never
exceed what the number of candidates allows (at 95 % with N trials per side, even a perfect attack gives at most
≈ 3.3 for N = 100 and ≈ 5.6 for N = 1000 with Clopper-Pearson). The accountant's ε is the upper bound that the
proof of DP-SGD provides; the gap between the two is not itself a measurement of leakage.</p>
<h3>Assumptions</h3>
<ul>
<li><strong>Membership by coin flip.</strong> Each audit candidate is in the training set by an independent fair
coin flip (Bernoulli ½), recorded with the seed. The one-run bound is valid only under this assumption; the
utility test set is never a candidate, shadow and reference models use a disjoint population pool.</li>
<li><strong>Poisson sampling.</strong> The accountants (PRV, RDP, GDP in Opacus and the PLD accountant of
dp_accounting) assume each step includes every record independently with probability q; the private targets
are trained that way (the table above says so per target).</li>
<li><strong>δ.</strong> All ε, accountant and empirical, are for the same δ = {_text(delta_text)}; a δ near or
above 1/n would permit releasing whole records.</li>
<li><strong>The threat model of each attack</strong> (above): a bound holds for the procedure as attacked, not
for attackers with more access.</li>
</ul>
<h3>Estimators and confidence</h3>
<ul>
<li><strong>Clopper-Pearson</strong> (Jagielski, Ullman, Oprea 2020; Nasr et al. 2021): one-sided
Clopper-Pearson upper bounds on FPR and FNR at one threshold, ε_LB = max{{ln((1 − δ − FNR̄)/FPR̄),
ln((1 − δ − FPR̄)/FNR̄)}}, floored at 0. The threshold and its direction are chosen on a random half of the
candidates and the bound is computed on the other half only, so the choice does not inflate the bound.</li>
<li><strong>One run</strong> (Steinke, Nasr, Jagielski 2023, arXiv 2305.08846): guesses “in” for the top and
“out” for the bottom scores among the coin-flip candidates; the number of correct guesses bounds ε. Several
guess counts are tried, with a Bonferroni correction over them.</li>
<li><strong>AUC</strong> with a DeLong confidence interval; <strong>TPR at FPR</strong> 0.1 %, 1 %, 10 %
(Carlini et al. 2022: judge attacks at low FPR, read ROC curves on log-log axes); membership
<strong>advantage</strong> max(TPR − FPR) with its bound under DP (Yeom et al. 2018).</li>
<li>Confidence level: {pct}, one-sided for every lower bound. A verdict uses only the sound bounds above.</li>
<li><strong>GDP estimate</strong> (Nasr et al. 2023; Dong, Roth, Su 2019): ε computed from a Gaussian-DP μ fitted
to the attack's error rates. It <em>assumes</em> the mechanism's trade-off curve is Gaussian, so it is an
estimate, not a lower bound, and it never decides a verdict.</li>
</ul>
</section>"""


def _config_hash(results: dict[str, Any]) -> str | None:
    for stored in (results.get("config_hash"), _get(results, "environment", "config_hash")):
        if isinstance(stored, str):
            return stored
    config = results.get("config")
    if not isinstance(config, dict):
        return None
    # Same canonical form as audit.machinery.config.AuditConfig.config_hash (results["config"] is its to_plain()).
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def _results_file_digest(results: dict[str, Any], run_dir: Path | None) -> str | None:
    """SHA-256 of run_dir/results.json when that file holds exactly these results (ties a signature to it)."""
    if run_dir is None:
        return None
    from audit.errors import AuditInputError
    from audit.machinery.safe_files import read_run_file

    path = run_dir / "results.json"
    try:
        raw = read_run_file(run_dir, path)  # never a FIFO, a link or a device
        if json.loads(raw) != results:
            return None
    except (AuditInputError, ValueError):
        return None
    return hashlib.sha256(raw).hexdigest()


def _reproducibility(results: dict[str, Any], run_dir: Path | None, results_json: bytes | None = None) -> str:
    env = results.get("environment") or {}
    mlflow = results.get("mlflow") or {}
    rows: list[tuple[str, str]] = []
    config_hash = _config_hash(results)
    if config_hash:
        rows.append(("Config hash", f"<code>{_text(config_hash)}</code> <small>(sha256 of the resolved config, "
                                    "as tagged on the MLflow parent run)</small>"))
    digest = (hashlib.sha256(results_json).hexdigest() if results_json is not None
              else _results_file_digest(results, run_dir))
    if digest:
        rows.append(("results.json SHA-256", f"<code>{digest}</code>"))
    rows.append(("Git commit", f"<code>{_text(env.get('git_sha'))}</code>" if env.get("git_sha")
                 else "unknown (not run from a git checkout)"))
    seeds = [f"config seed {_text(_get(results, 'config', 'seed'))}"]
    for target in results.get("targets") or []:
        if target.get("seed") is not None:
            seeds.append(f"ε = {_eps(target.get('epsilon_target'))}: {_text(target['seed'])}")
    rows.append(("Seeds", "; ".join(seeds)))
    device = _text(env.get("device") or "—")
    if env.get("cuda_device_name"):
        device += f" ({_text(env['cuda_device_name'])})"
    if env.get("torch_threads") is not None:
        device += f", {_text(env['torch_threads'])} torch threads"
    rows.append(("Device", device))
    rows.append(("Python / platform", f"{_text(env.get('python') or '—')} on {_text(env.get('platform') or '—')}"))
    packages = env.get("packages") or {}
    if packages:
        rows.append(("Packages", ", ".join(f"{_text(k)} {_text(v if v is not None else 'not installed')}"
                                           for k, v in packages.items())))
    if mlflow:
        rows.append(("MLflow tracking URI", f"<code>{_text(mlflow.get('tracking_uri'))}</code>"))
        rows.append(("MLflow experiment / parent run",
                     f"<code>{_text(mlflow.get('experiment_id'))}</code> / <code>{_text(mlflow.get('parent_run_id'))}</code>"))
        child_rows = []
        targets = results.get("targets") or []
        ids = list(mlflow.get("child_run_ids") or [])
        for index, run_id in enumerate(ids):
            target = targets[index] if index < len(targets) and targets[index].get("mlflow_run_id") == run_id else None
            label = f"ε = {_eps(target.get('epsilon_target'))}: " if target else ""
            child_rows.append(f"{label}<code>{_text(run_id)}</code>")
        if child_rows:
            rows.append(("MLflow child runs", "<br>".join(child_rows)))
    body = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    config_yaml = ""
    if isinstance(results.get("config"), dict):
        config_yaml = (
            "<h3>Resolved configuration</h3>"
            f"<pre>{_text(yaml.safe_dump(results['config'], sort_keys=False, allow_unicode=True, default_flow_style=None))}</pre>"
        )
    return (f'<section id="reproducibility"><h2>Reproducibility</h2><dl class="facts">{body}</dl>'
            f"{config_yaml}</section>")


def _signoff() -> str:
    return (
        '<section id="signoff"><h2>Review and sign-off</h2>'
        '<p class="note">The figures and numbers above were produced automatically by privacy-audit. The reviewer '
        "confirms that the audited configuration is the one to be released and that the verdict was read together "
        "with the method notes.</p>"
        '<div class="signoff"><div><span>Reviewer name and role</span></div><div><span>Date</span></div>'
        "<div><span>Signature</span></div><div><span>Decision (release / do not release) and remarks</span></div></div>"
        "</section>"
        "<footer>Generated by privacy-audit. Self-contained page: figures are embedded; nothing is loaded from "
        "the network.</footer>"
    )

