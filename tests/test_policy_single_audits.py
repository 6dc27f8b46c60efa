"""Policy rules on canary-audit / mechanism-audit / whitebox-audit / conformance / accountant-check results:
`gate <folder or kind.json> --policy P` folds the policy into the one verdict, re-renders the
report and JUnit, exits 0 / 1 / 2 like every gate, and a later gate judges the audit afresh."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from audit.errors import AuditInputError
from audit.machinery.policy import evaluate_policy_on_audit, policy_from_dict
from audit.machinery.single_audit_verdicts import single_audit_verdict, single_audit_verdict_with_policy


@pytest.fixture
def cli(cli_in_process):
    """Commands run in this process (tests/conftest.py `run_cli_in_process`): these tests read what a
    command prints, writes and exits with; a fresh interpreter per call cost ~4-5 s of CPU in imports."""
    return cli_in_process


def _canary(status: str, bound: float, claim: float, ceiling: float) -> dict:
    """The fields of a canary-audit result the verdict and the rules read."""
    return {
        "mode": "multi-run",
        "claimed_epsilon": claim,
        "epsilon_lower_bound": bound,
        "confidence": 0.95,
        "ceiling": ceiling,
        "violation": status == "fail",
        "status": status,
        "trainer": "pkg:train",
    }


def test_fail_on_inconclusive_fails_an_audit_that_could_not_have_refuted_its_claim():
    result = _canary("inconclusive", 0.4, 8.0, 2.5)  # a perfect attack reaches 2.5 < the claim 8
    assert single_audit_verdict("canary-audit", result)["status"] == "inconclusive"
    lenient = policy_from_dict({"rules": {"max_epsilon_lb": 3.0}})
    assert single_audit_verdict_with_policy("canary-audit", result, lenient)[0]["status"] == "inconclusive"
    strict = policy_from_dict({"rules": {"max_epsilon_lb": 3.0, "fail_on_inconclusive": True}})
    verdict, _ = single_audit_verdict_with_policy("canary-audit", result, strict)
    assert verdict["status"] == "fail" and "inconclusive" in verdict["reasons"][0]


def test_model_rules_do_not_apply_to_an_audit_and_a_mistyped_bound_names_its_field():
    policy = policy_from_dict({"rules": {"max_auc": 0.6, "max_epsilon_lb": 1.0}})
    result = _canary("pass", 0.2, 1.0, 4.0)
    evaluation = evaluate_policy_on_audit(policy, "canary-audit", result, single_audit_verdict("canary-audit", result))
    assert {c.rule: c.status for c in evaluation.checks} == {
        "max_epsilon_lb": "pass",
        "fail_on_violation": "pass",
        "max_auc": "not applicable",
    }
    with pytest.raises(AuditInputError, match="epsilon_lower_bound"):
        evaluate_policy_on_audit(policy, "canary-audit", {**result, "epsilon_lower_bound": "0.2"}, {"status": "pass"})
    with pytest.raises(AuditInputError, match="max_epsilon_lower_bound"):  # a misspelt rule: exit 2 naming it
        policy_from_dict({"rules": {"max_epsilon_lower_bound": 1.0}})


@pytest.mark.slow  # three fresh CLI processes: ~20-30 s on a shared 2-core machine
def test_gate_on_a_mechanism_audit_folder(cli, tmp_path):
    assert (
        cli(
            "mechanism-audit",
            "--mechanism",
            "audit.demos.mechanisms:laplace_count",
            "--tracking-uri",
            f"sqlite:///{tmp_path}/m.db",
        ).returncode
        == 0
    )
    (folder,) = (tmp_path / "runs").iterdir()
    (tmp_path / "tight.yaml").write_text("rules: {max_epsilon_lb: 0.01}\n")
    (tmp_path / "lenient.yaml").write_text("rules: {max_epsilon_lb: 50.0}\n")

    def outputs():
        verdict = json.loads((folder / "mechanism-audit.json").read_text())["verdict"]["status"]
        junit = ET.parse(folder / "junit.xml").getroot()
        junit_status = {p.get("name"): p.get("value") for p in junit.iter("property")}["verdict"]
        report = (folder / "report.html").read_text()
        return verdict, junit_status, f"data-status='{verdict}'" in report

    tight = cli("gate", "--policy", "tight.yaml", str(folder))
    assert tight.returncode == 1 and "max_epsilon_lb" in tight.stderr, tight.stdout + tight.stderr
    assert outputs() == ("fail", "fail", True)
    lenient = cli("gate", "--policy", "lenient.yaml", str(folder / "mechanism-audit.json"))
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr  # the earlier gate does not stick
    assert outputs() == ("pass", "pass", True)


@pytest.mark.slow  # three fresh CLI processes
def test_gate_reads_the_sound_bound_of_a_whitebox_audit(cli, tmp_path):
    # σ 1, q 1, T 1: one Gaussian step, a Dirac canary separates the runs well, so the sound
    # Clopper-Pearson bound is clearly above 0.01 and below the claim (ε 4.4 at δ 1e-5).
    assert (
        cli(
            "whitebox-audit",
            "--builtin",
            "--noise-multiplier",
            "1",
            "--sample-rate",
            "1",
            "--steps",
            "1",
            "--runs",
            "400",
            "--tracking-uri",
            f"sqlite:///{tmp_path}/w.db",
        ).returncode
        == 0
    )
    (folder,) = (tmp_path / "runs").iterdir()
    result = json.loads((folder / "whitebox-audit.json").read_text())
    bound = result["epsilon_lower_bound"]
    assert 0.01 < bound < result["claimed_epsilon"]
    (tmp_path / "tight.yaml").write_text(f"rules: {{max_epsilon_lb: {bound / 2}}}\n")
    (tmp_path / "lenient.yaml").write_text(f"rules: {{max_epsilon_lb: {bound * 2}}}\n")
    tight = cli("gate", "--policy", "tight.yaml", str(folder))
    assert tight.returncode == 1 and "max_epsilon_lb" in tight.stderr, tight.stdout + tight.stderr
    assert json.loads((folder / "whitebox-audit.json").read_text())["verdict"]["status"] == "fail"
    lenient = cli("gate", "--policy", "lenient.yaml", str(folder / "whitebox-audit.json"))
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr
    assert json.loads((folder / "whitebox-audit.json").read_text())["verdict"]["status"] == "pass"
