"""The verdicts of the single-claim audits: canary-audit, mechanism-audit, whitebox-audit,
conformance and accountant-check, in the vocabulary of audit.machinery.verdict (one status per claim:
held / refuted / untestable, the top line from them), with or without a policy.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from audit.machinery.verdict import DEFAULT_ALPHA, Check, decide

__all__ = ["single_audit_verdict", "single_audit_verdict_with_policy"]


def single_audit_verdict(kind: str, result: dict[str, Any]) -> dict[str, Any]:
    """The verdict of a canary / mechanism audit (one pre-declared test) or an accountant check."""
    if kind == "accountant-check":
        checks = []
        for point in result.get("points") or []:
            where = f"σ={point.get('noise_multiplier'):g} q={point.get('sample_rate'):g} T={point.get('steps')} δ={point.get('delta'):g}"
            bad = point.get("label") in ("unsound", "invalid")
            checks.append(Check(where, "accountant vs PLD interval", f"{point.get('label')}: {point.get('message')}",
                                failed=bad, assumption="true ε lies in the PLD interval [lower, upper]",
                                claim=f"accountant at {where}: its ε is at least the true ε"))
        return decide(checks)
    if kind == "whitebox-audit":
        # Its checks (refutation of the claimed curve, accountant agreement) come with the result:
        # re-deciding them here keeps the run, `report` and the MLflow tag on one verdict.
        own = result.get("verdict") or {}
        fields = set(Check.__dataclass_fields__)
        claimed = (f"{result.get('subject') or 'training'}: claimed (ε {result.get('claimed_epsilon'):.4g}, "
                   f"δ {result.get('delta'):g})" if isinstance(result.get("claimed_epsilon"), (int, float))
                   and isinstance(result.get("delta"), (int, float)) else "")
        needed = (f"needs ≥ {own['needed']:,} {own.get('needed_unit') or 'runs per side'}"
                  if isinstance(own.get("needed"), int) else "")
        checks = []
        for row in own.get("checks") or []:
            check = Check(**{k: v for k, v in row.items() if k in fields})
            if not check.claim and check.decides:
                accountant = check.name == "accountant vs training"
                check = replace(check, claim=(f"{check.subject}: the accountant matches the training" if accountant
                                              else claimed or f"{check.subject}: claimed trade-off curve"),
                                ceiling=None if accountant else own.get("ceiling"),
                                needed="" if accountant else needed)
            checks.append(check)
        verdict = decide(checks, alpha=1 - float(result.get("confidence") or 1 - DEFAULT_ALPHA))
        for key in ("ceiling", "needed", "needed_unit"):
            verdict[key] = own.get(key)
        verdict["family_wise_error"]["statement"] = (own.get("family_wise_error") or {}).get(
            "statement", verdict["family_wise_error"]["statement"])
        return verdict
    if kind == "conformance":
        alpha = float(result.get("alpha") or 0.01)
        checks = [Check(str(c.get("check")), "conformance check", f"{c.get('check')}: {c.get('detail')}",
                        failed=not c.get("passed"), assumption=f"one of a family of statistical checks at α {alpha:g}",
                        claim=f"conformance: {c.get('check')}")
                  for c in result.get("checks") or [] if isinstance(c, dict)]
        verdict = decide(checks, alpha=alpha)
        verdict["family_wise_error"] = {
            "method": "bonferroni", "alpha": alpha, "n_tests": len(checks),
            "statement": f"a family of {len(checks)} statistical checks at family-wise α {alpha:g} (Bonferroni: "
                         f"each at α/{len(checks) or 1}); a check that fails is a finding at that level"}
        return verdict
    own = result.get("verdict") if isinstance(result.get("verdict"), dict) else {}  # the audit's own (ceiling)
    claim = result.get("claimed_epsilon")
    bound = result.get("epsilon_lower_bound")
    confidence = result.get("confidence") or 1 - DEFAULT_ALPHA
    ceiling = result.get("ceiling", own.get("ceiling"))
    mode = str(result.get("mode") or "")
    one_run = "one" in mode
    assumption = ("one training run, coin-flip canaries (proven)" if one_run else
                  "independent training runs / mechanism draws: Clopper-Pearson over independent trials (proven)")
    # A test that ran with a ceiling above the claim but without power against it (its mode's `power` is
    # "none", audit.dp_validation.mode_power) is not untestable: its claim reads "not refuted".
    not_refuted = (own.get("claim_status") == "not_refuted"  # the audit's own verdict, or one re-read from a file
                   or any(isinstance(c, dict) and c.get("status") == "not_refuted" for c in own.get("claims") or []))
    inconclusive = (result.get("status") == "inconclusive" or own.get("status") == "inconclusive"
                    or (isinstance(ceiling, (int, float)) and isinstance(claim, (int, float)) and ceiling <= claim))
    failed = bool(result.get("violation")) or result.get("status") == "fail" or own.get("status") == "fail"
    subject = str(result.get("trainer") or result.get("mechanism") or kind)
    if isinstance(result.get("profile_test"), dict):
        # A test against the claim's whole trade-off curve: its own verdict says what it refuted, and
        # its ceiling is "could a perfect attack refute the profile", not an ε at the claim's δ.
        inconclusive = own.get("status") == "inconclusive"
        assumption = ("independent training runs: exact binomial test of one rule's weighted error vs the claim's "
                      "trade-off curve (a pessimistic-PLD lower envelope; proven)")
    inconclusive = inconclusive and not not_refuted
    if failed and own.get("reasons") and isinstance(result.get("profile_test"), dict):
        message = f"{kind}: " + "; ".join(dict.fromkeys(map(str, own["reasons"])))
    elif failed:
        message = f"{kind}: the lower bound {bound:.3f} exceeds the claimed ε {claim:.3f} at {confidence:.0%} confidence"
    elif inconclusive:
        message = (f"{kind}: untestable here — the ceiling {ceiling:.3f} of this audit is at or below the claimed ε {claim:.3f}"
                   if isinstance(ceiling, (int, float)) else f"{kind}: untestable here — {result.get('status_reason', 'the audit could not have refuted the claim')}")
    else:
        message = f"{kind}: lower bound {bound:.3f} ≤ claimed ε {claim if claim is None else f'{claim:.3f}'}"
    if inconclusive and not failed and own.get("reasons"):
        message = f"{kind}: " + "; ".join(dict.fromkeys(map(str, own["reasons"])))  # the audit's own words
    delta = result.get("delta")
    claim_text = (f"{subject}: claimed (ε {claim:.4g}" + (f", δ {delta:g})" if isinstance(delta, (int, float)) else ")")
                  if isinstance(claim, (int, float)) else f"{subject}: its claim")
    needed_n = result.get("needed", own.get("needed"))
    unit = result.get("needed_unit", own.get("needed_unit")) or ("canaries" if one_run else "runs per side")
    needed = f"needs ≥ {needed_n:,} {unit}" if isinstance(needed_n, int) and not isinstance(needed_n, bool) else ""
    verdict = decide([Check(subject, f"{kind} bound vs claim", message, failed=failed,
                            inconclusive=inconclusive and not failed, assumption=assumption, claim=claim_text,
                            ceiling=float(ceiling) if isinstance(ceiling, (int, float)) else None,
                            needed=needed if inconclusive and not failed else "",
                            power=result.get("power") or own.get("power"))],
                     alpha=1 - float(confidence))
    verdict["family_wise_error"]["statement"] = "one pre-declared test at the stated confidence"
    return verdict


def single_audit_verdict_with_policy(kind: str, result: dict[str, Any], policy: Any,
                                     source: str = "results") -> tuple[dict[str, Any], Any]:
    """(verdict, PolicyEvaluation) of a canary / mechanism / conformance / accountant-check result
    under `policy` (`gate <kind>.json --policy P`). The policy's rules decide (`fail_on_violation`,
    on by default, reads the built-in verdict); a claim the audit could not have refuted stays
    inconclusive, and fails with `fail_on_inconclusive`."""
    from audit.machinery.policy import evaluate_policy_on_audit

    built_in = single_audit_verdict(kind, result)
    evaluation = evaluate_policy_on_audit(policy, kind, result, built_in, source=source)
    checks = [Check(c.target_label, c.rule, c.message, failed=c.applicable and not c.passed,
                    decides=c.applicable, assumption="policy rule", claim=f"policy rule {c.rule} on {c.target_label}")
              for c in evaluation.checks]
    fields = set(Check.__dataclass_fields__)
    checks += [Check(**{**{k: v for k, v in c.items() if k in fields}, "p_value": None, "inconclusive": True})
               for c in built_in["checks"] if c["outcome"] == "inconclusive"]
    source_name = evaluation.policy_path or evaluation.policy_name
    rules = policy.rules
    verdict = decide(checks, alpha=built_in["family_wise_error"]["alpha"], decided_by=f"policy {source_name}",
                     fail_on_inconclusive=bool(rules.fail_on_inconclusive))
    verdict["family_wise_error"]["statement"] = built_in["family_wise_error"]["statement"]
    verdict["built_in"] = {"status": built_in["status"], "reasons": built_in["reasons"], "claims": built_in["claims"]}
    return verdict, evaluation
