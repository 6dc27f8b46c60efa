"""The verdict's words, the same in every output: the top line, one line per claim, the MLflow tags.

Pure functions of a verdict dict (audit.machinery.verdict): the console, report.html, summary.md,
junit.xml and MLflow all say a claim's status with these, so no two outputs word it differently.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "counts_line",
    "rule_line",
    "rule_status_word",
    "CLAIM_ORDER",
    "status_word",
    "claim_status_word",
    "claim_line",
    "claim_sentence",
    "extra_reasons",
    "leakage_word",
    "pass_caveat",
    "claim_tags",
    "verdict_tags",
]


# The claim statuses in the order outputs count them (audit.machinery.verdict.CLAIM_STATUSES; repeated
# here because verdict imports this module).
CLAIM_ORDER = ("held", "not_refuted", "refuted", "untestable")
RULE_ORDER = ("passed", "failed", "not_applicable")


def counts_line(verdict: dict[str, Any]) -> str:
    """The top line's counts, claims and rules kept apart: "3 held · 1 not refuted · 0 refuted · 1 untestable
    here; policy: 14 rules passed, 1 failed, 3 not applicable" (the policy part only with a policy)."""
    claims = [c for c in verdict.get("claims") or [] if isinstance(c, dict)]
    text = " · ".join(f"{sum(1 for c in claims if c.get('status') == s)} {claim_status_word(s)}" for s in CLAIM_ORDER)
    rules = [r for r in verdict.get("rules") or [] if isinstance(r, dict)]
    if "rules" in verdict:
        n = {s: sum(1 for r in rules if r.get("status") == s) for s in RULE_ORDER}
        text += (
            f"; policy: {n['passed']} rule{'s' if n['passed'] != 1 else ''} passed, {n['failed']} failed, "
            f"{n['not_applicable']} not applicable"
        )
    return text


def rule_status_word(status: str) -> str:
    return {"not_applicable": "not applicable"}.get(status, status)


def rule_line(rule: dict[str, Any]) -> str:
    """One policy rule in words: "rule failed: <rule>: <its figure vs its threshold>"."""
    return f"rule {rule_status_word(str(rule.get('status')))}: {rule.get('message')}"


def status_word(status: str, verdict: dict[str, Any] | None = None) -> str:
    """The top line's word: PASS / FAIL / INCONCLUSIVE, or for a verdict without any claim the
    leakage statement (LEAKS / NO SIGNIFICANT LEAKAGE FOUND)."""
    if status == "no_claim":
        return leakage_word(verdict or {})
    return {"pass": "PASS", "fail": "FAIL", "inconclusive": "INCONCLUSIVE"}.get(status, str(status).upper())


def claim_line(claim: dict[str, Any]) -> str:
    """One claim in words, the same everywhere: status, the claim, and for an untestable one its
    ceiling and what would make it testable."""
    status = str(claim.get("status"))
    word = claim_status_word(status)
    text = f"{word}: {claim.get('claim')}"
    if status == "untestable":
        extra = [f"ceiling {claim['ceiling']:.3g}"] if isinstance(claim.get("ceiling"), (int, float)) else []
        extra += [str(claim["needed"])] if claim.get("needed") else []
        text += f" ({'; '.join(extra)})" if extra else ""
    if status == "not_refuted":
        power = power_found if isinstance(power_found := claim.get("power"), dict) else {}
        extra = [str(power[k]) for k in ("detail", "decider") if power.get(k)]
        text += f" — {'; '.join(extra)}" if extra else ""
    return text


def claim_status_word(status: str) -> str:
    """A claim status in words: held / not refuted / refuted / untestable here."""
    return {"untestable": "untestable here", "not_refuted": "not refuted"}.get(status, status)


def claim_sentence(claim: dict[str, Any]) -> str:
    """`claim_line` and, for a claim that did not hold, why (its deciding check's words): the one
    place a console, report.html or summary.md says it."""
    reason = claim.get("reason")
    return claim_line(claim) + (f" — {reason}" if reason and claim.get("status") != "held" else "")


def extra_reasons(verdict: dict[str, Any]) -> list[str]:
    """The verdict's reasons that no claim line already says (a policy's fail_on_inconclusive,
    --fail-on-leak, an older verdict without claims), each once."""
    said = {c.get("reason") for c in verdict.get("claims") or [] if isinstance(c, dict)}
    said |= {
        f"policy rule {r.get('rule')} failed: {r.get('message')}"
        for r in verdict.get("rules") or []
        if isinstance(r, dict)
    }  # each rule has its own line already
    return [r for r in dict.fromkeys(map(str, verdict.get("reasons") or [])) if r not in said]


def leakage_word(verdict: dict[str, Any]) -> str:
    found = [entry for entry in verdict.get("leakage") or [] if isinstance(entry, dict)]
    if any(entry.get("status") == "leaks" for entry in found):
        return "LEAKS"
    return "NO SIGNIFICANT LEAKAGE FOUND" if found else "NO CLAIM TESTED"


def pass_caveat(verdict: dict[str, Any]) -> str:
    """What a PASS does not cover, in words: the subjects without a DP claim that LEAK (the sweep's ε = ∞
    baseline), so a top line of PASS is never read as "nothing leaks"; "" when there are none."""
    leaking = [
        str(e.get("label")) for e in verdict.get("leakage") or [] if isinstance(e, dict) and e.get("status") == "leaks"
    ]
    return f"PASS covers the DP claims only: {', '.join(leaking)} LEAKS" if leaking else ""


def claim_tags(verdict: dict[str, Any]) -> dict[str, str]:
    """Per-claim MLflow tags (`verdict.claim.NN` = "held: <claim>"), the counts, and the leakage
    statement of each subject without a claim (`verdict.leakage.NN`): the same words as every output."""
    claims = [c for c in verdict.get("claims") or [] if isinstance(c, dict)]
    tags = {
        f"verdict.claim.{i:02d}": f"{claim_status_word(str(c.get('status')))}: {c.get('claim')}"[:4900]
        for i, c in enumerate(claims)
    }
    counts = verdict.get("counts") or {}
    tags["verdict.claims"] = (
        " · ".join(f"{counts.get(s, 0)} {claim_status_word(s)}" for s in CLAIM_ORDER) if claims else "none"
    )
    for i, rule in enumerate(r for r in verdict.get("rules") or [] if isinstance(r, dict)):
        tags[f"verdict.rule.{i:02d}"] = f"{rule_status_word(str(rule.get('status')))}: {rule.get('message')}"[:4900]
    if "rules" in verdict:
        tags["verdict.rules"] = counts_line(verdict).split("; policy: ", 1)[-1]
    for i, entry in enumerate(e for e in verdict.get("leakage") or [] if isinstance(e, dict)):
        tags[f"verdict.leakage.{i:02d}"] = f"{entry.get('status')}: {entry.get('statement')}"[:4900]
    tags["verdict.headline"] = status_word(str(verdict.get("status")), verdict)
    return tags


def verdict_tags(verdict: dict[str, Any]) -> dict[str, str]:
    """MLflow tags of the parent run (values ≤ 5000 characters, MLflow's limit)."""
    from audit.statistics.attack_evaluation import BOUND_SCOPES

    bounds = {
        f"bound.{method}.{key}": str(scope[key])[:4900]
        for method, scope in BOUND_SCOPES.items()
        for key in ("assumption", "scope")
    }
    return {
        **bounds,
        "verdict": str(verdict.get("status")),
        "verdict.decided_by": str(verdict.get("decided_by")),
        "verdict.reasons": " | ".join(map(str, verdict.get("reasons") or []))[:4900] or "-",
        "verdict.family_wise_error": str((verdict.get("family_wise_error") or {}).get("statement", ""))[:4900],
        **claim_tags(verdict),
    }
