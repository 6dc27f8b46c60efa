"""A policy evaluation as JUnit XML, so CI systems show each rule check as a test.

One <testcase> per `RuleCheck` (rule × target × attack / FPR level): a failed check carries a
<failure message="..."> with the measured value and the limit, a not-applicable check is
<skipped>. Built with xml.etree.ElementTree, so names from user configs are escaped by the
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

_SUITE = "privacy-audit policy"
# Characters XML 1.0 cannot hold at all (escaping does not help); dropped from user-supplied text.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def render_junit_xml(policy_evaluation: Any) -> str:
    """JUnit XML (testsuites > testsuite > testcase) for an `audit.machinery.policy.PolicyEvaluation`."""
    checks = list(policy_evaluation.checks)
    failures = sum(1 for c in checks if c.applicable and not c.passed)
    skipped = sum(1 for c in checks if not c.applicable)
    totals = {"tests": str(len(checks)), "failures": str(failures), "errors": "0", "skipped": str(skipped),
              "time": "0"}
    root = ET.Element("testsuites", {"name": "privacy-audit", **totals})
    suite = ET.SubElement(root, "testsuite", {"name": f"{_SUITE}: {policy_evaluation.policy_name}", **totals})
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", {"name": "policy", "value": str(policy_evaluation.policy_path or
                                                                         policy_evaluation.policy_name)})
    ET.SubElement(properties, "property", {"name": "passed", "value": str(policy_evaluation.passed).lower()})
    for check in checks:
        name = f"{check.rule} | {check.target_label}" + (f" | {check.attack}" if check.attack else "")
        case = ET.SubElement(suite, "testcase", {"classname": "privacy_audit.policy", "name": name, "time": "0"})
        if not check.applicable:
            ET.SubElement(case, "skipped", {"message": check.message})
        elif not check.passed:
            failure = ET.SubElement(case, "failure", {"message": check.message, "type": "PolicyRuleFailed"})
            failure.text = (f"rule: {check.rule}\ntarget: {check.target_label}\n"
                            + (f"attack: {check.attack}\n" if check.attack else "")
                            + f"measured: {_value(check.measured)}\nlimit: {_value(check.limit)}\n")
        else:
            ET.SubElement(case, "system-out").text = check.message
    for element in root.iter():
        element.attrib = {k: _clean(v) for k, v in element.attrib.items()}
        if element.text:
            element.text = _clean(element.text)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit_xml(policy_evaluation: Any, path: Path) -> Path:
    """Write the JUnit XML to `path` atomically (temp file in the same folder, then os.replace)."""
    path = Path(path)
    write_text_atomic(path, render_junit_xml(policy_evaluation))
    return path


def _value(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return "inf" if math.isinf(value) else f"{value:.6g}"
    return str(value)


def _clean(text: str) -> str:
    return _INVALID_XML.sub("", text)
