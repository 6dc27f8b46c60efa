"""What `gate` says about a single audit's results file names the audit once: a file re-read holds the verdict
already written, whose reasons begin with the kind, and gate printed "canary-audit: canary-audit: inconclusive: …"."""

import json
from pathlib import Path

import pytest

from audit.machinery.single_audit_verdicts import single_audit_verdict

DATA = Path(__file__).parent / "data" / "audit_results"


@pytest.mark.parametrize("kind", ["canary-audit", "mechanism-audit", "whitebox-audit"])
def test_a_re_read_results_file_names_its_audit_once(kind):
    result = json.loads((DATA / f"{kind}.json").read_text(encoding="utf-8"))
    verdict = single_audit_verdict(kind, result)
    messages = [check["message"] for check in verdict["checks"]] + list(verdict["reasons"])
    assert messages
    for message in messages:
        assert f"{kind}: {kind}:" not in message, message
        assert message.count(f"{kind}:") <= 1, message
    again = single_audit_verdict(kind, {**result, "verdict": verdict})  # read a second time: still once
    assert [c["message"] for c in again["checks"]] == [c["message"] for c in verdict["checks"]]
