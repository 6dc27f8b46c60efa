"""The verdict as types (audit/machinery/verdict_rows.py): built once by `decide_verdict`, serialised once by
`Verdict.to_json` (exactly the dict results.json has always held, key order included), read back by
`Verdict.from_json`; the public API hands it out (issue #37, item 3)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from audit.machinery.policy import policy_from_dict
from audit.machinery.single_audit_verdicts import single_audit_verdict
from audit.machinery.verdict import Check, decide, recompute_verdict
from audit.machinery.verdict_decision import decide_verdict
from audit.machinery.verdict_rows import CheckRow, ClaimRow, RuleRow, Verdict

DATA = Path(__file__).parent / "data"
SCHEMA = Path(__file__).resolve().parents[1] / "audit" / "schema" / "results.schema.json"
EXAMPLES = sorted(DATA.glob("results_*.json"))
AUDITS = sorted((DATA / "audit_results").glob("*.json"))


def _verdicts():
    policy = policy_from_dict({"rules": {"max_epsilon_lb": 3.0, "max_auc": 0.6}})
    for path in EXAMPLES:
        results = json.loads(path.read_text(encoding="utf-8"))
        yield path.name, recompute_verdict(results)
        yield f"{path.name} + policy", recompute_verdict(results, policy)
    for path in AUDITS:
        yield path.name, single_audit_verdict(path.stem, json.loads(path.read_text(encoding="utf-8")))


def test_every_verdict_reads_back_to_the_same_json_key_for_key():
    seen = 0
    for name, verdict in _verdicts():
        typed = Verdict.from_json(verdict)
        again = typed.to_json()
        assert json.dumps(again, ensure_ascii=False) == json.dumps(verdict, ensure_ascii=False), name
        assert typed.passed == verdict["passed"] and len(typed.claims) == len(verdict["claims"])
        assert all(isinstance(c, ClaimRow) for c in typed.claims) and all(isinstance(c, CheckRow) for c in typed.checks)
        seen += 1
    assert seen == 2 * len(EXAMPLES) + len(AUDITS) >= 10


def test_the_typed_verdict_is_valid_under_the_results_schema():
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator({**schema, "$ref": "#/$defs/verdict", "properties": {}, "required": []})
    for name, verdict in _verdicts():
        errors = [e.message for e in validator.iter_errors(Verdict.from_json(verdict).to_json())]
        assert errors == [], name


def test_decide_serialises_the_typed_verdict_and_rules_stay_rules():
    checks = [
        Check("targets[0]", "loss · one_run", "bound 2.1 > claim 1", p_value=0.001, claim="ε 1", ceiling=4.0),
        Check(
            "targets[1]",
            "loss · one_run",
            "ceiling 4 ≤ claim 8",
            p_value=0.9,
            inconclusive=True,
            claim="ε 8",
            ceiling=4.0,
        ),
    ]
    rule = {
        "rule": "max_auc",
        "subject": "ε = 1",
        "attack": "loss",
        "status": "failed",
        "figure": 0.7,
        "threshold": 0.6,
        "message": "AUC 0.7 > 0.6",
    }
    typed = decide_verdict(checks, rules=[rule])
    assert typed.to_json() == decide(checks, rules=[rule])
    assert [c.status for c in typed.claims] == ["refuted", "untestable"]
    assert typed.status == "fail" and not typed.passed
    assert typed.rules == (RuleRow.from_json(rule),) and typed.rule_counts()["failed"] == 1
    assert [c.outcome for c in typed.checks] == ["fail", "inconclusive"]
    with pytest.raises(AttributeError):
        typed.claims[0].status = "held"  # type: ignore[misc]  # frozen: built once


def test_the_api_hands_out_the_typed_verdict():
    import audit
    from audit.api import AuditResult

    path = DATA / "audit_results" / "canary-audit.json"
    result = json.loads(path.read_text(encoding="utf-8"))
    wrapped = AuditResult.from_results(
        "canary-audit", {**result, "verdict": single_audit_verdict("canary-audit", result)}
    )
    typed = wrapped.typed_verdict
    assert isinstance(typed, audit.Verdict) and typed.status == wrapped.status
    assert [c.claim for c in typed.claims] == [c["claim"] for c in wrapped.verdict["claims"]]


# Names of audit.__all__ defined in modules other helpers own (audit/ledger/store.py): their docstrings
# say what they are but have no Args / Attributes section yet (issue #37 item 5, left to the ledger's owner).
_SECTIONS_PENDING = {"Ledger", "ReleaseInput", "Provenance", "BudgetExceeded"}


def test_every_public_name_documents_its_arguments_or_attributes():
    import inspect

    import audit

    missing = []
    for name in audit.__all__:
        obj = getattr(audit, name)
        doc = inspect.getdoc(obj) or ""
        wanted = ("Attributes:", "Args:") if inspect.isclass(obj) else ("Args:",)
        if not any(w in doc for w in wanted) or (not inspect.isclass(obj) and "Returns:" not in doc):
            missing.append(name)
    assert sorted(missing) == sorted(_SECTIONS_PENDING)
