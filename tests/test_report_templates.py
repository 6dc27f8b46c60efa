"""Each kind of audit gets a report that speaks of what it audited, with rounded numbers and no raw dump."""

from __future__ import annotations

import json
import re

from reports.audit_report import render_audit_report
from reports.html_report import render_html_report, write_html_report
from tests.conftest import REPO


def _synth_check_results(passed: bool = True) -> dict:
    entry = {
        "generator": "user-supplied (synth.csv)",
        "epsilon_target": None,
        "passed": passed,
        "nndr": {"p10": 0.31862872213468413, "median": 0.7083014442220334},
        "dcr": {
            "dcr_share": 0.5025,
            "dcr_share_ci": [0.45238987122811436, 0.5525728784116304],
            "n_train": 400,
            "n_holdout": 400,
            "n_synthetic": 400,
            "confidence": 0.95,
            "exact_match_rate": 0.0,
        },
        "mia": {
            "auc": 0.501103125,
            "auc_ci": [0.461, 0.541],
            "tpr_at_fpr": {"0.001": 0.0},
            "epsilon_lb": {"clopper_pearson": 0.0, "one_run": None},
        },
        "flags": [] if passed else [{"check": "exact_matches", "message": "12% of synthetic rows copy a training row"}],
    }
    return {
        "schema_version": 1,
        "config": {
            "name": "synth-check",
            "train": "train.csv",
            "holdout": "holdout.csv",
            "synthetic": "synth.csv",
            "delta": 1e-5,
            "seed": 0,
            "claimed_epsilon": None,
            "membership_randomized": False,
        },
        "data": {"description": "user-supplied train / holdout / synthetic tables"},
        "attacks_run": ["distance"],
        "targets": [],
        "synthetic": [entry],
        "notes": [],
        "verdict": {"passed": passed, "policy": None, "reasons": [f["message"] for f in entry["flags"]]},
        "mlflow": {"tracking_uri": "sqlite:////tmp/m.db", "parent_run_id": "abc"},
    }


def _visible_text(page: str) -> str:
    return re.sub(r"<[^>]+>", " ", re.sub(r"<style>.*?</style>", "", page, flags=re.S))


def test_a_synth_check_report_speaks_of_the_release_not_of_model_targets():
    text = _visible_text(render_html_report(_synth_check_results()))
    for model_only in ("Accountant", "0 of 0 targets", "Poisson", "coin flip", "ε = ∞"):
        assert model_only not in text, model_only
    assert "train.csv" in text and "holdout.csv" in text and "synth.csv" in text
    assert "none claimed" in text and "PASS" in text


def test_a_flagged_synthetic_release_fails_with_its_reason():
    text = _visible_text(render_html_report(_synth_check_results(passed=False)))
    assert "FAIL" in text and "copy a training row" in text


def test_the_model_report_keeps_its_own_sections():
    results = json.loads((REPO / "tests" / "data" / "results_default_example.json").read_text())
    text = _visible_text(render_html_report(results))
    assert "Accountant" in text and "Attack details" in text


def test_the_split_counts_add_up_and_say_where_the_training_set_comes_from(tmp_path):
    results = json.loads((REPO / "tests" / "data" / "results_default_example.json").read_text())
    data = results["data"]
    text = _visible_text(write_html_report(results, None, out_dir=tmp_path).read_text())
    assert (
        f"{data['n_rows']} total = {data['n_test']} utility test + {data['n_candidates']} audit candidates + "
        f"{data['n_pool']} population pool" in text
    )
    assert f"{data['n_candidates'] - data['n_train']} are its non-members" in text


def test_a_canary_report_is_one_page_of_rounded_numbers_without_a_json_dump():
    scores = [0.123456789 * i for i in range(200)]
    result = {
        "audit": "canary, multi-run",
        "trainer": "my_module:train",
        "claimed_epsilon": 1.0,
        "delta": 1e-5,
        "epsilon_lower_bound": 2.345678901234,
        "confidence": 0.95,
        "violation": True,
        "canary": {"kind": "mislabeled", "source_row": 17},
        "scores": {"with_canary": scores, "without_canary": scores},
        "n_models_per_side": 100,
    }
    page = render_audit_report("canary-audit", result)
    text = _visible_text(page)
    assert "FAIL" in text and "2.346" in text and "2.345678901234" not in text
    assert "24.56" not in text  # no per-run score printed
    assert "200 values (in canary-audit.json)" in text
    assert "{" not in text and len(page) < 8000


def test_an_accountant_check_report_lists_its_grid_points_rounded():
    point = {
        "noise_multiplier": 1.0,
        "sample_rate": 0.01,
        "steps": 1000,
        "delta": 1e-5,
        "reported": 0.91234567,
        "pld_lower": 1.8234567,
        "pld_upper": 1.8334567,
        "label": "unsound",
        "message": "…",
    }
    result = {
        "accountant": "m:halved",
        "margin": 0.1,
        "counts": {"ok": 0, "loose": 0, "unsound": 1, "invalid": 0},
        "passed": False,
        "points": [point],
    }
    text = _visible_text(render_audit_report("accountant-check", result))
    assert "FAIL" in text and "0.9123" in text and "1.823" in text and "0.91234567" not in text
    assert "unsound" in text


def test_the_pull_request_summary_of_a_user_release_says_no_epsilon_was_claimed():
    from reports.markdown_summary import render_summary_markdown

    summary = render_summary_markdown(_synth_check_results())
    assert "none claimed" in summary and "| ∞ |" not in summary
