"""The HTML report, the pull-request summary and the JUnit file (reports/)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from audit.machinery.policy import load_policy
from audit.machinery.verdict import verdict_for_results
from reports.figures import RocCurve, plot_empirical_vs_accountant, plot_privacy_utility, plot_roc_curves
from reports.html_report import render_html_report, write_html_report
from reports.junit import render_junit_xml, write_junit_xml
from reports.markdown_summary import render_summary_markdown

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
STRICT = REPO / "examples" / "policy-strict.yaml"
LENIENT = REPO / "examples" / "policy-lenient.yaml"
CHROMIUM = Path("/usr/bin/chromium")
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def _results() -> dict:
    return json.loads((DATA / "results_default_example.json").read_text())


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A run folder like the runner writes: results.json and figures/ (ROC, ε vs ε, utility, a synthetic panel)."""
    folder = tmp_path_factory.mktemp("run")
    results = _results()
    (folder / "results.json").write_text(json.dumps(results, indent=2))
    figures = folder / "figures"
    figures.mkdir()
    grid = np.linspace(0, 1, 50)
    for tag in ("0.5", "1", "2", "4", "8", "inf"):
        plot_roc_curves([RocCurve("loss", grid, grid)], figures / f"roc_eps_{tag}.png", title=f"ROC {tag}")
    plot_roc_curves([RocCurve("loss", grid, np.sqrt(grid))], figures / "roc_all.png", title="all")
    private = [t for t in results["targets"] if t["epsilon_target"] is not None]
    plot_empirical_vs_accountant(
        [t["epsilon_accountant"] for t in private],
        [t["epsilon_lb_best"] for t in private],
        [str(t["epsilon_target"]) for t in private],
        figures / "empirical_vs_accountant.png",
    )
    plot_privacy_utility(
        [t["epsilon_target"] for t in results["targets"]],
        [t["test_accuracy"] for t in results["targets"]],
        [t["attacks"][0]["auc"] for t in results["targets"]],
        figures / "privacy_utility.png",
    )
    shutil.copy(figures / "roc_all.png", figures / "synthetic_dcr.png")
    return folder


def _target_rows(page: str) -> list[str]:
    table = re.search(r'<table class="targets">.*?<tbody>(.*?)</tbody></table>', page, re.S).group(1)
    # Only the outer rows: each holds the attacks as a nested table.
    return re.findall(r"<tr><td><strong>", table)


def _external_resources(page: str) -> list[str]:
    patterns = [r'src="(?!data:)', r"<link\b", r"<script\b", r"url\(", r"@import", r'href="https?:']
    return [p for p in patterns if re.search(p, page, re.I)]


# --- HTML report ------------------------------------------------------------------------------


def test_the_html_report_contains_the_verdict_one_row_per_target_inline_figures_and_no_external_resources(run_dir):
    results, _ = verdict_for_results(_results())
    page = render_html_report(results, run_dir)

    word = {"pass": "PASS", "fail": "FAIL", "inconclusive": "INCONCLUSIVE"}[results["verdict"]["status"]]
    assert 'id="verdict"' in page and f'<div class="word">{word}</div>' in page and "What decides the verdict" in page
    assert len(_target_rows(page)) == len(results["targets"]) == 6
    n_figures = len(list((run_dir / "figures").glob("*.png")))
    assert page.count('<img src="data:image/png;base64,') == n_figures == 10
    assert "Synthetic data: dcr" in page
    assert _external_resources(page) == []
    # The numbers a reviewer signs off: accountant ε, PLD ε, best bound with method, ratio, accuracy, AUC CI, TPR.
    eps_inf = results["targets"][5]
    for text in (
        "0.493",
        "0.483",
        "2.83",
        "loss, Clopper-Pearson",
        f"{eps_inf['test_accuracy']:.3f}",
        "0.632",
        "(0.61–0.65)",
        "0.0017",
    ):
        assert text in page, text


def test_the_report_states_what_a_lower_bound_does_and_does_not_prove():
    page = render_html_report(_results(), None)
    for text in (
        "Yeom",
        "Shokri",
        "Carlini",
        "Zarifzadeh",
        "A lower bound of 0 is not a proof of privacy",
        "Poisson sampling",
        "coin",
        "95 %",
        "assumes</em> the mechanism's trade-off curve is Gaussian",
        "never decides a verdict",
    ):
        assert text in page, text


def test_the_report_carries_what_is_needed_to_reproduce_the_run(run_dir):
    results = _results()
    page = render_html_report(results, run_dir)
    assert "b2164ed7ed0b" in page  # config hash = AuditConfig.config_hash() of the resolved config
    assert results["mlflow"]["parent_run_id"] in page
    assert all(run_id in page for run_id in results["mlflow"]["child_run_ids"])
    assert results["mlflow"]["tracking_uri"] in page
    assert "torch 2.13.0+cpu" in page and "hidden_sizes: [256, 256]" in page
    assert str(results["targets"][0]["seed"]) in page
    assert "results.json SHA-256" in page  # ties the signature to the file next to the report


def test_without_a_run_folder_the_report_redraws_what_results_json_allows():
    page = render_html_report(_results(), None)
    assert page.count('<img src="data:image/png;base64,') == 2  # ε vs ε and privacy-utility
    assert "redrawn from results.json" in page
    assert "ROC curves" in page and "Not available in this rendering" in page
    assert _external_resources(page) == []


def test_user_controlled_names_are_escaped(run_dir):
    results = _results()
    results["config"]["name"] = HOSTILE
    results["attacks_run"] = [HOSTILE]
    results["targets"][0]["attacks"][0]["name"] = HOSTILE
    results["notes"] = [HOSTILE]
    results["data"]["description"] = HOSTILE
    results["synthetic"] = [{"generator": HOSTILE, "epsilon_target": 1.0}]
    results["verdict"] = {"passed": False, "policy": HOSTILE, "reasons": [HOSTILE]}
    page = render_html_report(results, run_dir)
    assert "<script" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page


@pytest.mark.parametrize(
    "verdict, banner",
    [
        (
            {
                "status": "pass",
                "passed": True,
                "policy": "examples/policy-lenient.yaml",
                "reasons": [],
                "decided_by": "policy examples/policy-lenient.yaml",
            },
            ("pass", "PASS"),
        ),
        (
            {
                "status": "fail",
                "passed": False,
                "policy": "examples/policy-strict.yaml",
                "reasons": ["ε = ∞: AUC too high"],
                "decided_by": "policy examples/policy-strict.yaml",
            },
            ("fail", "FAIL"),
        ),
        (
            {
                "status": "inconclusive",
                "passed": True,
                "policy": None,
                "reasons": ["ε = 8: ceiling 2.2 ≤ claim"],
                "decided_by": "built-in checks",
            },
            ("none", "INCONCLUSIVE"),
        ),
        (
            {
                "status": "fail",
                "passed": False,
                "policy": None,
                "reasons": ["ε target 1: bound exceeds ε"],
                "decided_by": "built-in checks",
            },
            ("fail", "FAIL"),
        ),
    ],
)
def test_the_verdict_banner_says_pass_fail_or_inconclusive_with_the_reasons(verdict, banner):
    results = _results()
    results["verdict"] = verdict
    page = render_html_report(results, None)
    kind, word = banner
    assert (
        f'<section class="verdict {kind}" id="verdict" data-status="{verdict["status"]}"><div class="word">{word}</div>'
        in page
    )
    for reason in verdict["reasons"]:
        assert reason in page
    if verdict["policy"]:
        assert verdict["policy"] in page


def test_a_policy_evaluation_is_listed_check_by_check_failures_first():
    results = _results()
    results, evaluation = verdict_for_results(results, load_policy(STRICT))
    page = render_html_report(results, None, evaluation=evaluation)
    section = page[page.index('id="policy"') :]
    assert section.count('<tr><td><span class="badge') == len(evaluation.checks)
    assert section.index(">failed<") < section.index(">passed<")  # failed rules first
    # The same table comes back from results.json alone when the evaluation was stored in it.
    results["policy_evaluation"] = evaluation.as_dict()
    again = render_html_report(json.loads(json.dumps(results)), None)
    assert again[again.index('id="policy"') :].count('<tr><td><span class="badge') == len(evaluation.checks)


def test_the_synthetic_section_appears_only_with_synthetic_results():
    results = _results()
    assert 'id="synthetic"' not in render_html_report(results, None)
    results["synthetic"] = [
        {
            "generator": "ctgan",
            "epsilon_target": 1.0,
            "nndr": {"p1": 0.1, "p10": 0.42, "median": 0.8},
            "dcr": {
                "dcr_share": 0.57,
                "dcr_share_ci": [0.53, 0.61],
                "median_train": 0.2,
                "median_holdout": 0.25,
                "exact_match_rate": 0.0,
            },
            "mia": {
                "auc": 0.55,
                "auc_ci": [0.52, 0.58],
                "tpr_at_fpr": {"0.001": 0.002},
                "epsilon_lb": {"clopper_pearson": 0.3},
            },
        },
        {
            "generator": "partial",
            "epsilon_target": None,
            "mia": {"epsilon_lb": {"clopper_pearson": 0.0, "one_run": None}},
            "flags": [{"check": "exact_copies", "message": "12 training rows copied <exactly>"}],
            "passed": False,
        },
    ]
    page = render_html_report(results, None)
    section = page[page.index('id="synthetic"') : page.index("</section>", page.index('id="synthetic"'))]
    for text in (
        "ctgan",
        "0.420",
        "0.570",
        "(0.530–0.610)",
        "0.550",
        "partial",
        "flagged",
        "12 training rows copied &lt;exactly&gt;",
    ):
        assert text in section, text


def test_results_of_other_producers_render(tmp_path):
    minimal = {
        "schema_version": 1,
        "config": {},
        "environment": {},
        "targets": [],
        "synthetic": [],
        "verdict": {"passed": True, "policy": None, "reasons": []},
    }
    page = render_html_report(minimal, None)
    assert '<div class="word">PASS</div>' in page and "No trained targets" in page
    assert render_summary_markdown(minimal).startswith("### ✅")

    scores = _results()  # shaped like `audit-scores`: one claimed ε, no training, one-run not computed
    scores["targets"] = [scores["targets"][1]]
    scores["targets"][0].update(
        {
            "accountant": "claimed",
            "epsilon": {"claimed": 1.0},
            "epsilon_accountant": 1.0,
            "test_accuracy": None,
            "noise_multiplier": None,
            "poisson_sampling": None,
        }
    )
    scores["targets"][0]["attacks"][0]["epsilon_lb"]["one_run"] = None
    scores["config"] = {"name": "scores", "delta": 1e-5, "confidence": 0.95}
    scores["data"] = {"description": "scores from s.csv", "n_candidates": 2400}
    page = render_html_report(scores, tmp_path)
    assert "claimed ε" in page and "Candidates" in page
    assert len(_target_rows(page)) == 1


def test_write_html_report_replaces_report_html_in_one_step(tmp_path):
    (tmp_path / "report.html").write_text("old")
    path = write_html_report(_results(), tmp_path)
    assert path == tmp_path / "report.html"
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]  # no temp file left behind


def test_a_report_can_be_written_elsewhere_with_the_run_folders_figures(run_dir, tmp_path):
    path = write_html_report(_results(), run_dir, out_dir=tmp_path / "out")
    assert path == tmp_path / "out" / "report.html"
    assert path.read_text(encoding="utf-8").count("data:image/png;base64,") == 10
    assert not (run_dir / "report.html").exists()


# --- Markdown summary -------------------------------------------------------------------------


def test_the_markdown_summary_has_the_verdict_one_row_per_target_and_the_failed_rules():
    results = _results()
    results, evaluation = verdict_for_results(results, load_policy(STRICT))
    text = render_summary_markdown(results, evaluation=evaluation)
    assert text.splitlines()[0].startswith("### ❌ privacy-audit `default`: FAIL")
    assert "policy-strict.yaml" in text
    rows = [line for line in text.splitlines() if re.match(r"\| (∞|[0-9.]+) \|", line)]
    assert len(rows) == len(results["targets"])
    # the claims, then the policy's rules as a list of their own (a rule is never a claim), every
    # failed rule's words in it
    assert "**Claims**" in text and "**Policy rules**" in text and "rule failed: " in text
    assert text.index("**Claims**") < text.index("**Policy rules**") and "refuted: policy rule" not in text
    for failure in evaluation.failures:
        assert failure.message.replace("<", "&lt;") in text


def test_the_markdown_summary_without_a_policy_says_so_and_escapes_names():
    results = _results()
    results["config"]["name"] = "a|b"
    results["attacks_run"] = ["<b>x|y</b>"]
    results["targets"][0]["attacks"][0]["name"] = "<b>x|y</b>"  # the strongest (only) attack of its row
    text = render_summary_markdown(results)
    assert "Decided by: built-in checks" in text
    assert "a\\|b" in text and "&lt;b>x\\|y&lt;/b>" in text
    header = next(line for line in text.splitlines() if line.startswith("| ε target"))
    separator = text.splitlines()[text.splitlines().index(header) + 1]
    assert header.count(" | ") + 1 == separator.count("---:")  # escaped pipes keep the table shape
    row = next(line for line in text.splitlines() if "&lt;b>x" in line)
    assert row.count(" | ") == header.count(" | ")


# --- JUnit ------------------------------------------------------------------------------------


def test_junit_has_one_testcase_per_claim_with_failures_and_skips(tmp_path):
    # A test case is a check that decides: one per claim, then one per policy rule (rules are their
    # own cases, never claims); failed / skipped counts equal the refuted claims and failed rules /
    # the untestable or not refuted claims and not-applicable rules; shown-only figures are properties.
    results, evaluation = verdict_for_results(_results(), load_policy(STRICT))
    path = write_junit_xml(results, tmp_path / "junit.xml")
    root = ET.parse(path).getroot()
    cases = root.findall("./testsuite/testcase")
    claims, rules = results["verdict"]["claims"], results["verdict"]["rules"]
    assert len(cases) == len(claims) + len(rules) == int(root.get("tests"))
    assert [c.get("name") for c in cases[: len(claims)]] == [c["claim"] for c in claims]
    assert all(c.get("name").startswith("policy rule ") for c in cases[len(claims) :])
    failures = [case for case in cases if case.find("failure") is not None]
    counts, rule_counts = results["verdict"]["counts"], results["verdict"]["rule_counts"]
    assert len(failures) == counts["refuted"] + rule_counts["failed"] == int(root.get("failures")) > 0
    skipped = [case for case in cases if case.find("skipped") is not None]
    n_skipped = counts["untestable"] + counts["not_refuted"] + rule_counts["not_applicable"]
    assert len(skipped) == n_skipped == int(root.get("skipped"))
    failure_text = " ".join(case.find("failure").get("message") for case in failures)
    for failed in evaluation.failures:  # every failed rule's words are in its own failing case
        assert failed.message in failure_text
    auc = next(case for case in failures if case.get("name") == "policy rule max_auc: ε = ∞, attack loss")
    assert "0.6316" in auc.find("failure").get("message") and auc.find("failure").get("type") == "RuleFailed"
    properties = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert properties["verdict"] == "fail" and properties["passed"] == "false"
    shown = [row for row in results["verdict"]["checks"] if row["outcome"] == "shown"]
    assert sum(name.startswith("shown.") for name in properties) == len(shown)
    assert not any("shown only" in (case.findtext("system-out") or "") for case in cases)


def test_junit_escapes_user_names(tmp_path):
    results = _results()
    for target in results["targets"]:
        target["attacks"][0]["name"] = HOSTILE + "\x01"
    results, _ = verdict_for_results(results, load_policy(LENIENT))
    xml_text = render_junit_xml(results)
    root = ET.fromstring(xml_text.encode())  # parses: valid XML despite the hostile name
    # the hostile name reaches the XML (in the cases' messages and the shown-only properties), escaped
    texts = [v for element in root.iter() for v in [*element.attrib.values(), element.text or ""]]
    assert any(HOSTILE in text for text in texts)
    assert "<script>" not in xml_text


# --- in a real browser ------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)")
def test_the_report_renders_in_a_headless_browser(run_dir, tmp_path):
    from PIL import Image

    results = _results()
    results, evaluation = verdict_for_results(results, load_policy(STRICT))
    shutil.copytree(run_dir / "figures", tmp_path / "figures")
    report = write_html_report(results, tmp_path, evaluation=evaluation)
    screenshot = tmp_path / "report.png"
    completed = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={screenshot}",
            "--window-size=1280,2400",
            report.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert screenshot.exists(), completed.stderr[-2000:]
    assert screenshot.stat().st_size > 50_000
    image = np.asarray(Image.open(screenshot).convert("RGB"), dtype=np.int16)
    assert image.shape[:2] == (2400, 1280)
    assert image.std() > 20  # not a blank page
    # The FAIL banner is drawn in its red background near the top.
    top = image[:400].reshape(-1, 3)
    assert np.any((np.abs(top - np.array([0xFF, 0xEB, 0xE9])) <= 3).all(axis=1))
