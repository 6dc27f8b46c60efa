"""Every shipped policy against the README's examples: each verdict is the one its file's comment
promises (the lines under "Verdicts on the README's examples"), and a rule that cannot apply (an
accountant rule on a claim no accountant computed) never fails (issue #36)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit.machinery.policy import load_policy
from audit.machinery.verdict import recompute_verdict
from audit.machinery.verdict_words import status_word
from audit.model_audits.score_audit import audit_scores

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted(
    [
        REPO / "examples" / "policy-strict.yaml",
        REPO / "examples" / "policy-lenient.yaml",
        *(REPO / "examples" / "policies").glob("*.yaml"),
        *(REPO / "audit" / "policies").glob("*.yaml"),
    ]
)
EXAMPLES = ("smoke run", "default run", "audit-scores null scores --claimed-epsilon 1", "llm run (run --preset llm)")
PROMISE = re.compile(r"^#\s+(" + "|".join(re.escape(e) for e in EXAMPLES) + r"): (.+)$")


def _promises(path: Path) -> dict[str, str]:
    return {m.group(1): m.group(2).strip() for line in path.read_text().splitlines() if (m := PROMISE.match(line))}


@pytest.fixture(scope="module")
def examples(tmp_path_factory) -> dict[str, dict]:
    # smoke: the results.json of a real `run --preset smoke` (schema 3, white-box twins); default:
    # the stored default-run results; audit-scores: coin-flip members, scores that know nothing; llm: the
    # results.json of a real `run --preset llm` (wave 10, run 20261128T012101Z; MLflow and integrity fields dropped).
    rng = np.random.default_rng(36)
    n = 2000
    frame = pd.DataFrame({"member": rng.integers(0, 2, n), "score": rng.normal(size=n)})
    path = tmp_path_factory.mktemp("scores") / "null.csv"
    frame.to_csv(path, index=False)
    return {
        "smoke run": json.loads((REPO / "tests" / "data" / "results_smoke_current_example.json").read_text()),
        "default run": json.loads((REPO / "tests" / "data" / "results_default_example.json").read_text()),
        "audit-scores null scores --claimed-epsilon 1": audit_scores(
            path, claimed_epsilon=1.0, membership_randomized=True
        ),
        "llm run (run --preset llm)": json.loads((REPO / "tests" / "data" / "results_llm_example.json").read_text()),
    }


def test_every_shipped_policy_states_its_verdicts_on_the_readme_examples():
    for path in SHIPPED:
        assert set(_promises(path)) == set(EXAMPLES), path


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_each_shipped_policy_gives_the_verdict_its_comment_promises(path, examples):
    policy = load_policy(path)
    for example, promise in _promises(path).items():
        plain = recompute_verdict(examples[example])
        verdict = recompute_verdict(examples[example], policy)
        failed = [r["message"] for r in verdict["rules"] if r["status"] == "failed"]
        if promise == "no rule fails":
            assert failed == [], (path.name, example, failed)
        else:
            assert status_word(verdict["status"], verdict) == promise, (path.name, example, verdict["reasons"])
        # The policy adds rules; the claims are those of the plain run, word for word.
        assert verdict["claims"] == plain["claims"] and verdict["counts"] == plain["counts"]
        assert verdict["rule_counts"]["failed"] == len(failed)


def test_a_rule_that_cannot_apply_never_fails_an_audit_scores_claim(examples):
    results = examples["audit-scores null scores --claimed-epsilon 1"]
    (claim,) = recompute_verdict(results)["claims"]
    # The user's scores are the attack: a claim tested on them is not refuted, never held (docs/verdict.md).
    assert claim["status"] == "not_refuted" and claim["power"]["kind"] == "none"
    for path in SHIPPED:
        verdict = recompute_verdict(results, load_policy(path))
        rules = {(r["rule"], r["status"]) for r in verdict["rules"]}
        assert not any(status == "failed" for _, status in rules), (path.name, rules)
        if "required_accountant" in {rule for rule, _ in rules}:
            assert ("required_accountant", "not_applicable") in rules
        assert [c["status"] for c in verdict["claims"]] == ["not_refuted"]


def test_a_policy_limit_on_what_attacks_find_about_records_does_not_fail_the_llm_runs_power_controls(examples):
    # The llm run's ε = ∞ fine-tunings find every planted Panda canary (AUC 1): that is the power control its DP
    # claims rest on. max_auc / max_tpr_at_fpr bound attacks on the training records and say "not applicable" on a
    # row of planted canaries; the strict policy still fails the run, on the canaries' ε bound (max_epsilon_lb).
    results = examples["llm run (run --preset llm)"]
    lenient = recompute_verdict(results, load_policy(REPO / "audit" / "policies" / "policy-lenient.yaml"))
    canary_rows = [r for r in lenient["rules"] if r["rule"] == "max_auc"]
    assert canary_rows and all(r["status"] == "not_applicable" for r in canary_rows)
    assert all("planted" in r["message"] for r in canary_rows)
    assert {c["status"] for c in lenient["claims"]} == {"held"} and lenient["status"] == "pass"
    strict = recompute_verdict(results, load_policy(REPO / "audit" / "policies" / "policy-strict.yaml"))
    assert {r["rule"] for r in strict["rules"] if r["status"] == "failed"} == {"max_epsilon_lb"}
    # The no-claim statement says what was found: the inserted canaries, not "the training records".
    statements = [s["statement"] for s in lenient.get("leakage") or []]
    assert statements and all("of the inserted canaries" in s and "training records" not in s for s in statements)
