"""The HTML report's verdict sections: the banner (the one verdict every output shows), the checks table, the
policy's rules and the ledger's spent budget.
"""

from __future__ import annotations

from typing import Any

from audit.machinery.verdict import claim_sentence, extra_reasons, status_word
from audit.machinery.verdict_words import counts_line, pass_caveat
from reports.html_format import _eps, _num, _text
from reports.results_access import is_number as _is_number


def _ledger_section(results: dict[str, Any]) -> str:
    """The dataset's spent privacy budget after this run's release(s), as `--ledger` recorded it."""
    entry = results.get("ledger")
    if not isinstance(entry, dict):
        return ""
    spent = entry.get("epsilon_spent")
    spent_text = "unbounded" if entry.get("epsilon_spent_unbounded") else (f"{spent:.4g}" if _is_number(spent) else "—")
    limit = entry.get("max_total_epsilon")
    rows = [
        ("Dataset", _text(entry.get("dataset"))),
        ("Recorded", "yes" if entry.get("recorded") else "no"),
        ("Spent ε (after this run)", f"{spent_text} at δ = {_text(entry.get('delta'))} ({_text(entry.get('method'))})"),
        (
            "Basic / advanced composition",
            f"{_text(entry.get('basic_epsilon'))} / {_text(entry.get('advanced_epsilon'))}",
        ),
        ("Budget (max_total_epsilon)", f"{limit:g}" if _is_number(limit) else "none set"),
    ]
    if entry.get("reason"):
        rows.append(("Why", _text(entry.get("reason"))))
    body = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return f'<section id="ledger"><h2>Privacy budget (ledger)</h2><dl class="facts">{body}</dl></section>'


def _verdict_banner(results: dict[str, Any], checks: list[dict[str, Any]] | None) -> str:
    """The one verdict (audit.machinery.verdict): the same status as the console, summary.md and junit.xml."""
    verdict = results.get("verdict") or {}
    status = verdict.get("status") or ("fail" if verdict.get("passed") is False else "pass")
    decided_by = verdict.get("decided_by") or (
        f"policy {verdict['policy']}" if verdict.get("policy") else "built-in checks"
    )
    reasons = extra_reasons(verdict)
    word = status_word(status, verdict)
    kind = {"fail": "fail", "inconclusive": "none", "pass": "pass"}.get(status, "fail" if word == "LEAKS" else "none")
    if status == "fail":
        refuted = any(isinstance(c, dict) and c.get("status") == "refuted" for c in verdict.get("claims") or [])
        failed = any(isinstance(r, dict) and r.get("status") == "failed" for r in verdict.get("rules") or [])
        why = " and ".join(w for w, on in (("a claim was refuted", refuted), ("a policy rule failed", failed)) if on)
        detail = f"<p>Decided by {_text(decided_by)}: {why or 'see the reasons below'}.</p>"
    elif status == "inconclusive":
        detail = (
            f"<p>Decided by {_text(decided_by)}: nothing was refuted, but at least one claim was not tested "
            "by a check with power against it: untestable here (its ceiling is at or below the claim, or no "
            "bound is proven for the setting) or not refuted (the check that ran cannot detect every "
            "violation of the claim). This is not a pass for that claim.</p>"
        )
    elif status == "no_claim":
        detail = (
            f"<p>Decided by {_text(decided_by)}: no DP claim was tested, so nothing passes or fails; the "
            "statement below says whether membership leaks, by which test.</p>"
        )
    else:
        detail = (
            f"<p>Decided by {_text(decided_by)}: every claim held (tested by an audit able to refute it, and "
            "not refuted). A lower bound below a claim is not a proof that the claim holds.</p>"
        )
        caveat = pass_caveat(verdict)
        if caveat:
            detail += f"<p>{_text(caveat)} (its statement is below).</p>"
    claims = [c for c in verdict.get("claims") or [] if isinstance(c, dict)]
    if claims:
        detail += (
            "<p><strong>Claims:</strong></p><ul>"
            + "".join(
                f'<li data-claim-status="{_text(c.get("status"))}">{_text(claim_sentence(c))}</li>' for c in claims
            )
            + "</ul>"
        )
    leakage = [e for e in verdict.get("leakage") or [] if isinstance(e, dict)]
    if leakage:
        detail += (
            "<p><strong>No DP claim — leakage:</strong></p><ul>"
            + "".join(f'<li data-leakage="{_text(e.get("status"))}">{_text(e.get("statement"))}</li>' for e in leakage)
            + "</ul>"
        )
    statement = (verdict.get("family_wise_error") or {}).get("statement")
    if statement:
        detail += f"<p><strong>Multiplicity:</strong> {_text(statement)}.</p>"
    rules = [r for r in verdict.get("rules") or [] if isinstance(r, dict)]
    if rules:  # the policy's rules: their own list after the claims, never counted as claims
        detail += (
            "<p><strong>Policy rules:</strong></p><ul>"
            + "".join(
                f'<li data-rule-status="failed">policy rule {_text(r.get("rule"))} failed: '
                f"{_text(r.get('message'))}</li>"
                for r in rules
                if r.get("status") == "failed"
            )
            + "</ul>"
            if any(r.get("status") == "failed" for r in rules)
            else ""
        )
    detail += (
        f"<p><strong>Counts:</strong> {_text(counts_line(verdict))}"
        + (" (every rule is listed under “Policy rules”)" if rules or checks else "")
        + ".</p>"
    )
    if reasons:
        detail += "<p><strong>Reasons:</strong></p><ul>" + "".join(f"<li>{_text(r)}</li>" for r in reasons) + "</ul>"
    notes = [str(n) for n in verdict.get("notes") or []]
    if notes:
        detail += (
            "<p><strong>Findings (decide nothing):</strong></p><ul>"
            + "".join(f"<li>{_text(n)}</li>" for n in notes)
            + "</ul>"
        )
    return (
        f'<section class="verdict {kind}" id="verdict" data-status="{_text(status)}"><div class="word">{word}</div>'
        f'<div class="detail">{detail}</div></section>'
    )


def _verdict_checks_section(results: dict[str, Any]) -> str:
    """Every check behind the verdict, and what each ε bound assumes and where it is proven."""
    verdict = results.get("verdict") or {}
    rows = [c for c in verdict.get("checks") or [] if isinstance(c, dict)]
    scopes: dict[str, dict[str, Any]] = {}
    for entry in list(results.get("targets") or []) + [
        s.get("mia") or {} for s in results.get("synthetic") or [] if isinstance(s, dict)
    ]:
        attacks = entry.get("attacks") if isinstance(entry.get("attacks"), list) else [entry]
        for attack in attacks:
            for method, scope in (attack.get("epsilon_lb_scope") or {}).items():
                if isinstance(scope, dict) and (method not in scopes or scope.get("decides")):
                    scopes[method] = scope
    if not rows and not scopes:
        return ""
    html_parts = ['<section id="verdict-checks"><h2>What decides the verdict</h2>']
    if scopes:
        html_parts.append(
            "<table><thead><tr><th>bound</th><th>assumption</th><th>scope</th><th>decides?</th></tr></thead><tbody>"
        )
        for method, scope in sorted(scopes.items()):
            html_parts.append(
                f"<tr><td>{_text(_readable_check(method))}</td><td>{_text(scope.get('assumption'))}</td>"
                f"<td>{_text(scope.get('scope'))}</td><td>{'yes' if scope.get('decides') else 'no'}</td></tr>"
            )
        html_parts.append("</tbody></table>")
    deciding = [r for r in rows if r.get("outcome") != "shown"]
    shown = [r for r in rows if r.get("outcome") == "shown"]
    head = (
        '<div class="scroll"><table><thead><tr><th>subject</th><th>check</th><th>says</th><th>p-value</th>'
        "<th>assumption</th><th>detail</th></tr></thead><tbody>"
    )
    if deciding:  # the checks that decide the claims, in the claims' words, first
        html_parts.append(
            "<h3>Checks that decide the claims</h3>"
            + head
            + "".join(_check_row(results, row) for row in deciding)
            + "</tbody></table></div>"
        )
    if shown:  # figures shown beside them, each under its assumption: folded away, they decide nothing
        html_parts.append(
            f"<details><summary>{len(shown)} figure(s) shown only (they decide nothing; each rests on "
            "the assumption named)</summary>"
            + head
            + "".join(_check_row(results, row) for row in shown)
            + "</tbody></table></div></details>"
        )
    html_parts.append("</section>")
    return "".join(html_parts)


# Internal names of the verdict's checks, in words a reader knows.
_CHECK_WORDS = (
    ("clopper_pearson", "Clopper-Pearson bound"),
    ("one_run", "one-run bound"),
    ("fdp_one_run", "f-DP one-run test"),
    ("no proven bound", "no proven bound"),
    ("accountant vs PLD", "accountant vs the tight PLD interval"),
)


def _readable_subject(results: dict[str, Any], subject: Any) -> str:
    """`targets[0]` → "ε = 1 target", `synthetic[1]` → "synthetic 'ctgan'"; other subjects as they are."""
    text = str(subject or "")
    for kind, key in (("targets", "targets"), ("synthetic", "synthetic")):
        if text.startswith(f"{kind}[") and text.endswith("]") and text[len(kind) + 1 : -1].isdigit():
            entries = results.get(key) or []
            index = int(text[len(kind) + 1 : -1])
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
    return (
        f"<tr><td>{_text(_readable_subject(results, row.get('subject')))}</td>"
        f"<td>{_text(_readable_check(row.get('name')))}</td>"
        f'<td><span class="badge {badge}">{_text(word)}</span></td><td>{"—" if p is None else _text(f"{p:.3g}")}</td>'
        f"<td>{_text(row.get('assumption'))}</td><td>{_text(row.get('message'))}</td></tr>"
    )


def _policy_checks(results: dict[str, Any], evaluation: Any) -> list[dict[str, Any]] | None:
    rules = (results.get("verdict") or {}).get("rules")
    if isinstance(rules, list) and rules:  # the verdict's own list of rules (audit.machinery.verdict)
        word = {"passed": "pass", "failed": "fail", "not_applicable": "not applicable"}
        return [
            {
                "rule": r.get("rule"),
                "target_label": r.get("subject"),
                "attack": r.get("attack"),
                "measured": r.get("figure"),
                "limit": r.get("threshold"),
                "message": r.get("message"),
                "status": word.get(str(r.get("status")), r.get("status")),
            }
            for r in rules
            if isinstance(r, dict)
        ]
    if evaluation is not None:
        return [
            {
                "rule": c.rule,
                "target_label": c.target_label,
                "attack": c.attack,
                "measured": c.measured,
                "limit": c.limit,
                "passed": c.passed,
                "message": c.message,
                "status": c.status,
            }
            for c in evaluation.checks
        ]
    stored = results.get("policy_evaluation")
    if isinstance(stored, dict) and isinstance(stored.get("checks"), list):
        checks = []
        for check in stored["checks"]:
            if not isinstance(check, dict):
                continue
            status = check.get("status") or (
                "not applicable" if check.get("applicable") is False else ("pass" if check.get("passed") else "fail")
            )
            checks.append({**check, "status": status})
        return checks
    return None


def _policy_section(checks: list[dict[str, Any]] | None) -> str:
    if not checks:
        return ""
    order = {"fail": 0, "pass": 1, "not applicable": 2}
    badge = {
        "fail": '<span class="badge fail">failed</span>',
        "pass": '<span class="badge pass">passed</span>',
        "not applicable": '<span class="badge na">not applicable</span>',
    }
    rows = []
    for check in sorted(checks, key=lambda c: order.get(str(c.get("status")), 3)):
        rows.append(
            f"<tr><td>{badge.get(str(check.get('status')), _text(check.get('status')))}</td>"
            f"<td><code>{_text(check.get('rule'))}</code></td><td>{_text(check.get('target_label'))}</td>"
            f"<td>{_text(check.get('attack') or '')}</td>"
            f'<td class="num">{_value(check.get("measured"))}</td><td class="num">{_value(check.get("limit"))}</td>'
            f"<td>{_text(_without_label(check))}</td></tr>"
        )
    return (
        '<section id="policy"><h2>Policy rules</h2>'
        '<p class="caption">A policy adds these rules beside the claims; it never changes a claim\'s status. The top '
        "line fails when a claim is refuted or a rule failed.</p>"
        '<div class="scroll"><table><thead><tr><th>status</th><th>rule</th><th>subject</th><th>attack</th>'
        '<th class="num">figure</th>'
        f'<th class="num">threshold</th><th>detail</th></tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
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
