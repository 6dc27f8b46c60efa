"""The policy gate: a YAML file of limits, checked against results.json (audit/machinery/policy.py)."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from audit.errors import AuditInputError
from audit.machinery.policy import (
    evaluate_policy,
    load_policy,
    load_results,
    policy_from_dict,
    validate_results,
)

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
STRICT = REPO / "examples" / "policy-strict.yaml"
LENIENT = REPO / "examples" / "policy-lenient.yaml"


@pytest.fixture
def default_results():
    return json.loads((DATA / "results_default_example.json").read_text())


@pytest.fixture
def smoke_results():
    return json.loads((DATA / "results_smoke_example.json").read_text())


def _policy(tmp_path, text: str, name: str = "policy.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return load_policy(path)


def _non_private(results):
    return next(t for t in results["targets"] if t["epsilon_target"] is None)


def _synthetic_entry(**changes):
    entry = {
        "generator": "copy",
        "epsilon_target": None,
        "nndr": {"p1": 0.0, "p10": 0.0, "median": 0.0},
        "dcr": {
            "dcr_share": 1.0,
            "dcr_share_ci": [0.99, 1.0],
            "median_train": 0.0,
            "median_holdout": 0.3,
            "exact_match_rate": 1.0,
        },
        "mia": {
            "auc": 0.98,
            "auc_ci": [0.97, 0.99],
            "tpr_at_fpr": {"0.001": 0.9},
            "epsilon_lb": {"clopper_pearson": 4.1},
        },
    }
    entry.update(changes)
    return entry


# --- the shipped example policies ------------------------------------------------------------


def test_strict_policy_fails_the_non_private_target_and_names_the_rule_and_the_measured_auc(default_results):
    evaluation = evaluate_policy(load_policy(STRICT), default_results)

    assert not evaluation.passed
    auc_failures = [c for c in evaluation.failures if c.rule == "max_auc"]
    assert [(c.target_label, c.attack) for c in auc_failures] == [("ε = ∞", "loss")]
    measured = _non_private(default_results)["attacks"][0]["auc"]
    assert auc_failures[0].measured == pytest.approx(measured)
    assert auc_failures[0].limit == 0.6
    assert "max_auc" in auc_failures[0].message and f"{measured:.4g}" in auc_failures[0].message
    # The DP targets are near chance: every failure is on the non-private baseline.
    assert {c.target_label for c in evaluation.failures} == {"ε = ∞"}


def test_lenient_policy_passes_the_default_and_the_smoke_run(default_results, smoke_results):
    for results in (default_results, smoke_results):
        evaluation = evaluate_policy(load_policy(LENIENT), results)
        assert evaluation.passed, [c.message for c in evaluation.failures]


def test_the_verdict_of_an_evaluation_has_the_shape_of_results_verdict(default_results):
    from audit.machinery.verdict import verdict_for_results

    decided, evaluation = verdict_for_results(default_results, load_policy(STRICT))
    verdict = decided["verdict"]
    assert verdict["status"] == "fail" and verdict["passed"] is False and verdict["policy"] == str(STRICT)
    assert all(any(c.message in reason for reason in verdict["reasons"]) for c in evaluation.failures)
    assert {r["message"] for r in verdict["rules"] if r["status"] == "failed"} == {
        c.message for c in evaluation.failures
    }
    validate_results(decided)  # still a valid results.json


# --- rules ----------------------------------------------------------------------------------


def test_an_override_for_infinity_applies_to_the_non_private_target_only(tmp_path, default_results):
    for spelling in (".inf", '"inf"', "null"):
        policy = _policy(
            tmp_path, f"rules: {{max_auc: 0.51}}\noverrides:\n  - epsilon: {spelling}\n    rules: {{max_auc: 0.7}}\n"
        )
        evaluation = evaluate_policy(policy, default_results)
        limits = {c.target_label: c.limit for c in evaluation.checks if c.rule == "max_auc"}
        assert limits["ε = ∞"] == 0.7
        assert limits["ε = 1"] == 0.51
        failed = {c.target_label for c in evaluation.failures}
        assert "ε = ∞" not in failed and "ε = 8" in failed  # 0.523 > 0.51


def test_an_override_for_a_finite_epsilon_matches_that_target(tmp_path, default_results):
    policy = _policy(tmp_path, "rules: {max_auc: 0.7}\noverrides:\n  - epsilon: 8\n    rules: {max_auc: 0.5}\n")
    evaluation = evaluate_policy(policy, default_results)
    assert [c.target_label for c in evaluation.failures] == ["ε = 8"]


def test_an_override_matching_no_target_is_reported_not_failed(tmp_path, default_results):
    policy = _policy(tmp_path, "rules: {max_auc: 0.7}\noverrides:\n  - epsilon: 3\n    rules: {max_auc: 0.5}\n")
    evaluation = evaluate_policy(policy, default_results)
    assert evaluation.passed
    unmatched = [c for c in evaluation.checks if c.rule.startswith("overrides")]
    assert (
        len(unmatched) == 1 and unmatched[0].status == "not applicable" and "matches no target" in unmatched[0].message
    )


def test_max_epsilon_lb_reads_the_best_sound_bound_and_names_its_method(tmp_path, default_results):
    evaluation = evaluate_policy(_policy(tmp_path, "rules: {max_epsilon_lb: 2.0}\n"), default_results)
    [failure] = evaluation.failures
    assert failure.rule == "max_epsilon_lb" and failure.target_label == "ε = ∞"
    assert failure.measured == pytest.approx(_non_private(default_results)["epsilon_lb_best"])
    assert "loss/clopper_pearson" in failure.message


def test_tpr_limits_are_checked_per_attack_and_level(tmp_path, smoke_results):
    evaluation = evaluate_policy(_policy(tmp_path, "rules: {max_tpr_at_fpr: {0.001: 0.01}}\n"), smoke_results)
    failing = {(c.target_label, c.attack) for c in evaluation.failures}
    expected = {
        ("ε = ∞" if t["epsilon_target"] is None else f"ε = {t['epsilon_target']:g}", a["name"])
        for t in smoke_results["targets"]
        for a in t["attacks"]
        if a["tpr_at_fpr"]["0.001"] > 0.01
    }
    assert failing == expected
    n_attacks = sum(len(t["attacks"]) for t in smoke_results["targets"])
    assert len([c for c in evaluation.checks if c.rule == "max_tpr_at_fpr[0.001]"]) == n_attacks


def test_a_tpr_level_the_results_do_not_report_is_not_applicable(tmp_path, default_results):
    evaluation = evaluate_policy(_policy(tmp_path, "rules: {max_tpr_at_fpr: {0.05: 0.0}}\n"), default_results)
    assert evaluation.passed
    assert all(
        c.status == "not applicable" and "0.05" in c.message for c in evaluation.checks if c.rule.startswith("max_tpr")
    )


def test_a_violation_fails_by_default_and_can_be_switched_off(tmp_path, default_results):
    broken = copy.deepcopy(default_results)
    target = broken["targets"][1]
    target["epsilon_lb_best"], target["epsilon_lb_best_method"], target["violation"] = 1.5, "loss/one_run", True

    evaluation = evaluate_policy(_policy(tmp_path, "rules: {max_auc: 0.9}\n"), broken)
    [failure] = evaluation.failures
    assert failure.rule == "fail_on_violation" and failure.target_label == "ε = 1"
    assert failure.measured == 1.5 and failure.limit == pytest.approx(target["epsilon_accountant"])
    assert "violation" in failure.message

    off = _policy(tmp_path, "rules: {max_auc: 0.9, fail_on_violation: false}\n", "off.yaml")
    assert evaluate_policy(off, broken).passed


def test_required_accountant_fails_a_target_accounted_otherwise(tmp_path, default_results):
    default_results["targets"][0]["accountant"] = "gdp"
    evaluation = evaluate_policy(_policy(tmp_path, "rules: {required_accountant: prv}\n"), default_results)
    [failure] = evaluation.failures
    assert failure.rule == "required_accountant" and failure.measured == "gdp" and failure.limit == "prv"
    assert any(c.rule == "required_accountant" and c.status == "not applicable" for c in evaluation.checks)


def test_synthetic_rules_without_synthetic_results_are_not_applicable_not_failures(tmp_path, default_results):
    evaluation = evaluate_policy(_policy(tmp_path, "rules: {max_dcr_share: 0.5, min_nndr_p10: 0.9}\n"), default_results)
    assert evaluation.passed
    synthetic = [c for c in evaluation.checks if c.rule in ("max_dcr_share", "min_nndr_p10")]
    assert len(synthetic) == 2
    assert all(c.status == "not applicable" and "no synthetic" in c.message for c in synthetic)


def test_a_copy_of_the_training_set_fails_the_synthetic_rules(tmp_path, default_results):
    default_results["synthetic"] = [_synthetic_entry()]
    policy = _policy(tmp_path, "rules: {max_dcr_share: 0.6, min_nndr_p10: 0.5, max_auc: 0.99}\n")
    evaluation = evaluate_policy(policy, default_results)
    failed = {c.rule: c for c in evaluation.failures}
    assert set(failed) == {"max_dcr_share", "min_nndr_p10"}
    assert failed["max_dcr_share"].measured == 1.0 and "copy" in failed["max_dcr_share"].target_label
    assert "NNDR" in failed["min_nndr_p10"].message
    # max_auc also covers the distance attack on the synthetic data (0.98 ≤ 0.99 passes here).
    assert any(c.rule == "max_auc" and c.attack == "distance" and c.passed for c in evaluation.checks)


def test_a_synthetic_entry_without_dcr_results_is_not_applicable(tmp_path, default_results):
    entry = _synthetic_entry()
    del entry["dcr"]
    default_results["synthetic"] = [entry]
    evaluation = evaluate_policy(_policy(tmp_path, "rules: {max_dcr_share: 0.6}\n"), default_results)
    [check] = [c for c in evaluation.checks if c.rule == "max_dcr_share"]
    assert check.status == "not applicable" and "'dcr'" in check.message


def test_a_synthetic_entry_without_a_dp_claim_or_computed_bounds_is_still_checked(tmp_path, default_results):
    # As audit.synthetic.synthetic_check writes it for a user's files: no epsilon_target, one-run bound not computed.
    entry = _synthetic_entry()
    del entry["epsilon_target"]
    entry["mia"]["epsilon_lb"] = {"clopper_pearson": 3.5, "one_run": None}
    entry["nndr"]["p10"] = None
    default_results["synthetic"] = [entry]
    policy = _policy(
        tmp_path,
        "rules: {max_epsilon_lb: 1.0, min_nndr_p10: 0.3}\n"
        "overrides:\n  - {epsilon: .inf, rules: {max_epsilon_lb: 3.0}}\n",
    )
    evaluation = evaluate_policy(policy, default_results)
    [bound] = [c for c in evaluation.checks if c.rule == "max_epsilon_lb" and c.attack == "distance"]
    # Clopper-Pearson over one release's records is not proven: it never gates (the verdict calls it inconclusive).
    assert bound.status == "not applicable" and "no sound" in bound.message
    entry["mia"]["epsilon_lb"] = {"clopper_pearson": 3.5, "one_run": 3.5}
    evaluation = evaluate_policy(policy, default_results)
    [bound] = [c for c in evaluation.checks if c.rule == "max_epsilon_lb" and c.attack == "distance"]
    assert not bound.passed and bound.measured == 3.5 and bound.limit == 3.0  # the ∞ override applies
    [nndr] = [c for c in evaluation.checks if c.rule == "min_nndr_p10"]
    assert nndr.status == "not applicable" and "null" in nndr.message


# --- bad input --------------------------------------------------------------------------------


BAD_POLICIES = [
    ("rules: [", "not valid YAML"),
    ("", "is empty"),
    ("- max_auc: 0.6\n", "must be a YAML mapping"),
    ("rules: {max_aucc: 0.6}\n", "rules.max_aucc"),
    ("rulez: {max_auc: 0.6}\n", "rulez"),
    ("rules: {max_auc: high}\n", "rules.max_auc"),
    ("rules: {max_auc: '0.6'}\n", "write numbers unquoted"),
    ("rules: {max_auc: 1.5}\n", "rules.max_auc"),
    ("rules: {max_epsilon_lb: -1.0}\n", "rules.max_epsilon_lb"),
    ("rules: {max_epsilon_lb: .nan}\n", "rules.max_epsilon_lb"),
    ("rules: {max_tpr_at_fpr: {1.5: 0.1}}\n", "(0, 1)"),
    ("rules: {max_tpr_at_fpr: {0.0: 0.1}}\n", "rules.max_tpr_at_fpr"),
    ("rules: {max_tpr_at_fpr: {0.01: 2.0}}\n", "rules.max_tpr_at_fpr"),
    ("rules: {max_tpr_at_fpr: 0.01}\n", "rules.max_tpr_at_fpr"),
    ("rules: {fail_on_violation: maybe}\n", "rules.fail_on_violation"),
    ("rules: {required_accountant: moments}\n", "rules.required_accountant"),
    ("rules: {}\n", "sets no rule"),
    ("rules: {max_auc: 0.6}\noverrides:\n  - epsilon: -1\n    rules: {max_auc: 0.7}\n", "overrides[0].epsilon"),
    ("rules: {max_auc: 0.6}\noverrides:\n  - epsilon: 1\n    rules: {max_aux: 0.7}\n", "overrides[0].rules.max_aux"),
    (
        "rules: {max_auc: 0.6}\noverrides:\n  - {epsilon: 1, rules: {max_auc: 0.7}}\n  - {epsilon: 1.0, rules: {max_auc: 0.8}}\n",
        "two overrides",
    ),
]


@pytest.mark.parametrize("text, expected", BAD_POLICIES)
def test_a_malformed_policy_names_the_file_and_the_field(tmp_path, text, expected):
    path = tmp_path / "my-policy.yaml"
    path.write_text(text)
    with pytest.raises(AuditInputError) as error:
        load_policy(path)
    assert "my-policy.yaml" in str(error.value)
    assert expected in str(error.value)


def test_a_missing_policy_file_is_named(tmp_path):
    with pytest.raises(AuditInputError, match="nowhere.yaml.*does not exist"):
        load_policy(tmp_path / "nowhere.yaml")


def test_a_policy_can_be_given_as_data():
    policy = policy_from_dict({"rules": {"max_auc": 0.6}, "overrides": [{"epsilon": "inf", "rules": {"max_auc": 0.8}}]})
    assert policy.rules_for(None).max_auc == 0.8
    assert policy.rules_for(math.inf).max_auc == 0.8
    assert policy.rules_for(1.0).max_auc == 0.6


def test_results_missing_a_field_a_rule_needs_name_it(tmp_path, default_results):
    del default_results["targets"][5]["attacks"][0]["auc"]
    with pytest.raises(AuditInputError, match=r"targets\[5\]\.attacks\[0\]\.auc"):
        evaluate_policy(load_policy(STRICT), default_results)


def test_results_with_a_mistyped_field_name_it(tmp_path, default_results):
    default_results["targets"][2]["violation"] = "no"
    with pytest.raises(AuditInputError, match=r"targets\[2\]\.violation"):
        evaluate_policy(load_policy(LENIENT), default_results)


def test_loading_a_results_file_checks_it_against_the_schema(tmp_path, default_results):
    good = tmp_path / "results.json"
    good.write_text(json.dumps(default_results))
    assert load_results(good)["schema_version"] == 1

    default_results["targets"][0]["attacks"][0]["auc"] = "0.5"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(default_results))
    with pytest.raises(AuditInputError, match=r"bad\.json.*targets\[0\]\.attacks\[0\]\.auc"):
        load_results(bad)

    default_results["schema_version"] = 4  # a version this reader does not know (1, 2 and 3 it reads)
    bad.write_text(json.dumps(default_results))
    with pytest.raises(AuditInputError, match="schema_version"):
        load_results(bad)

    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(AuditInputError, match="not valid JSON"):
        load_results(tmp_path / "broken.json")
    with pytest.raises(AuditInputError, match="does not exist"):
        load_results(tmp_path / "absent.json")
