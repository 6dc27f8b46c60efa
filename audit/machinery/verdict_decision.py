"""The verdict's core: a `Check` per test, one status per claim (held / not refuted / refuted / untestable
here), and the top line (PASS / FAIL / INCONCLUSIVE / no claim) with the Holm step-down over the checks that
can decide. `audit.machinery.verdict` builds the checks of a results file and re-exports these names
(the vocabulary and the row types are in audit/machinery/verdict_rows.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from audit.machinery.verdict_rows import (
    BUILT_IN,
    DEFAULT_ALPHA,
    Check,
    CheckRow,
    ClaimRow,
    Outcome,
    RuleRow,
    Status,
    Verdict,
)
from audit.statistics.multiple_testing import holm_rejections

__all__ = ["claim_statuses", "decide", "decide_verdict"]


def claim_statuses(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per claim from the decided check rows (pure): refuted if any of its checks failed;
    held if at least one of them could have failed (its ceiling above the claim at its Holm level)
    and none did; untestable when none of them could have failed. A claim's tests decide together:
    the membership attacks on the released model and the white-box one-run row of its twin test one
    (ε, δ) claim; its ceiling is the best among them."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("outcome") == "shown":
            continue
        key = row.get("claim") or f"{row.get('subject')}: {row.get('name')}"
        groups.setdefault(key, []).append(row)
    claims = []
    for key, members in groups.items():
        outcomes = [r["outcome"] for r in members]
        # Held when at least one of its tests could have refuted it (its ceiling above the claim at
        # its Holm level) and none did: a test without power adds nothing, it takes nothing away.
        powered = [r for r in members if r["outcome"] == "pass" and _has_power(r)]
        status = (
            "refuted"
            if "fail" in outcomes
            else "held"
            if powered
            else "not_refuted"
            if "pass" in outcomes
            else "untestable"
        )
        wanted = {"refuted": "fail", "held": "pass", "not_refuted": "pass"}.get(status, "inconclusive")
        same = powered if status == "held" else [r for r in members if r["outcome"] == wanted]
        # The strongest check speaks for the claim; the others that agree are named, not repeated.
        deciding = min(same, key=lambda r: r["p_value"] if isinstance(r.get("p_value"), (int, float)) else 2.0)
        reason = str(deciding.get("message"))
        others = [str(r.get("name")) for r in same if r is not deciding and r.get("message") != reason]
        if deciding.get("assumption") == "policy rule" and status != "held":  # short, each its own number
            reason = "; ".join(dict.fromkeys(str(r.get("message")) for r in same))
        elif others and status != "held":
            reason += f" (likewise: {', '.join(others)})"
        powerless = [str(r.get("name")) for r in members if r["outcome"] == "inconclusive"]
        if status in ("held", "not_refuted") and powerless:
            reason += f" (untestable alone: {', '.join(powerless)})"
        ceilings = [r["ceiling"] for r in members if isinstance(r.get("ceiling"), (int, float))]
        p_values = [r["p_value"] for r in members if isinstance(r.get("p_value"), (int, float))]
        claims.append(
            {
                "claim": key,
                "subject": deciding.get("subject"),
                "kind": "policy rule" if deciding.get("assumption") == "policy rule" else "claim",
                "status": status,
                "reason": reason,
                "ceiling": max(ceilings) if ceilings else None,
                # Every route to power its tests name (more candidates, more canaries): the reader picks.
                "needed": "; or ".join(dict.fromkeys(r["needed"] for r in members if r.get("needed"))) or None
                if status == "untestable"
                else None,
                "p_value": min(p_values) if p_values else None,
                "checks": [r.get("name") for r in members],
                "power": _claim_power(status, deciding, members),
            }
        )
    return claims


def _has_power(row: dict[str, Any]) -> bool:
    """A passing check speaks for "held" only with power against its claim: proven, measured or
    shown by a positive control in the same run (an undeclared legacy row counts as proven)."""
    power = row.get("power")
    return not isinstance(power, dict) or power.get("kind") != "none"


def _claim_power(status: str, deciding: dict[str, Any], members: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The claim's `power` entry: the deciding check's, or for a not-refuted claim the first
    powerless check's (what its mode cannot detect, and what would decide)."""
    if status == "not_refuted":
        return next((r["power"] for r in members if isinstance(r.get("power"), dict)), None)
    power = deciding.get("power")
    return dict(power) if isinstance(power, dict) else None


def decide(checks: Iterable[Check], **options: Any) -> dict[str, Any]:
    """The verdict dict for `checks` (pure): `decide_verdict(checks, **options)` serialised once
    (`Verdict.to_json`), as results.json holds it."""
    return decide_verdict(checks, **options).to_json()


def decide_verdict(
    checks: Iterable[Check],
    *,
    alpha: float = DEFAULT_ALPHA,
    decided_by: str = BUILT_IN,
    fail_on_inconclusive: bool = False,
    notes: Iterable[str] = (),
    leakage: Iterable[dict[str, Any]] = (),
    fail_on_leak: bool = False,
    rules: Iterable[dict[str, Any]] | None = None,
) -> Verdict:
    """The verdict of `checks` (pure), typed. Holm over every deciding check that carries a p-value;
    then one status per claim (`claims`) and the top line from them: pass only when every claim
    held, fail when one was refuted (a policy rule is a claim too), inconclusive otherwise, and
    "no_claim" when nothing claimed was tested: then `leakage` (statements on subjects without a
    claim) says LEAKS or NO SIGNIFICANT LEAKAGE FOUND, and fails only with `fail_on_leak`.

    Args:
        checks: every check of the audit.
        alpha: the family-wise error level of the Holm step-down.
        decided_by: "built-in checks" or "policy <file>".
        fail_on_inconclusive: an untestable or not-refuted claim fails the top line (a policy's rule).
        notes: lines for the reader; leakage: the statements on subjects without a claim.
        fail_on_leak: a LEAKS statement fails the top line.
        rules: a policy's rules (`RuleCheck.as_rule()` dicts); None without a policy.

    Returns:
        The `Verdict` (audit.machinery.verdict_rows), built once.
    """
    checks = list(checks)
    leakage = [dict(entry) for entry in leakage]
    tests = [c for c in checks if c.decides and c.p_value is not None]
    rejected = (
        dict(zip(map(id, tests), holm_rejections([c.p_value for c in tests if c.p_value is not None], alpha)))
        if tests
        else {}
    )
    rows: list[CheckRow] = []
    for check in checks:
        outcome: Outcome
        if not check.decides:
            outcome = "shown"
        elif rejected.get(id(check)) or (check.p_value is None and check.failed):
            outcome = "fail"
        elif check.inconclusive:
            outcome = "inconclusive"
        else:
            outcome = "pass"
        rows.append(CheckRow(**{f.name: getattr(check, f.name) for f in fields(check)}, outcome=outcome))
    claims = claim_statuses([row.to_json() for row in rows])
    refuted = [c for c in claims if c["status"] == "refuted"]
    open_claims = [c for c in claims if c["status"] in ("untestable", "not_refuted")]
    leaks = [e for e in leakage if e.get("status") == "leaks"]
    rule_list = [dict(r) for r in rules or ()]
    failed_rules = [r for r in rule_list if r.get("status") == "failed"]
    if refuted or failed_rules:
        status: Status = "fail"
        reasons = [c["reason"] for c in refuted] + [
            f"policy rule {r.get('rule')} failed: {r.get('message')}" for r in failed_rules
        ]
    elif open_claims:
        status = "fail" if fail_on_inconclusive else "inconclusive"
        reasons = [
            (
                (
                    f"{'untestable here' if c['status'] == 'untestable' else 'not refuted'} and the policy "
                    "fails on inconclusive: "
                )
                if fail_on_inconclusive
                else ""
            )
            + c["reason"]
            for c in open_claims
        ]
    else:
        status = "pass" if claims else "no_claim"
        reasons = []
    if fail_on_leak and leaks:
        reasons = (reasons if status == "fail" else []) + [
            f"leaks, a finding on your own release (--allow-leak makes it report-only): {e.get('statement')}"
            for e in leaks
        ]
        status = "fail"
    k = len(tests)
    statement = (
        f"Holm step-down over the {k} test(s) that can decide the verdict, family-wise error ≤ {alpha:g} "
        f"(each claim is refuted only if its test is rejected at α/(K − i + 1))"
        if k
        else (
            "no DP claim was tested here, so no test decides a claim"
            if not claims
            else "no p-value decides a claim here: each claim's deciding check is a rule applied to the results"
        )
        + (
            "; each leakage statement below names its own test and p-value, which decide LEAKS or NO SIGNIFICANT "
            "LEAKAGE FOUND"
            if not k and leakage
            else ""
        )
    )
    return Verdict(
        status=status,
        reasons=tuple(reasons),
        decided_by=decided_by,
        policy=None if decided_by == BUILT_IN else decided_by.removeprefix("policy "),
        family_wise_error={"method": "holm" if k else "none", "alpha": alpha, "n_tests": k, "statement": statement},
        inconclusive=tuple(c["reason"] for c in open_claims),
        notes=tuple(notes),
        claims=tuple(ClaimRow.from_json(c) for c in claims),
        leakage=tuple(leakage),
        fail_on_leak=bool(fail_on_leak),
        checks=tuple(rows),
        rules=None if rules is None else tuple(RuleRow.from_json(r) for r in rule_list),
    )
