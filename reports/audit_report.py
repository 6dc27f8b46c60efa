"""A one-page, self-contained HTML report for the single-claim audits: canary, mechanism, accountant.

What a reviewer signs: the claim, the measured lower bound (or the accountant's labels), the verdict,
the method in plain words and the set-up, rounded; the JSON file beside it keeps every digit.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from audit.machinery.audit_results import AccountantCheckPoint, AccountantCheckResult, ConformanceResult
from audit.machinery.bound_results import read_bound_result
from audit.machinery.run_directory import write_text_atomic
from audit.machinery.verdict_words import claim_line, status_word

STYLE = """body{font-family:system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#222;\
line-height:1.45}
.banner{padding:1em 1.4em;border-radius:6px;margin:1em 0;font-size:1.1em}
.fail{background:#fde8e8;border:2px solid #b91c1c}.pass{background:#e8f6ec;border:2px solid #15803d}
.inconclusive{background:#fff7e0;border:2px solid #b45309}
table{border-collapse:collapse;margin:.4em 0 1em}td,th{border:1px solid #ccc;padding:.3em .7em;text-align:left;
vertical-align:top}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.note{color:#555;font-size:.9em}
.none{background:#fff8e1;border:2px solid #d4a72c}"""


def _text(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _number(value: Any) -> str:
    """Rounded for reading (4 significant digits); the JSON beside the report keeps every digit."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        return f"{value:.4g}"
    return str(value)


def _facts(rows: list[tuple[str, Any]]) -> str:
    cells = "".join(
        f"<tr><th>{_text(key)}</th><td class='num'>{_text(_number(value))}</td></tr>"
        if isinstance(value, (int, float)) and not isinstance(value, bool) or value is None
        else f"<tr><th>{_text(key)}</th><td>{_text(_number(value))}</td></tr>"
        for key, value in rows
    )
    return f"<table>{cells}</table>"


def _setup_rows(result: dict[str, Any], shown: set[str], kind: str) -> list[tuple[str, Any]]:
    """Every scalar of the result (one level of nesting flattened). Per-run arrays (scores, seeds, coin
    flips) are only counted: they belong in the JSON file, not on a one-page report."""
    rows: list[tuple[str, Any]] = []
    for key, value in result.items():
        if key in shown:
            continue
        if isinstance(value, dict):
            for inner, inner_value in value.items():
                if isinstance(inner_value, (dict, list)):
                    rows.append((f"{key}.{inner}", f"{len(inner_value)} values (in {kind}.json)"))
                else:
                    rows.append((f"{key}.{inner}", inner_value))
        elif isinstance(value, list):
            rows.append((key, f"{len(value)} values (in {kind}.json)"))
        else:
            rows.append((key, value))
    return rows


def _points_table(points: Sequence[AccountantCheckPoint]) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("σ", "q", "T", "δ", "reported ε", "PLD ε lower", "PLD ε upper", "label"))
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td class='num'>{_text(_number(value))}</td>"
            for value in (p.noise_multiplier, p.sample_rate, p.steps, p.delta, p.reported, p.pld_lower, p.pld_upper)
        )
        + f"<td>{_text(p.label)}</td></tr>"
        for p in points
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _method(kind: str) -> str:
    """The kind's method text, declared with the kind (audit/machinery/audit_kinds.py)."""
    from audit.machinery.audit_kinds import AUDIT_KINDS

    return AUDIT_KINDS[kind].method if kind in AUDIT_KINDS else ""


def _subject(result: dict[str, Any]) -> Any:
    return result.get("trainer") or result.get("mechanism") or result.get("accountant") or ""


class Section(NamedTuple):
    """A kind's result section: the banner's detail line, the HTML body, the result keys it showed (the
    set-up table lists the rest)."""

    detail: str
    body: str
    shown: frozenset[str]


def _section(kind: str, result: dict[str, Any], decided: dict[str, Any]) -> Section:
    """The section the kind declares (audit/machinery/audit_kinds.py `report_section`)."""
    from audit.machinery.audit_kinds import AUDIT_KINDS, load

    builder = AUDIT_KINDS[kind].report_section if kind in AUDIT_KINDS else f"{__name__}:bound_section"
    section: Section = load(builder)(kind, result, decided)
    return section


def accountant_section(kind: str, result: dict[str, Any], decided: dict[str, Any]) -> Section:
    """accountant-check: the labels' counts and the grid points."""
    typed = AccountantCheckResult.from_json(result)
    detail = ", ".join(f"{n} {label}" for label, n in typed.counts.items()) + " grid point(s)"
    summary_rows = [
        ("accountant", _subject(result)),
        ("margin for 'loose'", typed.margin),
        *((f"{label} points", n) for label, n in typed.counts.items()),
    ]
    body = "<h2>Result</h2>" + _facts(summary_rows) + "<h2>Grid points</h2>" + _points_table(typed.points)
    shown = {"accountant", "margin", "counts", "points", "passed", "mlflow", "verdict"}
    return Section(detail, body, frozenset(shown))


def conformance_section(kind: str, result: dict[str, Any], decided: dict[str, Any]) -> Section:
    """conformance: one row per check."""
    typed = ConformanceResult.from_json(result)
    detail = (
        f"a family of {len(typed.checks)} statistical checks at family-wise α {_number(typed.alpha)}: "
        + "; ".join(f"{c.check}: {'pass' if c.passed else 'FAIL'}" for c in typed.checks)
    )
    summary_rows = [
        (f"{c.check} ({'pass' if c.passed else 'FAIL'})", f"measured {c.value}, expected {c.expected}: {c.detail}")
        for c in typed.checks
    ]
    body = "<h2>Checks</h2>" + _facts(summary_rows)
    shown = {"checks", "passed", "violation", "verdict", "mlflow"}
    return Section(detail, body, frozenset(shown))


def bound_section(kind: str, result: dict[str, Any], decided: dict[str, Any]) -> Section:
    """One claim against one ε lower bound (or a profile test): the deciding figure first."""
    typed = read_bound_result(kind, result)
    found = typed.bound
    bound, claim, confidence, delta = found.epsilon_lower_bound, found.claimed_epsilon, found.confidence, found.delta
    detail = (
        f"empirical ε lower bound {_number(bound)}"
        + (f" at {confidence:.0%} confidence" if isinstance(confidence, float) else "")
        + f"; claimed ε {_number(claim)}, δ {_number(delta)}"
    )
    test = found.profile_test
    if isinstance(test, Mapping):  # the deciding statistic first, the bound beside it
        detail = (
            f"exact test of {test.get('statistic')} against the claim's trade-off curve: p = "
            f"{_number(test.get('p_value'))} ({'refutes' if test.get('refuted') else 'does not refute'} the "
            f"claim); ε lower bound {_number(bound)} shown beside; claimed ε {_number(claim)}, "
            f"δ {_number(delta)}"
        )
    claims = [c for c in decided.get("claims") or [] if isinstance(c, dict)]
    summary_rows = [
        ("claim", "; ".join(claim_line(c) for c in claims) or "—"),
        ("claimed ε", claim),
        ("δ", delta),
    ]
    if isinstance(test, Mapping):
        # The statistic that decides: the exact test of one rule's error point against the claim's curve.
        summary_rows += [
            (
                f"deciding test: exact test of {test.get('statistic')} against the claim's trade-off curve "
                f"({test.get('profile')})",
                f"p = {_number(test.get('p_value'))}: "
                + ("refutes the claim" if test.get("refuted") else "does not refute the claim"),
            ),
            (
                "curve point (FPR, FNR) vs the claimed FNR floor",
                f"({_number(test.get('fpr'))}, {_number(test.get('fnr'))}) vs {_number(test.get('claimed_fnr_floor'))}",
            ),
            ("ε lower bound at the claim's δ (shown beside: the curve test decides)", bound),
        ]
    else:
        summary_rows.append(("empirical ε lower bound (decides: above the claim refutes it)", bound))
    summary_rows.append(("confidence", confidence))
    for ceiling_key in ("ceiling", "epsilon_ceiling"):
        if typed.holds(ceiling_key):
            summary_rows.append(("ceiling (a perfect attack's bound with these runs)", typed.found(ceiling_key)))
    gdp = typed.found("gdp_estimate")
    if isinstance(gdp, Mapping) and gdp.get("epsilon") is not None:
        summary_rows.append(("GDP estimate of ε (assumes a Gaussian trade-off; not a bound)", gdp["epsilon"]))
    whitebox = typed.found("gdp_bound")  # the white-box runs mode's GDP-family bound
    if isinstance(whitebox, Mapping) and whitebox.get("epsilon") is not None:
        summary_rows.append(
            (
                f"GDP-family bound: μ ≥ {whitebox.get('mu', 0):.3f}, ε at δ (assumes: {whitebox.get('assumption')})",
                whitebox["epsilon"],
            )
        )
        refuted = (typed.found("refutation") or {}).get("refuted_pair")
        summary_rows.append(("claimed trade-off curve refuted", bool(refuted)))
        if refuted:
            summary_rows.append(
                (
                    "refuted pair of the claim's profile (ε', δ')",
                    f"({refuted['epsilon']:.3f}, {refuted['delta']:.3g})",
                )
            )
    body = "<h2>Result</h2>" + _facts(summary_rows)
    shown = {
        "gdp_bound",
        "claimed_epsilon",
        "delta",
        "epsilon_lower_bound",
        "confidence",
        "violation",
        "gdp_estimate",
        "ceiling",
        "epsilon_ceiling",
        "mlflow",
        "verdict",
        "profile_test",
    }
    return Section(detail, body, frozenset(shown))


def render_audit_report(kind: str, result: dict[str, Any]) -> str:
    decided = result.get("verdict") or {}
    status = decided.get("status") or (
        "fail" if bool(result.get("violation")) or result.get("passed") is False else "pass"
    )
    verdict = status_word(status, decided)
    banner = status if status in ("fail", "pass", "inconclusive") else "fail"
    subject = _subject(result)
    section = _section(kind, result, decided)
    detail, body, shown = section.detail, section.body, set(section.shown)
    rules = [r for r in decided.get("rules") or [] if isinstance(r, dict)]
    if rules:  # a policy's rules: their own list after the claims, never a claim (docs/verdict.md)
        from audit.machinery.verdict_words import counts_line, rule_line

        body += (
            f"<h2>Policy rules</h2><p>{_text(counts_line(decided))}</p><ul>"
            + "".join(f"<li data-rule-status='{_text(r.get('status'))}'>{_text(rule_line(r))}</li>" for r in rules)
            + "</ul>"
        )
    reasons = list(dict.fromkeys(r for r in decided.get("reasons") or [] if isinstance(r, str)))
    setup = _setup_rows(result, shown, kind)
    mlflow = result.get("mlflow") or {}
    tracking = (
        (
            f"<p class='note'>MLflow: <code>{_text(mlflow.get('tracking_uri'))}</code>, run "
            f"<code>{_text(mlflow.get('run_id'))}</code>.</p>"
        )
        if mlflow
        else ""
    )
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>privacy-audit {_text(kind)}</title>"
        f"<style>{STYLE}</style></head><body><h1>privacy-audit: {_text(kind)}</h1>"
        f"<p>{_text(subject)}</p>"
        f"<div class='banner {banner}' data-status='{_text(status)}'><b>{verdict}</b> — {_text(detail)}"
        + "".join(f"<br>{_text(reason)}" for reason in reasons)
        + "</div>"
        f"<h2>Method</h2><p>{_text(_method(kind))}</p>"
        f"{body}<h2>Set-up</h2>{_facts(setup)}"
        f"<p class='note'>Numbers are rounded to 4 significant digits; every number, including per-run scores, "
        f"is in <code>{_text(kind)}.json</code> beside this report.</p>{tracking}"
        "</body></html>\n"
    )


def write_audit_report(kind: str, result: dict[str, Any], folder: Path) -> Path:
    path = Path(folder) / "report.html"
    write_text_atomic(path, render_audit_report(kind, result))
    return path
