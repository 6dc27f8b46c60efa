"""The per-claim vocabulary (held / refuted / untestable), the no-claim leakage statement, the blind
baseline and the outputs that show them: pure functions on real estimator outputs, no CLI."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from audit.machinery.verdict import CLAIM_STATUSES, Check, decide, recompute_verdict, verdict_for_results
from audit.machinery.verdict_words import claim_tags, status_word
from audit.statistics.attack_evaluation import evaluate_attack
from audit.statistics.attack_metrics import auc_p_value_above_chance, auc_with_ci
from audit.statistics.distribution_shift import blind_baseline
from audit.statistics.epsilon_bounds import one_run_ceiling
from audit.statistics.leakage_tests import (
    delong_p_value_from_interval,
    held_out_threshold_p_value,
    one_run_chance_p_value,
    plain_tpr_sentence,
)
from reports.junit import render_junit_xml
from reports.markdown_summary import render_summary_markdown


def _scores(rng, n=600, shift=0.0):
    members = rng.random(n) < 0.5
    return rng.normal(size=n) + shift * members, members


def _target(attack, claim):
    return {
        "epsilon_target": claim,
        "delta": 1e-5,
        "epsilon": {},
        "epsilon_accountant": claim,
        "accountant": "prv" if claim else None,
        "attacks": [attack],
        "epsilon_lb_best": None,
        "violation": False,
    }


def _results(*targets):
    return {"schema_version": 3, "config": {"attacks": {"confidence": 0.95}}, "targets": list(targets), "synthetic": []}


def _attack(rng, shift, n=600, randomized=True):
    scores, members = _scores(rng, n, shift)
    return evaluate_attack(
        "loss",
        scores,
        members,
        np.zeros(n, dtype=int),
        delta=1e-5,
        confidence=0.95,
        threshold_seed=0,
        accountant_epsilon=None,
        membership_randomized=randomized,
    )


# --- the tests of chance, against their references ----------------------------------------------


def test_the_delong_p_value_from_the_stored_interval_matches_the_one_from_the_scores():
    rng = np.random.default_rng(1)
    for shift in (0.1, 0.3, 0.6):
        scores, members = _scores(rng, 800, shift)
        auc, ci = auc_with_ci(scores, members, confidence=0.95)
        assert math.isclose(
            delong_p_value_from_interval(auc, ci, 0.95),
            auc_p_value_above_chance(scores, members),
            rel_tol=1e-6,
            abs_tol=1e-12,
        )
    assert delong_p_value_from_interval(0.4, [0.3, 0.5], 0.95) == 1.0
    assert delong_p_value_from_interval(None, [0.3, 0.5], 0.95) is None


def test_the_held_out_threshold_test_is_fishers_exact_test_of_its_evaluation_counts():
    from scipy import stats

    details = {"false_positives": 3, "n_nonmembers": 300, "false_negatives": 270, "n_members": 300}
    expected = stats.fisher_exact([[30, 270], [3, 297]], alternative="greater").pvalue
    assert held_out_threshold_p_value(details) == pytest.approx(expected)
    assert held_out_threshold_p_value({"false_positives": 1}) is None


def test_the_one_run_chance_test_and_the_plain_sentence():
    rng = np.random.default_rng(2)
    strong = _attack(rng, 3.0)
    assert one_run_chance_p_value(strong["epsilon_lb_details"]["one_run"]) < 1e-6
    assert one_run_chance_p_value("not computed") is None
    assert plain_tpr_sentence(0.094, 0.01) == (
        "an attacker who accepts 1 false accusation in 100 identifies 9.4 % of the training records"
    )


@pytest.mark.slow
def test_the_leakage_statement_false_alarm_rate_on_null_scores_is_at_most_5_percent():
    # No signal at all: every LEAKS is a false alarm of the Holm family of one subject.
    rng = np.random.default_rng(2026)
    repeats = 200
    leaks = sum(
        recompute_verdict(_results(_target(_attack(rng, 0.0, 400), None)))["leakage"][0]["status"] == "leaks"
        for _ in range(repeats)
    )
    assert leaks / repeats <= 0.05, f"{leaks} false alarms in {repeats}"


# --- the vocabulary ------------------------------------------------------------------------------


def test_a_model_without_a_claim_gets_a_leakage_statement_never_a_pass():
    rng = np.random.default_rng(3)
    leaky = recompute_verdict(_results(_target(_attack(rng, 2.0), None)))
    assert leaky["status"] == "no_claim" and leaky["passed"] is False and leaky["claims"] == []
    (entry,) = leaky["leakage"]
    assert entry["status"] == "leaks" and status_word("no_claim", leaky) == "LEAKS"
    assert "identifies" in entry["statement"] and "assumes" in entry["statement"]
    quiet = recompute_verdict(_results(_target(_attack(rng, 0.0), None)))
    assert quiet["leakage"][0]["status"] == "no_significant_leakage"
    assert status_word("no_claim", quiet) == "NO SIGNIFICANT LEAKAGE FOUND" and quiet["passed"] is False
    # --fail-on-leak: a leak fails; no leak stays a statement (exit 0)
    results = _results(_target(_attack(rng, 2.0), None))
    assert recompute_verdict(results, fail_on_leak=True)["status"] == "fail"
    assert recompute_verdict(_results(_target(_attack(rng, 0.0), None)), fail_on_leak=True)["status"] == "no_claim"


def test_each_claim_gets_one_status_and_the_top_line_follows():
    rng = np.random.default_rng(4)
    m = 600
    assert one_run_ceiling(m, 1e-5, 0.05 / 2) > 1.0 and one_run_ceiling(m, 1e-5, 0.05) < 8.0
    held = _target(_attack(rng, 0.0, m), 1.0)
    untestable = _target(_attack(rng, 0.0, m), 8.0)
    refuted = _target(_attack(rng, 4.0, m), 0.5)
    verdict = recompute_verdict(_results(held, untestable))
    # membership attacks on the released model could refute the ε = 1 claim (ceiling above it) but have
    # no power against every violation: "not refuted", never held (docs/verdict.md "Power")
    assert [c["status"] for c in verdict["claims"]] == ["not_refuted", "untestable"]
    assert verdict["claims"][0]["power"]["kind"] == "none" and verdict["claims"][0]["power"]["decider"]
    assert verdict["status"] == "inconclusive" and verdict["passed"] is False
    assert verdict["claims"][1]["ceiling"] < 8.0 and verdict["claims"][1]["needed"].startswith("needs")
    assert recompute_verdict(_results(held))["status"] == "inconclusive"
    failed = recompute_verdict(_results(held, refuted))
    assert [c["status"] for c in failed["claims"]] == ["not_refuted", "refuted"] and failed["status"] == "fail"
    assert failed["counts"] == {"held": 0, "not_refuted": 1, "refuted": 1, "untestable": 0}
    # held needs a passing check with power; a passing check without power leaves the claim not refuted
    proven = {"kind": "proven", "detail": "d", "figure": None, "decider": ""}
    none = {"kind": "none", "detail": "cannot see x", "figure": None, "decider": "mode y decides"}
    rows = decide(
        [
            Check("t", "a", "ok", p_value=0.9, claim="c", power=proven),
            Check("t", "b", "ok too", p_value=0.8, claim="c", power=none),
        ]
    )
    assert [c["status"] for c in rows["claims"]] == ["held"] and rows["status"] == "pass"
    rows = decide([Check("t", "b", "ok", p_value=0.8, claim="c", power=none)])
    assert [c["status"] for c in rows["claims"]] == ["not_refuted"] and rows["status"] == "inconclusive"
    # a claim is decided by all its tests together: one test that could have refuted it (and did not)
    # makes it held, even beside a test without power (docs/verdict.md); without any, it is untestable
    rows = decide(
        [Check("t", "a", "could", p_value=0.9, claim="c"), Check("t", "b", "could not", inconclusive=True, claim="c")]
    )
    assert [c["status"] for c in rows["claims"]] == ["held"]
    rows = decide(
        [
            Check("t", "b", "could not", inconclusive=True, claim="c"),
            Check("t", "d", "could not either", inconclusive=True, claim="c"),
        ]
    )
    assert [c["status"] for c in rows["claims"]] == ["untestable"]


def test_a_claim_without_coin_flip_membership_is_untestable_and_says_what_would_make_it_testable():
    rng = np.random.default_rng(5)
    verdict = recompute_verdict(_results(_target(_attack(rng, 0.0, randomized=False), 1.0)))
    (claim,) = verdict["claims"]
    assert claim["status"] == "untestable" and "coin flip" in claim["needed"]


def test_junit_cases_equal_the_claims_and_the_tags_agree():
    rng = np.random.default_rng(6)
    decided, _ = verdict_for_results(
        _results(_target(_attack(rng, 0.0), 1.0), _target(_attack(rng, 0.0), 8.0), _target(_attack(rng, 2.0), None))
    )
    verdict = decided["verdict"]
    root = ET.fromstring(render_junit_xml(decided).encode())
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == len(verdict["claims"]) == 2
    assert (
        sum(c.find("skipped") is not None for c in cases)
        == verdict["counts"]["untestable"] + verdict["counts"]["not_refuted"]
        == 2
    )
    assert sum(c.find("failure") is not None for c in cases) == 0
    properties = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert properties["passed"] == "false" and properties["verdict"] == "inconclusive"
    assert properties["leakage.00"].startswith("leaks:")  # shown, not a passing case
    tags = claim_tags(verdict)
    assert tags["verdict.claim.00"].startswith("not refuted:") and tags["verdict.claim.01"].startswith(
        "untestable here:"
    )
    assert tags["verdict.leakage.00"].startswith("leaks:") and tags["verdict.headline"] == "INCONCLUSIVE"
    summary = render_summary_markdown(decided)
    assert "no DP claim · LEAKS" in summary and "violation" not in summary.lower().split("<sub>")[0]


def test_an_old_results_file_is_read_and_its_verdict_recomputed_in_the_new_words():
    import json
    from pathlib import Path

    old = json.loads((Path(__file__).parent / "data" / "results_default_example.json").read_text())
    assert old["schema_version"] == 1 and "status" not in old["verdict"]
    verdict = recompute_verdict(old)
    assert verdict["status"] in ("pass", "inconclusive", "fail") and verdict["passed"] is (verdict["status"] == "pass")
    assert {c["status"] for c in verdict["claims"]} <= set(CLAIM_STATUSES)
    assert verdict["leakage"][0]["subject"] == f"targets[{len(old['targets']) - 1}]"  # the ε = ∞ target


# --- the blind baseline --------------------------------------------------------------------------


def test_the_blind_baseline_flags_member_sets_that_differ_in_distribution():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(400, 6))
    members = rng.random(400) < 0.5
    x[members, 0] += 1.0  # the members file comes from elsewhere
    shifted = blind_baseline(x, rng.integers(0, 2, 400), members, seed=0)
    assert shifted["separates"] and shifted["auc"] > 0.6 and shifted["p_value"] < 0.05
    target = _target(_attack(rng, 2.0, 400), None)
    target["blind_baseline"] = shifted
    (entry,) = recompute_verdict(_results(target))["leakage"]
    assert entry["confounded"] and "CONFOUNDED" in entry["statement"]


@pytest.mark.slow
def test_the_blind_baseline_false_alarm_rate_on_one_distribution_is_at_most_5_percent():
    rng = np.random.default_rng(8)
    repeats = 100
    alarms = sum(
        blind_baseline(rng.normal(size=(300, 5)), rng.integers(0, 2, 300), rng.random(300) < 0.5, seed=r)["separates"]
        for r in range(repeats)
    )
    assert alarms / repeats <= 0.05, f"{alarms} of {repeats}"


# --- the rows, replayed on the outputs that read them --------------------------------------


def test_a_refuted_profile_reads_refuted_everywhere_with_its_deciding_statistic_and_each_reason_once():
    # canary-audit (profile mode) on a trainer whose output falls below the claim's curve while its
    # (ε, δ) bound stays below the claim: the table must not contradict the verdict.
    from audit.dp_validation.scope import profile_verdict
    from audit.machinery.single_audit_verdicts import single_audit_verdict
    from audit.statistics.tradeoff_curves import (
        HIGH,
        ProfileRule,
        dpsgd_privacy_profile,
        profile_test,
        tangent_test_ceiling,
    )
    from reports.audit_report import render_audit_report

    profile = dpsgd_privacy_profile(1.0, 0.25, 20)
    rng = np.random.default_rng(0)
    test = profile_test(rng.normal(4, 1, 60), rng.normal(0, 1, 60), ProfileRule(2.0, HIGH, 1.0), profile)
    own = profile_verdict(test, tangent_test_ceiling(profile, 60, 60), claimed_epsilon=1.0, delta=1e-5, n_runs=120)
    own["reasons"] = own["reasons"] * 2  # an audit that repeats itself: the outputs say it once
    result = {
        "trainer": "demo:trainer",
        "mode": "profile",
        "claimed_epsilon": 1.0,
        "delta": 1e-5,
        "confidence": 0.95,
        "epsilon_lower_bound": 0.3194,
        "ceiling": 2.0,
        "violation": False,
        "profile_test": test,
        "verdict": own,
    }
    verdict = single_audit_verdict("canary-audit", result)
    assert verdict["status"] == "fail" and [c["status"] for c in verdict["claims"]] == ["refuted"]
    html = render_audit_report("canary-audit", {**result, "verdict": verdict})
    assert "violation" not in html.lower().replace("violations", "")
    assert f"p = {test['p_value']:.4g}" in html and "δ (shown beside: the curve test decides)" in html
    assert html.count("the claim (ε 1.000 at δ 1e-05) sets that floor") == 1  # the reason, said once


def test_conformance_is_a_family_of_statistical_checks_at_alpha():
    from audit.machinery.single_audit_verdicts import single_audit_verdict

    result = {
        "alpha": 0.01,
        "checks": [
            {"check": "noise_std", "passed": False, "detail": "one-sided z = 5.0"},
            {"check": "clipping", "passed": True, "detail": "ok"},
        ],
    }
    verdict = single_audit_verdict("conformance", result)
    assert "family of 2 statistical checks at family-wise α 0.01" in verdict["family_wise_error"]["statement"]
    assert "deterministic" not in str(verdict)
    assert [c["status"] for c in verdict["claims"]] == ["refuted", "held"] and verdict["status"] == "fail"


def test_a_tie_or_saturation_field_on_an_attack_becomes_a_note_naming_target_and_attack():
    rng = np.random.default_rng(9)
    attack = _attack(rng, 0.0)
    attack["score_ties"] = {"note": "1431 of 2400 scores tie at one value", "flattens": True}
    verdict = recompute_verdict(_results(_target(attack, 1.0)))
    assert "ε = 1, loss: score ties: 1431 of 2400 scores tie at one value" in verdict["notes"]
    attack["score_ties"] = {"note": "no tie that matters", "flattens": False}
    assert not recompute_verdict(_results(_target(attack, 1.0)))["notes"]


def test_a_pass_beside_a_leaking_baseline_says_it_covers_the_dp_claims_only(capsys):
    from audit.cli.output import print_verdict
    from reports.html_report import render_html_report

    rng = np.random.default_rng(11)
    decided, _ = verdict_for_results(_results(_target(_attack(rng, 0.0), 1.0), _target(_attack(rng, 2.0), None)))
    # the claim held by a check with proven power (as a Dirac twin's), beside the leaking baseline
    decided["verdict"] = decide(
        [
            Check(
                "targets[0]",
                "twin",
                "ok",
                p_value=0.9,
                claim="ε = 1: (ε 1, δ 1e-05)-DP",
                power={"kind": "proven", "detail": "d", "figure": None, "decider": ""},
            )
        ],
        leakage=decided["verdict"]["leakage"],
    )
    assert decided["verdict"]["status"] == "pass"
    print_verdict(decided)
    top = capsys.readouterr().out.strip().splitlines()[-1]
    assert top.startswith("PASS") and "PASS covers the DP claims only" in top and top.endswith("LEAKS")
    assert "PASS covers the DP claims only" in render_summary_markdown(decided)
    assert "PASS covers the DP claims only" in render_html_report(decided)
    quiet, _ = verdict_for_results(_results(_target(_attack(rng, 0.0), 1.0)))  # nothing leaks: no caveat
    assert "covers the DP claims only" not in render_summary_markdown(quiet)
