"""A new single-audit kind is one `register_audit_kind` call (its builders named as "module:function", its
schema inline), and then `gate` finds and validates its file, the verdict, the policy, the report and the
JUnit read it with no other edit (issue #37, item 1; the attack counterpart is tests/test_attack_plugin.py)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from audit.machinery.audit_kinds import AUDIT_KINDS, AuditKind, register_audit_kind, unregister_audit_kind
from audit.machinery.run_directory import write_result_json_atomic
from audit.machinery.single_audit_verdicts import single_audit_verdict

KIND = "toy-audit"
METHOD = (
    "Toy audit of a randomized counter (a test plug-in): run on two neighbouring inputs, a threshold on the "
    "output and a Clopper-Pearson bound on its error rates give an ε lower bound; above the claim refutes it."
)
SCHEMA = {
    "type": "object",
    "required": ["counter", "claimed_epsilon", "epsilon_lower_bound", "confidence", "violation"],
    "properties": {
        "counter": {"type": "string"},
        "claimed_epsilon": {"type": "number", "exclusiveMinimum": 0},
        "epsilon_lower_bound": {"type": "number", "minimum": 0},
        "confidence": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "ceiling": {"type": "number", "minimum": 0},
        "violation": {"type": "boolean"},
        "verdict": {"type": "object"},
        "mlflow": {"type": "object"},
    },
    "additionalProperties": False,
}


@pytest.fixture
def toy_kind():
    """The one registration (default builders: one claim against one ε lower bound); undone afterwards."""
    kind = register_audit_kind(
        AuditKind(KIND, "toy audit of a counter", bounds_epsilon=True, method=METHOD, schema=SCHEMA)
    )
    try:
        yield kind
    finally:
        unregister_audit_kind(KIND)


@pytest.fixture
def cli(cli_in_process):
    return cli_in_process


def _result(bound: float, claim: float = 1.0, ceiling: float = 6.0) -> dict:
    result = {
        "counter": "pkg:count",
        "claimed_epsilon": claim,
        "epsilon_lower_bound": bound,
        "confidence": 0.95,
        "ceiling": ceiling,
        "violation": bound > claim,
    }
    return {**result, "verdict": single_audit_verdict(KIND, result)}


def test_a_registered_kind_has_a_verdict(toy_kind):
    assert KIND in AUDIT_KINDS
    refuted = _result(2.5)["verdict"]
    assert refuted["status"] == "fail" and refuted["claims"][0]["status"] == "refuted"
    assert refuted["reasons"][0].startswith(f"{KIND}: the lower bound 2.500 exceeds the claimed ε 1.000")
    assert _result(0.3)["verdict"]["status"] == "pass"
    untestable = _result(0.3, claim=8.0)["verdict"]  # ceiling 6 ≤ claim 8: could not have refuted it
    assert untestable["status"] == "inconclusive" and untestable["claims"][0]["status"] == "untestable"


def test_gate_finds_validates_and_judges_a_registered_kind(toy_kind, cli, tmp_path):
    (tmp_path / "policy.yaml").write_text("rules: {max_epsilon_lb: 2.0}\n")
    for bound, code, status in ((0.3, 0, "pass"), (2.5, 1, "fail")):
        folder = tmp_path / f"bound-{bound}"
        folder.mkdir()
        write_result_json_atomic(folder / f"{KIND}.json", _result(bound))
        gated = cli("gate", "--policy", str(tmp_path / "policy.yaml"), str(folder))
        assert gated.returncode == code, gated.stdout + gated.stderr
        written = json.loads((folder / f"{KIND}.json").read_text())
        assert written["verdict"]["status"] == status
        assert {r["rule"] for r in written["verdict"]["rules"]} >= {"max_epsilon_lb", "fail_on_violation"}
        page = (folder / "report.html").read_text()
        assert f"privacy-audit: {KIND}" in page and METHOD[:60] in page  # the method section the kind declared
        assert "empirical ε lower bound (decides: above the claim refutes it)" in page  # the default section
        cases = {c.get("name"): c for c in ET.parse(folder / "junit.xml").iter("testcase")}
        claim = cases[f"{KIND}: claimed (ε 1)"]  # the claim is a test case; failed exactly when refuted
        assert (claim.find("failure") is not None) == (status == "fail")
    # its schema (declared inline) is applied: a field it does not know is exit 2 naming the field
    bad = tmp_path / "bad"
    bad.mkdir()
    write_result_json_atomic(bad / f"{KIND}.json", {**_result(0.3), "claimed_epsilon": "one"})
    refused = cli("gate", "--policy", str(tmp_path / "policy.yaml"), str(bad))
    assert refused.returncode == 2 and "claimed_epsilon" in refused.stderr + refused.stdout


def test_without_the_registration_the_file_is_not_an_audit_result(cli, tmp_path):
    write_result_json_atomic(tmp_path / f"{KIND}.json", {"counter": "pkg:count"})
    (tmp_path / "policy.yaml").write_text("rules: {max_epsilon_lb: 2.0}\n")
    assert KIND not in AUDIT_KINDS
    refused = cli("gate", "--policy", str(tmp_path / "policy.yaml"), str(tmp_path))
    assert refused.returncode == 2
