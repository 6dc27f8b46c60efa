"""The verdict as JUnit XML, meaning what a CI system thinks it means.

A <testcase> is a check that decides: one per claim of `results["verdict"]["claims"]` — held is a
passing case, refuted a <failure>, untestable or not refuted a <skipped> case with its reason (ceiling,
what would make it testable; what the mode cannot detect, what would decide). A policy's rules follow
as their own cases (`policy rule …`): passed, failed (<failure type="RuleFailed">) or not applicable
(<skipped>); a rule is never counted as a claim.
Figures that decide nothing (shown-only checks, the leakage statement of a subject without a DP
claim) are suite <properties>; where a leak fails the verdict (the user's own release, no
`--allow-leak`) each leakage statement is a case too.
Built with xml.etree.ElementTree, so names from user configs are escaped by the serializer.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from audit.machinery.run_directory import write_text_atomic

__all__ = ["render_junit_xml", "write_junit_xml"]

_SUITE = "privacy-audit verdict"
# Characters XML 1.0 cannot hold at all (escaping does not help); dropped from user-supplied text.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _claims(verdict: dict[str, Any]) -> list[dict[str, Any]]:
    from audit.machinery.verdict import claim_statuses

    if isinstance(verdict.get("claims"), list):
        return [c for c in verdict["claims"] if isinstance(c, dict)]
    return claim_statuses([c for c in verdict.get("checks") or [] if isinstance(c, dict)])  # an older verdict


def render_junit_xml(results: dict[str, Any], *, evaluation: Any = None) -> str:
    """JUnit XML (testsuites > testsuite > testcase) of `results["verdict"]` (audit.machinery.verdict).

    One <testcase> per claim (see the module docstring); shown-only figures and leakage statements
    are properties. A verdict that fails without a refuted claim (a policy's `fail_on_inconclusive`,
    a leak in the user's own release) carries one more failing case naming why, so no failing verdict reads as green.
    `evaluation` is accepted for callers that hold one and is not needed.
    """
    from audit.machinery.verdict import status_word
    from audit.machinery.verdict_words import claim_line, counts_line, rule_line, rule_status_word

    if not isinstance(results, dict) and hasattr(results, "checks"):
        results = _from_policy_evaluation(results)  # callers that still pass a PolicyEvaluation
    verdict = results.get("verdict") or {}
    claims = _claims(verdict)
    leakage = [e for e in verdict.get("leakage") or [] if isinstance(e, dict)]
    leak_cases = leakage if verdict.get("fail_on_leak") else []
    cases: list[tuple[str, str, str, str]] = []  # (name, outcome, message, detail)
    for claim in claims:
        status = str(claim.get("status"))
        message = str(claim.get("reason") or "")
        if status in ("untestable", "not_refuted"):  # skipped, with why: claim_line says ceiling / power
            message = claim_line(claim) + (f" — {message}" if message else "")
        outcome = {"held": "pass", "refuted": "fail", "untestable": "skip", "not_refuted": "skip"}.get(status, "skip")
        detail = (
            f"claim: {claim.get('claim')}\nstatus: {status}\np-value: {_value(claim.get('p_value'))}\n"
            f"checks: {', '.join(map(str, claim.get('checks') or []))}\n"
        )
        cases.append((str(claim.get("claim")), outcome, message, detail))
    # A policy's rules are their own test cases, after the claims: failed fails, not applicable is skipped.
    for rule in (r for r in verdict.get("rules") or [] if isinstance(r, dict)):
        rule_status = str(rule.get("status"))
        name = f"policy rule {rule.get('rule')}: {rule.get('subject')}" + (
            f", attack {rule['attack']}" if rule.get("attack") else ""
        )
        detail = (
            f"rule: {rule.get('rule')}\nstatus: {rule_status_word(rule_status)}\n"
            f"figure: {_value(rule.get('figure'))}\nthreshold: {_value(rule.get('threshold'))}\n"
        )
        cases.append((name, {"passed": "pass", "failed": "fail"}.get(rule_status, "skip"), rule_line(rule), detail))
    for entry in leak_cases:
        cases.append(
            (
                f"no DP claim: {entry.get('label') or entry.get('subject')} (leak check of your own release)",
                "fail" if entry.get("status") == "leaks" else "pass",
                str(entry.get("statement")),
                "",
            )
        )
    if verdict.get("status") == "fail" and not any(c[1] == "fail" for c in cases):
        reasons = "; ".join(dict.fromkeys(map(str, verdict.get("reasons") or []))) or "the verdict failed"
        cases.append(("verdict: " + str(verdict.get("decided_by") or "built-in checks"), "fail", reasons, ""))
    failures = sum(1 for c in cases if c[1] == "fail")
    skipped = sum(1 for c in cases if c[1] == "skip")
    totals = {"tests": str(len(cases)), "failures": str(failures), "errors": "0", "skipped": str(skipped), "time": "0"}
    root = ET.Element("testsuites", {"name": "privacy-audit", **totals})
    decided_by = str(verdict.get("decided_by") or "built-in checks")
    suite = ET.SubElement(root, "testsuite", {"name": f"{_SUITE}: {decided_by}", **totals})
    properties = ET.SubElement(suite, "properties")
    status = str(verdict.get("status"))
    for name, value in (
        ("verdict", status),
        ("headline", status_word(status, verdict)),
        ("decided_by", decided_by),
        ("passed", str(status == "pass").lower()),
        ("claims", counts_line({**verdict, "claims": claims})),
        ("family_wise_error", (verdict.get("family_wise_error") or {}).get("statement", "")),
    ):
        ET.SubElement(properties, "property", {"name": name, "value": str(value)})
    if verdict.get("policy"):
        ET.SubElement(properties, "property", {"name": "policy", "value": str(verdict["policy"])})
    for i, entry in enumerate(leakage):
        ET.SubElement(
            properties,
            "property",
            {"name": f"leakage.{i:02d}", "value": f"{entry.get('status')}: {entry.get('statement')}"},
        )
    shown = [c for c in verdict.get("checks") or [] if isinstance(c, dict) and c.get("outcome") == "shown"]
    for i, check in enumerate(shown):
        ET.SubElement(
            properties,
            "property",
            {"name": f"shown.{i:02d}", "value": f"shown only, decides nothing: {check.get('message')}"},
        )
    for name, outcome, message, detail in cases:
        case = ET.SubElement(suite, "testcase", {"classname": "privacy_audit.verdict", "name": name, "time": "0"})
        if outcome == "fail":
            kind = "RuleFailed" if name.startswith("policy rule ") else "ClaimRefuted"
            failure = ET.SubElement(case, "failure", {"message": message, "type": kind})
            failure.text = detail
        elif outcome == "skip":
            ET.SubElement(case, "skipped", {"message": message})
        else:
            ET.SubElement(case, "system-out").text = message
    for element in root.iter():
        element.attrib = {k: _clean(v) for k, v in element.attrib.items()}
        if element.text:
            element.text = _clean(element.text)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _from_policy_evaluation(evaluation: Any) -> dict[str, Any]:
    """A policy evaluation as verdict rows: a failed rule fails, a not-applicable one is skipped."""
    rows = [
        {
            "subject": c.target_label,
            "name": c.rule + (f" · {c.attack}" if c.attack else ""),
            "message": c.message,
            "p_value": None,
            "assumption": "policy rule",
            "outcome": "fail" if c.applicable and not c.passed else ("inconclusive" if not c.applicable else "pass"),
        }
        for c in evaluation.checks
    ]
    source = evaluation.policy_path or evaluation.policy_name
    return {
        "verdict": {
            "status": "pass" if evaluation.passed else "fail",
            "passed": evaluation.passed,
            "decided_by": f"policy {source}",
            "policy": source,
            "checks": rows,
        }
    }


def write_junit_xml(results: dict[str, Any], path: Path, *, evaluation: Any = None) -> Path:
    """Write the JUnit XML to `path` atomically (temp file in the same folder, then os.replace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, render_junit_xml(results, evaluation=evaluation))
    return path


def _value(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return "inf" if math.isinf(value) else f"{value:.6g}"
    return str(value)


def _clean(text: str) -> str:
    return _INVALID_XML.sub("", text)
