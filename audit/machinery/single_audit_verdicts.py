"""The verdicts of the single-claim audits, in the vocabulary of audit.machinery.verdict (one status per
claim: held / refuted / untestable, the top line from them), with or without a policy.

Each kind names its builder in audit/machinery/audit_kinds.py (`AuditKind.verdict`): `bound_verdict`
(one claim against one ε lower bound: the default), `canary_audit_verdict`, `whitebox_audit_verdict`,
`conformance_checks_verdict`, `accountant_check_verdict`. `single_audit_verdict` reads the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from audit.machinery.audit_kinds import audit_kind, load
from audit.machinery.audit_results import AccountantCheckResult, ConformanceResult
from audit.machinery.bound_results import BoundAuditResult, WhiteboxAuditResult, read_bound_result
from audit.machinery.verdict import DEFAULT_ALPHA, RULE_STATUSES, Check, decide

__all__ = [
    "accountant_check_verdict",
    "bound_verdict",
    "canary_audit_verdict",
    "conformance_checks_verdict",
    "single_audit_verdict",
    "single_audit_verdict_with_policy",
    "whitebox_audit_verdict",
]


def single_audit_verdict(kind: str, result: dict[str, Any]) -> dict[str, Any]:
    """The built-in verdict of a single audit's result, by the builder its kind declares.

    Args:
        kind: a registered kind (audit/machinery/audit_kinds.py); an unknown one is exit 2.
        result: the audit's result, as written to `<kind>.json`.

    Returns:
        The verdict dict (status, passed, claims, checks, reasons, family_wise_error, ...).
    """
    builder: Callable[[str, dict[str, Any]], dict[str, Any]] = load(audit_kind(kind).verdict)
    return builder(kind, result)


def accountant_check_verdict(kind: str, result: dict[str, Any]) -> dict[str, Any]:
    """An accountant check: one claim per grid point, that its ε is at least the true ε."""
    checks = []
    for point in AccountantCheckResult.from_json(result).points:
        where = f"σ={point.noise_multiplier:g} q={point.sample_rate:g} T={point.steps} δ={point.delta:g}"
        bad = point.label in ("unsound", "invalid")
        checks.append(
            Check(
                where,
                "accountant vs PLD interval",
                f"{point.label}: {point.message}",
                failed=bad,
                assumption="true ε lies in the PLD interval [lower, upper]",
                power={
                    "kind": "proven",
                    "figure": None,
                    "decider": "",
                    "detail": "exact: the tight PLD interval of the same σ, q, T",
                },
                claim=f"accountant at {where}: its ε is at least the true ε",
            )
        )
    return decide(checks)


def whitebox_audit_verdict(kind: str, result: dict[str, Any]) -> dict[str, Any]:
    """A white-box audit: its own rows (refutation of the claimed curve, accountant agreement), re-decided."""
    # Its checks (refutation of the claimed curve, accountant agreement) come with the result:
    # re-deciding them here keeps the run, `report` and the MLflow tag on one verdict.
    typed = WhiteboxAuditResult.from_json(result)
    own = typed.bound.own
    fields = set(Check.__dataclass_fields__)
    claim, delta = typed.bound.claimed_epsilon, typed.bound.delta
    claimed = (
        f"{typed.subject or 'training'}: claimed (ε {claim:.4g}, δ {delta:g})"
        if isinstance(claim, (int, float)) and isinstance(delta, (int, float))
        else ""
    )
    needed = (
        f"needs ≥ {own['needed']:,} {own.get('needed_unit') or 'runs per side'}"
        if isinstance(own.get("needed"), int)
        else ""
    )
    checks = []
    default_power = whitebox_audit_power(typed)
    for row in own.get("checks") or []:
        check = Check(**{k: v for k, v in row.items() if k in fields})
        if check.power is None and check.decides and check.name != "accountant vs training":
            check = replace(check, power=default_power)
        if not check.claim and check.decides:
            accountant = check.name == "accountant vs training"
            check = replace(
                check,
                claim=(
                    f"{check.subject}: the accountant matches the training"
                    if accountant
                    else claimed or f"{check.subject}: claimed trade-off curve"
                ),
                ceiling=None if accountant else own.get("ceiling"),
                needed="" if accountant else needed,
            )
        checks.append(check)
    verdict = decide(checks, alpha=1 - float(typed.bound.confidence or 1 - DEFAULT_ALPHA))
    for key in ("ceiling", "needed", "needed_unit"):
        verdict[key] = own.get(key)
    verdict["family_wise_error"]["statement"] = (own.get("family_wise_error") or {}).get(
        "statement", verdict["family_wise_error"]["statement"]
    )
    return verdict


def conformance_checks_verdict(kind: str, result: dict[str, Any]) -> dict[str, Any]:
    """Conformance checks: one claim per check, a Bonferroni family at the result's alpha."""
    typed = ConformanceResult.from_json(result)
    alpha = float(typed.alpha or 0.01)
    checks = [
        Check(
            c.check,
            "conformance check",
            f"{c.check}: {c.detail}",
            failed=not c.passed,
            assumption=f"one of a family of statistical checks at α {alpha:g}",
            power={
                "kind": "proven",
                "figure": None,
                "decider": "",
                "detail": "the check observes the mechanism's own noise, clipping or sampling directly",
            },
            claim=f"conformance: {c.check}",
        )
        for c in typed.checks
    ]
    verdict = decide(checks, alpha=alpha)
    verdict["family_wise_error"] = {
        "method": "bonferroni",
        "alpha": alpha,
        "n_tests": len(checks),
        "statement": f"a family of {len(checks)} statistical checks at family-wise α {alpha:g} (Bonferroni: "
        f"each at α/{len(checks) or 1}); a check that fails is a finding at that level",
    }
    return verdict


def canary_audit_verdict(kind: str, result: dict[str, Any]) -> dict[str, Any]:
    """A canary audit: `bound_verdict`, where a result that declares no power and reads input-space
    canaries from one final model (one-run, multi-canary) has none: a perfect attack's ceiling is not
    their power (issue #35)."""
    mode = read_bound_result(kind, result).mode_name
    final_model = {
        "kind": "none",
        "figure": None,
        "detail": f"{mode} canaries read from the final model cannot detect a trainer bug whose violation "
        "they do not expose (their power can be orders of magnitude below the ceiling)",
        "decider": "independent training runs decide (canary-audit --models 1600)",
    }
    return bound_verdict(kind, result, undeclared_power=final_model if mode in ("one-run", "multi-canary") else None)


def bound_verdict(
    kind: str, result: dict[str, Any], *, undeclared_power: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One pre-declared test: the claimed ε against the audit's ε lower bound (or its profile test).

    Args:
        kind: the kind's name (it prefixes the messages).
        result: the result (`claimed_epsilon`, `epsilon_lower_bound`, `confidence`, `ceiling`, ...).
        undeclared_power: the power where the result declares none (None: undeclared, read as proven).

    Returns:
        The verdict dict of one claim.
    """
    typed = read_bound_result(kind, result)
    test = typed.bound
    own = test.own  # the audit's own verdict (its ceiling, its reasons)
    claim, bound = test.claimed_epsilon, test.epsilon_lower_bound
    confidence = test.confidence or 1 - DEFAULT_ALPHA
    ceiling = typed.deciding_ceiling
    mode = typed.mode_name
    one_run = "one" in mode
    assumption = (
        "one training run, coin-flip canaries (proven)"
        if one_run
        else "independent training runs / mechanism draws: Clopper-Pearson over independent trials (proven)"
    )
    # A test that ran with a ceiling above the claim but without power against it (its mode's `power` is
    # "none", audit.dp_validation.mode_power) is not untestable: its claim reads "not refuted".
    not_refuted = test.claim_not_refuted  # the audit's own verdict, or one re-read from a file
    inconclusive = (
        test.status == "inconclusive"
        or own.get("status") == "inconclusive"
        or (isinstance(ceiling, (int, float)) and isinstance(claim, (int, float)) and ceiling <= claim)
    )
    failed = bool(test.violation) or test.status == "fail" or own.get("status") == "fail"
    subject = typed.subject_name(kind)
    if test.tests_profile:
        # A test against the claim's whole trade-off curve: its own verdict says what it refuted, and
        # its ceiling is "could a perfect attack refute the profile", not an ε at the claim's δ.
        inconclusive = own.get("status") == "inconclusive"
        assumption = (
            "independent training runs: exact binomial test of one rule's weighted error vs the claim's "
            "trade-off curve (a pessimistic-PLD lower envelope; proven)"
        )
    inconclusive = inconclusive and not not_refuted
    if failed and own.get("reasons") and test.tests_profile:
        message = _own_words(kind, own["reasons"])
    elif failed:
        message = (
            f"{kind}: the lower bound {bound:.3f} exceeds the claimed ε {claim:.3f} at {confidence:.0%} confidence"
        )
    elif inconclusive:
        message = (
            f"{kind}: untestable here — the ceiling {ceiling:.3f} of this audit is at or below "
            f"the claimed ε {claim:.3f}"
            if isinstance(ceiling, (int, float))
            else f"{kind}: untestable here — "
            f"{test.status_reason if typed.holds('status_reason') else 'the audit could not have refuted the claim'}"
        )
    else:
        message = f"{kind}: lower bound {bound:.3f} ≤ claimed ε {claim if claim is None else f'{claim:.3f}'}"
    if inconclusive and not failed and own.get("reasons"):
        message = _own_words(kind, own["reasons"])  # the audit's own words
    delta = test.delta
    claim_text = (
        f"{subject}: claimed (ε {claim:.4g}" + (f", δ {delta:g})" if isinstance(delta, (int, float)) else ")")
        if isinstance(claim, (int, float))
        else f"{subject}: its claim"
    )
    needed_n = typed.deciding_needed
    unit = typed.deciding_needed_unit or ("canaries" if one_run else "runs per side")
    needed = f"needs ≥ {needed_n:,} {unit}" if isinstance(needed_n, int) and not isinstance(needed_n, bool) else ""
    verdict = decide(
        [
            Check(
                subject,
                f"{kind} bound vs claim",
                message,
                failed=failed,
                inconclusive=inconclusive and not failed,
                assumption=assumption,
                claim=claim_text,
                power=audit_power(typed, undeclared_power),
                ceiling=float(ceiling) if isinstance(ceiling, (int, float)) else None,
                needed=needed if inconclusive and not failed else "",
            )
        ],
        alpha=1 - float(confidence),
    )
    looks = test.looks
    verdict["family_wise_error"]["statement"] = (
        f"one pre-declared group-sequential test over {len(looks)} looks ({test.spending} spending, "
        f"Bonferroni over the looks): family-wise error ≤ {1 - float(confidence):g}"
        if looks is not None and len(looks) > 1
        else "one pre-declared test at the stated confidence"
    )
    return verdict


def whitebox_audit_power(result: WhiteboxAuditResult) -> dict[str, Any] | None:
    """A white-box audit's power where its rows do not declare one: proven for Dirac canaries observed
    at every iterate (the ceiling is reachable); none when only the final model is observed (a bug can
    hide in the intermediate steps); None (undeclared) otherwise."""
    if result.observe == "all" and result.dirac:
        return {
            "kind": "proven",
            "figure": None,
            "decider": "",
            "detail": "worst-case Dirac gradient canaries observed at every iterate: the ceiling is reachable",
        }
    if result.observe not in (None, "all"):
        return {
            "kind": "none",
            "figure": None,
            "detail": "only the final model is observed: a violation in the intermediate steps can stay hidden",
            "decider": "observing every iterate decides (whitebox-audit --observe all)",
        }
    return None


def audit_power(result: BoundAuditResult, undeclared: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The power of a canary / mechanism audit against its claim: what the audit declared (`power`, set
    by audit.dp_validation per mode: proven, measured on the planted-bug suite, or a positive control),
    else `undeclared` (its kind's builder says what a result of this mode has)."""
    declared = result.bound.declared_power
    return undeclared if declared is None else declared


def single_audit_verdict_with_policy(
    kind: str, result: dict[str, Any], policy: Any, source: str = "results"
) -> tuple[dict[str, Any], Any]:
    """(verdict, PolicyEvaluation) of a canary / mechanism / conformance / accountant-check result
    under `policy` (`gate <kind>.json --policy P`). The policy's rules decide (`fail_on_violation`,
    on by default, reads the built-in verdict); a claim the audit could not have refuted stays
    inconclusive, and fails with `fail_on_inconclusive`."""
    from audit.machinery.policy import evaluate_policy_on_audit

    built_in = single_audit_verdict(kind, result)
    evaluation = evaluate_policy_on_audit(policy, kind, result, built_in, source=source)
    # The policy adds rules beside the audit's claims and never re-words them: the claims are the
    # built-in verdict's; the top line fails on a refuted claim or a failed rule (docs/verdict.md).
    verdict = dict(built_in)
    rules = [c.as_rule() for c in evaluation.checks]
    failed = [r for r in rules if r["status"] == "failed"]
    open_claims = [c for c in built_in["claims"] if c["status"] in ("untestable", "not_refuted")]
    status, reasons = built_in["status"], list(built_in["reasons"])
    if failed:
        reasons = (reasons if status == "fail" else []) + [
            f"policy rule {r['rule']} failed: {r['message']}" for r in failed
        ]
        status = "fail"
    elif status == "inconclusive" and policy.rules.fail_on_inconclusive:
        status = "fail"
        reasons = [
            f"{'untestable here' if c['status'] == 'untestable' else 'not refuted'} and the policy fails on "
            f"inconclusive: {c['reason']}"
            for c in open_claims
        ]
    source_name = evaluation.policy_path or evaluation.policy_name
    verdict.update(
        {
            "status": status,
            "passed": status == "pass",
            "reasons": reasons,
            "decided_by": f"policy {source_name}",
            "policy": source_name,
            "rules": rules,
            "rule_counts": {s: sum(1 for r in rules if r["status"] == s) for s in RULE_STATUSES},
        }
    )
    verdict["built_in"] = {"status": built_in["status"], "reasons": built_in["reasons"], "claims": built_in["claims"]}
    return verdict, evaluation


def _own_words(kind: str, reasons: Any) -> str:
    """The audit's own reasons as one line after its kind. A results file re-read by `gate` holds the verdict
    already written, whose reasons begin with the kind: it is named once ("canary-audit: inconclusive: …",
    not "canary-audit: canary-audit: inconclusive: …")."""
    words = (str(reason).removeprefix(f"{kind}: ") for reason in reasons)
    return f"{kind}: " + "; ".join(dict.fromkeys(words))
