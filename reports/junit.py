"""The verdict as JUnit XML, so CI systems show each check (built-in test or policy rule) as a test.

One <testcase> per check of `results["verdict"]`: a failed check carries a <failure message="...">,
an inconclusive one is <skipped>; the suite's properties carry the verdict status. Built with xml.etree.ElementTree, so names from user configs are escaped by the
serializer.
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


def render_junit_xml(results: dict[str, Any], *, evaluation: Any = None) -> str:
    """JUnit XML (testsuites > testsuite > testcase) of `results["verdict"]` (audit.machinery.verdict).

    One <testcase> per check of the verdict: a failing check carries <failure>, an inconclusive one
    is <skipped> (it could not have failed), a shown-only one (e.g. Clopper-Pearson over one
    model's candidates) is a passing case whose output says it decides nothing. With a policy the
    checks are its rules; `evaluation` is accepted for callers that hold one and is not needed.
    """
    if not isinstance(results, dict) and hasattr(results, "checks"):
        results = _from_policy_evaluation(results)  # callers that still pass a PolicyEvaluation
    verdict = results.get("verdict") or {}
    rows = [c for c in verdict.get("checks") or [] if isinstance(c, dict)]
    failures = sum(1 for c in rows if c.get("outcome") == "fail")
    skipped = sum(1 for c in rows if c.get("outcome") == "inconclusive")
    totals = {"tests": str(len(rows)), "failures": str(failures), "errors": "0", "skipped": str(skipped),
              "time": "0"}
    root = ET.Element("testsuites", {"name": "privacy-audit", **totals})
    decided_by = str(verdict.get("decided_by") or "built-in checks")
    suite = ET.SubElement(root, "testsuite", {"name": f"{_SUITE}: {decided_by}", **totals})
    properties = ET.SubElement(suite, "properties")
    for name, value in (("verdict", verdict.get("status")), ("decided_by", decided_by),
                        ("passed", str(bool(verdict.get("passed"))).lower()),
                        ("family_wise_error", (verdict.get("family_wise_error") or {}).get("statement", ""))):
        ET.SubElement(properties, "property", {"name": name, "value": str(value)})
    if verdict.get("policy"):
        ET.SubElement(properties, "property", {"name": "policy", "value": str(verdict["policy"])})
    for check in rows:
        name = f"{check.get('name')} | {check.get('subject')}"
        case = ET.SubElement(suite, "testcase", {"classname": "privacy_audit.verdict", "name": name, "time": "0"})
        message = str(check.get("message") or "")
        outcome = check.get("outcome")
        if outcome == "fail":
            failure = ET.SubElement(case, "failure", {"message": message, "type": "VerdictCheckFailed"})
            failure.text = (f"check: {check.get('name')}\nsubject: {check.get('subject')}\n"
                            f"p-value: {_value(check.get('p_value'))}\nassumption: {check.get('assumption') or '—'}\n")
        elif outcome == "inconclusive":
            ET.SubElement(case, "skipped", {"message": "inconclusive: " + message})
        else:
            prefix = "shown only, decides nothing: " if outcome == "shown" else ""
            ET.SubElement(case, "system-out").text = prefix + message
    for element in root.iter():
        element.attrib = {k: _clean(v) for k, v in element.attrib.items()}
        if element.text:
            element.text = _clean(element.text)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _from_policy_evaluation(evaluation: Any) -> dict[str, Any]:
    """A policy evaluation as verdict rows: a failed rule fails, a not-applicable one is skipped."""
    rows = [{"subject": c.target_label, "name": c.rule + (f" · {c.attack}" if c.attack else ""), "message": c.message,
             "p_value": None, "assumption": "policy rule",
             "outcome": "fail" if c.applicable and not c.passed else ("inconclusive" if not c.applicable else "pass")}
            for c in evaluation.checks]
    source = evaluation.policy_path or evaluation.policy_name
    return {"verdict": {"status": "pass" if evaluation.passed else "fail", "passed": evaluation.passed,
                        "decided_by": f"policy {source}", "policy": source, "checks": rows}}


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
