"""`max_canary_tpr_at_fpr`: a release criterion on the secrets the audit planted (Secret-Sharer-style, Carlini et
al. 2019), read from the planted-canary rows that `max_auc` / `max_tpr_at_fpr` leave out — checked on the stored
results of a real `run --preset llm` and on a run without canaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit.errors import AuditInputError
from audit.machinery.leakage import planted_canaries
from audit.machinery.policy import evaluate_policy, load_policy

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def llm_results() -> dict:
    return json.loads((DATA / "results_llm_example.json").read_text())


def _policy(tmp_path: Path, text: str):
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return load_policy(path)


def _label(target: dict) -> str:
    return "ε = ∞" if target["epsilon_target"] is None else f"ε = {target['epsilon_target']:g}"


def test_each_canary_row_is_checked_at_each_level_and_fails_where_its_tpr_exceeds_the_limit(tmp_path, llm_results):
    limit = 0.05
    evaluation = evaluate_policy(
        _policy(tmp_path, f"rules: {{max_canary_tpr_at_fpr: {{0.01: {limit}}}}}\n"), llm_results
    )
    checks = [c for c in evaluation.checks if c.rule == "max_canary_tpr_at_fpr[0.01]"]
    rows = [(t, a) for t in llm_results["targets"] for a in t["attacks"] if planted_canaries(a)]
    assert len(checks) == len(rows) > 0
    expected_failures = {(_label(t), a["name"]) for t, a in rows if a["tpr_at_fpr"]["0.01"] > limit}
    assert {(c.target_label, c.attack) for c in checks if not c.passed} == expected_failures
    # The ε = ∞ fine-tunings memorise their Panda canaries (TPR 1): a criterion set for every target fails them.
    assert expected_failures and all(label == "ε = ∞" for label, _ in expected_failures)
    assert not evaluation.passed
    failed = next(c for c in checks if not c.passed)
    assert "share of the planted canaries identified (TPR) at FPR 0.01" in failed.message
    assert f"> {limit:g}" in failed.message


def test_set_for_the_dp_targets_only_it_passes_a_run_whose_dp_fine_tunings_keep_their_canaries(tmp_path, llm_results):
    text = (
        "rules: {max_canary_tpr_at_fpr: {0.01: 0.05}}\n"
        "overrides:\n  - epsilon: .inf\n    rules: {max_canary_tpr_at_fpr: {0.01: 1.0}}\n"
    )
    evaluation = evaluate_policy(_policy(tmp_path, text), llm_results)
    dp_checks = [c for c in evaluation.checks if c.rule.startswith("max_canary") and c.target_label != "ε = ∞"]
    assert dp_checks and all(c.passed and c.applicable for c in dp_checks)
    # The lifted limit (1) says so: no "passed" for a control whose canaries are all found.
    lifted = [c for c in evaluation.checks if c.rule.startswith("max_canary") and c.target_label == "ε = ∞"]
    assert lifted and all(not c.applicable and "no limit here" in c.message for c in lifted)
    assert evaluation.passed


def test_the_training_record_rules_still_leave_canary_rows_out(tmp_path, llm_results):
    evaluation = evaluate_policy(_policy(tmp_path, "rules: {max_tpr_at_fpr: {0.01: 0.05}}\n"), llm_results)
    assert all(not c.applicable for c in evaluation.checks if c.rule.startswith("max_tpr_at_fpr"))
    assert not any(c.rule.startswith("max_canary") for c in evaluation.checks)


def test_a_run_without_planted_canaries_lists_the_rule_as_not_applicable_per_target(tmp_path):
    results = json.loads((DATA / "results_default_example.json").read_text())
    evaluation = evaluate_policy(_policy(tmp_path, "rules: {max_canary_tpr_at_fpr: {0.01: 0.0}}\n"), results)
    checks = [c for c in evaluation.checks if c.rule.startswith("max_canary")]
    assert len(checks) == len(results["targets"])
    assert all(not c.applicable and "no rows of planted canaries" in c.message for c in checks)
    assert evaluation.passed


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        ("{0.01: 1.5}", "TPR limit"),
        ("{1.5: 0.1}", "must be in (0, 1)"),
        ("0.05", "max_canary_tpr_at_fpr"),
    ],
)
def test_a_malformed_canary_rule_names_the_rule(tmp_path, rule, field):
    with pytest.raises(AuditInputError) as raised:
        _policy(tmp_path, f"rules: {{max_canary_tpr_at_fpr: {rule}}}\n")
    assert "max_canary_tpr_at_fpr" in str(raised.value) and field in str(raised.value)


def test_gate_exits_1_on_a_planted_secret_found_and_0_when_the_criterion_spares_the_power_controls(
    tmp_path, cli_in_process
):
    results = tmp_path / "results.json"
    results.write_text((DATA / "results_llm_example.json").read_text())
    every_target = tmp_path / "every.yaml"
    every_target.write_text("rules: {max_canary_tpr_at_fpr: {0.01: 0.05}}\n")
    dp_only = tmp_path / "dp.yaml"
    dp_only.write_text(
        every_target.read_text() + "overrides: [{epsilon: .inf, rules: {max_canary_tpr_at_fpr: {0.01: 1}}}]\n"
    )
    every = cli_in_process("gate", "--policy", str(every_target), str(results), "--out", str(tmp_path / "every"))
    assert every.returncode == 1
    said = every.stdout + every.stderr
    assert "rule failed: ε = ∞, attack canary_panda_full: share of the planted canaries identified (TPR)" in said
    assert f"FAIL (policy {every_target})" in said
    spared = cli_in_process("gate", "--policy", str(dp_only), str(results), "--out", str(tmp_path / "dp"))
    assert spared.returncode == 0, spared.stdout + spared.stderr
    assert f"PASS (policy {dp_only})" in spared.stdout + spared.stderr
