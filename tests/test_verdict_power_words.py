"""Issue #35.2: no output of any mode says "held" for a claim that no attack with these runs could
refute, and no claim is held without a check that declares power against it (docs/verdict.md
"Power"). Walks the verdicts of small real results of every mode and every output rendered from them."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit.machinery.policy import load_policy
from audit.machinery.single_audit_verdicts import single_audit_verdict
from audit.machinery.verdict import POWER_KINDS, verdict_for_results
from audit.machinery.verdict_words import claim_sentence, claim_tags
from audit.model_audits.score_audit import audit_scores
from audit.statistics.synthetic_evaluation import synthetic_privacy_checks
from reports.html_report import render_html_report
from reports.junit import render_junit_xml
from reports.markdown_summary import render_summary_markdown

pytestmark = pytest.mark.slow  # real audit-scores, synthetic checks and report renders: ~40 s of CPU

REPO = Path(__file__).resolve().parents[1]
AUDITS = REPO / "tests" / "data" / "audit_results" / "current"
# Words that say no check could have refuted the claim: they never stand beside "held".
POWERLESS = re.compile(r"no attack with these runs could refute|untestable here|could not refute the claim")


def _scores(tmp: Path, shift: float, randomized: bool, claim: float) -> dict:
    rng = np.random.default_rng(35)
    member = rng.integers(0, 2, 1500)
    frame = pd.DataFrame({"member": member, "score": rng.normal(size=1500) + shift * member})
    frame.to_csv(tmp / f"s{shift}.csv", index=False)
    return audit_scores(tmp / f"s{shift}.csv", claimed_epsilon=claim, membership_randomized=randomized)


def _synthetic(claim: float | None) -> dict:
    rng = np.random.default_rng(5)
    table = lambda n: pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"])  # noqa: E731
    train, holdout = table(200), table(200)
    entry = synthetic_privacy_checks(
        train, holdout, table(200), membership_randomized=True, accountant_epsilon=claim, risk_attacks=0
    )
    return {
        "schema_version": 3,
        "config": {"name": "synth-check"},
        "targets": [],
        "attacks_run": ["distance"],
        "synthetic": [{"generator": "fresh", "epsilon_target": claim, **entry}],
        "verdict": {},
    }


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory) -> dict[str, tuple[dict, dict | None]]:
    """mode → (verdict, results it was computed from, or None for a single-audit file)."""
    tmp = tmp_path_factory.mktemp("modes")
    smoke = json.loads((REPO / "tests" / "data" / "results_smoke_current_example.json").read_text())
    scores = _scores(tmp, 0.0, True, 1.0)
    model = json.loads(json.dumps(scores))  # audit-model writes the same shape without a score column
    model["config"].pop("score_column")
    out: dict[str, tuple[dict, dict | None]] = {}
    for name, results in {
        "run": smoke,
        "audit-scores": scores,
        "audit-scores, not coin-flipped": _scores(tmp, 1.5, False, 0.1),
        "audit-model": model,
        "synth-check": _synthetic(2.0),
        "federated canary clients": json.loads(
            (REPO / "tests" / "data" / "results_federated_canary_clients_example.json").read_text()
        ),
    }.items():
        decided, _ = verdict_for_results(results)
        out[name] = (decided["verdict"], decided)
    gated, _ = verdict_for_results(smoke, load_policy(REPO / "examples" / "policies" / "run.yaml"))
    out["run + policy"] = (gated["verdict"], gated)
    for path in sorted(AUDITS.glob("*.json")):
        kind = path.stem.replace("-factory", "").replace("-one-run", "")
        out[path.stem] = (single_audit_verdict(kind, json.loads(path.read_text())), None)
    return out


def _outputs(verdict: dict, results: dict | None) -> list[str]:
    """Every text an output prints about the verdict's claims (console lines, MLflow tags, summary.md,
    junit.xml's cases, report.html)."""
    texts = [claim_sentence(c) for c in verdict["claims"]] + list(claim_tags(verdict).values())
    if results is not None:
        texts.append(render_summary_markdown(results))
        root = ET.fromstring(render_junit_xml(results).encode())
        texts += [ET.tostring(case, encoding="unicode") for case in root.iter("testcase")]
        texts.append(render_html_report(results))
    return texts


def test_every_mode_was_walked(verdicts):
    assert {
        "run",
        "audit-scores",
        "audit-model",
        "synth-check",
        "canary-audit",
        "whitebox-audit",
        "whitebox-audit-one-run",
        "mechanism-audit",
        "conformance",
        "accountant-check",
    } <= set(verdicts)


def test_no_output_says_held_beside_no_power(verdicts):
    for mode, (verdict, results) in verdicts.items():
        for claim in verdict["claims"]:
            name = str(claim["claim"])
            for text in _outputs(verdict, results):
                for line in re.split(r"\n|<li|<tr|</testcase>", text):
                    if name in line and POWERLESS.search(line):
                        assert not re.search(r"\bheld\b", line.split(name, 1)[0][-40:]), (mode, line[:300])
            if claim["status"] == "held":
                assert claim["ceiling"] is None or not POWERLESS.search(str(claim.get("reason"))), (mode, claim)


def test_no_claim_is_held_without_declared_power(verdicts):
    for mode, (verdict, _) in verdicts.items():
        for claim in verdict["claims"]:
            power = claim.get("power")
            if claim["status"] == "held":
                # mechanism-audit files predate declared power (audit.dp_validation declares it): an
                # undeclared power there is the contract's legacy reading; every other mode declares it.
                if power is None and mode == "mechanism-audit":
                    continue
                assert isinstance(power, dict) and power["kind"] in POWER_KINDS and power["kind"] != "none", (
                    mode,
                    claim,
                )
            if claim["status"] == "not_refuted":
                assert power["kind"] == "none" and power["detail"] and power["decider"], (mode, claim)


def test_the_modes_without_power_say_not_refuted_and_what_decides(verdicts):
    (claim,) = verdicts["audit-scores"][0]["claims"]
    assert claim["status"] == "not_refuted" and verdicts["audit-scores"][0]["status"] == "inconclusive"
    assert claim_sentence(claim).startswith("not refuted: ") and "these scores" in claim_sentence(claim)
    assert [c["status"] for c in verdicts["audit-model"][0]["claims"]] == ["not_refuted"]
    # run: the membership rows alone have no power; the white-box twin decides the ε = 1 claim
    run = {c["claim"]: c for c in verdicts["run"][0]["claims"]}
    assert run["ε = 1: (ε 0.9946, δ 1e-05)-DP"]["status"] == "held"
    assert run["ε = 1: (ε 0.9946, δ 1e-05)-DP"]["power"]["kind"] in ("proven", "measured")
    # a policy never changes a claim
    assert verdicts["run + policy"][0]["claims"] == verdicts["run"][0]["claims"]


def test_an_untestable_claim_names_the_figures_against_it_and_the_flag(verdicts):
    (claim,) = verdicts["audit-scores, not coin-flipped"][0]["claims"]
    assert claim["status"] == "untestable"
    sentence = claim_sentence(claim)
    assert "Clopper-Pearson bound ε ≥" in sentence and "--membership-randomized" in sentence
    assert "independent" in sentence  # the assumption the figure rests on
    (quiet,) = verdicts["audit-scores"][0]["claims"]
    assert "contradict" not in claim_sentence(quiet)
