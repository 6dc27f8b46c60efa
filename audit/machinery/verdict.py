"""One verdict model for every command: checks in, one status per claim, the top line out.

The contract (results["verdict"], read by the console, report.html, summary.md, junit.xml and the
MLflow tags of the parent run; results.json schema_version 3):

    {"status": "pass" | "fail" | "inconclusive" | "no_claim", "passed": status == "pass",
     "claims": [{"claim", "status": "held" | "not_refuted" | "refuted" | "untestable", "reason", "ceiling",
                 "needed", "power", ...}],
     "counts": {"held": n, "not_refuted": n, "refuted": n, "untestable": n},
     "rules": [{"rule", "subject", "attack", "status": "passed" | "failed" | "not_applicable", "figure",
                "threshold", "message"}], "rule_counts": {...}   (with a policy only: never claims),
     "leakage": [{"subject", "status": "leaks" | "no_significant_leakage", "statement", "tests", ...}],
     "reasons": [one line per claim], "decided_by": "built-in checks" | "policy <file>",
     "family_wise_error": {...how the tests that decide were corrected...},
     "checks": [...every check, its outcome...], "notes": [...], "fail_on_leak": bool}

A `Check` is one of:
- a statistical test of a claim (`p_value`: of "the claim holds"); all tests of one verdict form
  one family, corrected with Holm's step-down procedure at α = 1 − confidence, so the probability
  that a true claim is reported as refuted is ≤ α for the verdict as a whole;
- a rule applied to the results (`failed`): a policy rule, an unsound accountant, a single
  pre-declared audit test (canary, mechanism) whose bound already holds at the stated confidence;
- `inconclusive`: a check that could not have failed — its ceiling (the bound a perfect attack
  would reach) is at or below the claim, or no bound is proven for the setting;
- `decides=False`: shown with its assumption, never decides (e.g. Clopper-Pearson over one
  model's candidates, which assumes independent trials).

Each check names the claim it tests (`claim`) and where its power against it comes from (`power`);
a claim is **refuted** if one of its checks failed, **held** if at least one with power could have
failed (ceiling above the claim) and none did, **not refuted** if checks could have failed but none
has power, **untestable** here if none could have failed. A policy's rules are a list of their own
(`rules`), never claims. The top line: "fail" if a claim was refuted or a rule failed,
"inconclusive" if one was untestable or not refuted (fail with a policy's `fail_on_inconclusive`),
"pass" only when every claim held, and "no_claim" when nothing claimed was tested: then the leakage
statements (audit.machinery.leakage) say LEAKS or NO SIGNIFICANT LEAKAGE FOUND, and the verdict
fails only with `--fail-on-leak`.

`verdict_for_results` builds the built-in checks from a results dict (targets, synthetic entries)
and adds a policy's rules beside its claims; `gate` and `report` recompute it from results.json, so the
run, the gate and a re-render cannot disagree.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

from audit.machinery.built_in_checks import (
    _eps_text,
    _tests_in_family,
    built_in_checks,
    needed_candidates,
)
from audit.machinery.verdict_decision import claim_statuses, decide
from audit.machinery.verdict_rows import BUILT_IN, CLAIM_STATUSES, DEFAULT_ALPHA, POWER_KINDS, RULE_STATUSES, Check
from audit.machinery.verdict_words import (  # noqa: F401  (re-exported: the words every output uses)
    claim_line,
    claim_sentence,
    claim_tags,
    extra_reasons,
    leakage_word,
    status_word,
    verdict_tags,
)

__all__ = [
    "Check",
    "CLAIM_STATUSES",
    "POWER_KINDS",
    "RULE_STATUSES",
    "decide",
    "family_alpha_each",
    "verdict_for_results",
    "recompute_verdict",
    "claim_statuses",
    "needed_candidates",
    "status_word",
    "leakage_word",
    "claim_line",
    "claim_sentence",
    "extra_reasons",
    "claim_tags",
    "verdict_tags",
    "BUILT_IN",
]


def results_confidence(results: dict[str, Any]) -> float:
    config = results.get("config") or {}
    value = (config.get("attacks") or {}).get("confidence") if isinstance(config.get("attacks"), dict) else None
    if value is None:
        for target in results.get("targets") or []:
            for attack in target.get("attacks") or []:
                if isinstance(attack.get("confidence"), (int, float)):
                    return float(attack["confidence"])
        for entry in results.get("synthetic") or []:
            if isinstance((entry.get("mia") or {}).get("confidence"), (int, float)):
                return float(entry["mia"]["confidence"])
        return 1 - DEFAULT_ALPHA
    return float(value)


def family_alpha_each(results: dict[str, Any]) -> float:
    """α/K: the level of Holm's first step over the K built-in tests of `results` (the level at
    which a row's ceiling decides whether it could have refuted its claim)."""
    alpha = 1 - results_confidence(results)
    return alpha / max(_tests_in_family(results, alpha), 1)


def recompute_verdict(
    results: dict[str, Any], policy: Any = None, *, fail_on_leak: bool | None = None
) -> dict[str, Any]:
    """The verdict dict recomputed from the numbers of a results dict (pure; `gate`, `report` and
    the schema checks call it): what the run that wrote `results` must have said."""
    return verdict_for_results(results, policy, fail_on_leak=fail_on_leak)[0]["verdict"]


def verdict_for_results(
    results: dict[str, Any], policy: Any = None, *, fail_on_leak: bool | None = None
) -> tuple[dict[str, Any], Any]:
    """(results with `verdict` and the targets' `violation` set, the PolicyEvaluation or None).

    `fail_on_leak` (None: as the results' own verdict recorded it) makes a LEAKS statement on a
    subject without a DP claim fail the verdict (`--fail-on-leak`).

    The built-in checks decide the claims, with or without a policy. A policy adds its rules
    (`verdict.rules`: passed / failed / not applicable), never removes or re-words a claim; the top
    line fails on a refuted claim or a failed rule, and `fail_on_inconclusive` fails an untestable or
    not-refuted claim.
    """
    from audit.machinery.policy import evaluate_policy

    out = deepcopy(results)
    alpha = 1 - results_confidence(results)
    if fail_on_leak is None:
        fail_on_leak = (
            bool((results.get("verdict") or {}).get("fail_on_leak"))
            if isinstance(results.get("verdict"), dict)
            else False
        )
    checks, notes, leakage = built_in_checks(out, alpha)
    built_in = decide(checks, alpha=alpha, notes=notes, leakage=leakage, fail_on_leak=fail_on_leak)
    failed_subjects = {
        row["subject"]
        for row in built_in["checks"]
        if row["outcome"] == "fail" and row["subject"].startswith("targets[") and row["p_value"] is not None
    }
    failed_names = {
        (row["subject"], row["name"])
        for row in built_in["checks"]
        if row["outcome"] == "fail" and row["p_value"] is not None
    }
    for index, target in enumerate(out.get("targets") or []):
        if isinstance(target, dict):
            target["violation"] = f"targets[{index}]" in failed_subjects
            label = f"ε = {_eps_text(target.get('epsilon_target'))}"
            for attack in target.get("attacks") or []:
                if isinstance(attack, dict) and isinstance(attack.get("claim"), dict):  # federated rows
                    level = attack["claim"].get("level", "record")
                    name = f"{label} · {attack.get('name')} ({level}-level ε) · one_run"
                    attack["violation"] = (f"targets[{index}]", name) in failed_names
    if policy is None:
        out["verdict"] = built_in
        out.pop("policy_evaluation", None)
        return out, None

    # A policy adds rules beside the claims; it never removes, renames or re-words a claim (#36): the
    # claims are the built-in ones, and the top line fails on a refuted claim or a failed rule.
    evaluation = evaluate_policy(policy, out)
    source = evaluation.policy_path or evaluation.policy_name
    out["verdict"] = decide(
        checks,
        alpha=alpha,
        decided_by=f"policy {source}",
        fail_on_inconclusive=bool(getattr(policy.rules, "fail_on_inconclusive", False)),
        notes=notes,
        leakage=leakage,
        fail_on_leak=fail_on_leak,
        rules=[check.as_rule() for check in evaluation.checks],
    )
    out["verdict"]["built_in"] = {
        "status": built_in["status"],
        "reasons": built_in["reasons"],
        "claims": built_in["claims"],
    }
    out["policy_evaluation"] = evaluation.as_dict()
    return out, evaluation
