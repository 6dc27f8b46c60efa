"""What an audit of a claim could have found, and the verdict that follows from it.

A bound of 0 from an audit whose ceiling (the best a perfect attack could reach with its runs, see
`audit.statistics.audit_ceilings`) is below the claim says nothing about the claim: such an audit
is *inconclusive*, never a pass. The verdict dict follows the shared contract
(`results["verdict"]`: status pass | fail | inconclusive, passed = status != "fail", one-line
reasons, decided_by).
"""

from __future__ import annotations

from typing import Any

__all__ = ["apply_power", "claim_verdict", "profile_verdict"]


def claim_verdict(
    *,
    bound: float,
    ceiling: float,
    claimed_epsilon: float,
    delta: float,
    needed: int | None,
    unit: str,
    confidence: float,
) -> dict[str, Any]:
    """Verdict of one (ε, δ) lower bound against the claimed ε, knowing the audit's ceiling.

    fail: bound > claim (a violation at `confidence`). inconclusive: ceiling ≤ claim, the audit
    could not have refuted the claim; `needed` (`unit`, e.g. "runs per side") says how many would
    have let a perfect attack do so (None: more than we searched). pass: neither — the audit
    could have refuted the claim and did not (which is still not a proof that the claim holds).
    """
    need_text = f"it needs ≥ {needed} {unit}" if needed is not None else f"no feasible number of {unit} would"
    if bound > claimed_epsilon:
        status = "fail"
        reasons = [
            f"refuted: empirical ε lower bound {bound:.3f} > claimed ε {claimed_epsilon:.3f} "
            f"(δ {delta:g}, {confidence:.0%} confidence)"
        ]
    elif ceiling <= claimed_epsilon:
        status = "inconclusive"
        reasons = [
            f"untestable here: this audit cannot refute ε = {claimed_epsilon:.3f}: a perfect attack reaches at "
            f"most {ceiling:.3f} here; {need_text}"
        ]
    else:
        status = "pass"
        reasons = [
            f"held: bound {bound:.3f} ≤ claimed ε {claimed_epsilon:.3f} (the audit could have "
            f"reached {ceiling:.3f}; a bound below the claim is not a proof that the claim holds)"
        ]
    return {
        "status": status,
        "passed": status == "pass",  # true only for PASS (an untestable claim is not a pass)
        "reasons": reasons,
        "decided_by": "built-in checks",
        "ceiling": float(ceiling),
        "needed": None if needed is None else int(needed),
        "needed_unit": unit,
    }


def profile_verdict(
    test: dict[str, Any], ceiling: dict[str, Any], *, claimed_epsilon: float, delta: float, n_runs: int
) -> dict[str, Any]:
    """Verdict of a test against the claim's whole trade-off curve
    (`audit.statistics.tradeoff_curves.profile_test`, its `tangent_test_ceiling`).

    fail: the exact test of the rule's weighted error rejects the claimed curve — the trainer's
    output is not consistent with the privacy profile its accountant states; the reason says where
    the output falls short (the profile pair that sets the curve there). inconclusive: even a
    perfect attack with these runs could not have refuted the profile. pass: it could have, and
    did not.
    """
    confidence = float(test["confidence"])
    where = (
        f"FPR {test['fpr']:.3f} with FNR {test['fnr']:.3f} against the claimed floor "
        f"{test['claimed_fnr_floor']:.3f} (exact test of {test['statistic']}: p = {test['p_value']:.2g})"
    )
    if test["refuted"]:
        pair = test["supporting_pair"]
        status = "fail"
        reasons = [
            f"refuted: the trainer's output is not consistent with the privacy profile its claim states "
            f"({test['profile']}) at {confidence:.0%} confidence: {where}; the claim (ε {claimed_epsilon:.3f} at "
            f"δ {delta:g}) sets that floor through its pair ({pair['epsilon']:.2f}, {pair['delta']:.3g})"
        ]
    elif not ceiling["refutable"]:
        status = "inconclusive"
        reasons = [
            f"untestable here: this audit cannot refute the claim's profile ({test['profile']}): even a perfect "
            f"attack (no error in {n_runs} runs) would reach only p = {ceiling['perfect_attack_p_value']:.2g} "
            f"against α = {1 - confidence:.2g}; use more runs (--models)"
        ]
    else:
        status = "pass"
        reasons = [f"held: {where}; a perfect attack could have refuted it (not a proof that the claim holds)"]
    return {
        "status": status,
        "passed": status == "pass",  # true only for PASS (an untestable claim is not a pass)
        "reasons": reasons,
        "decided_by": "built-in checks",
        "ceiling": None,
        "ceiling_statement": (
            f"a perfect attack with these runs could refute the claim's profile "
            f"(p = {ceiling['perfect_attack_p_value']:.2g})"
        )
        if ceiling["refutable"]
        else "no attack with these runs could refute the claim's profile",
        "needed": None,
        "needed_unit": "runs (--models)",
    }


def apply_power(verdict: dict[str, Any], power: dict[str, Any]) -> dict[str, Any]:
    """The verdict once the mode's power against the claim is known (`audit.dp_validation.mode_power`).

    A test that passed says "held" only with power against this claim (proven, measured or a positive
    control); without it the claim is *not refuted*: the top line is inconclusive (never a pass), and the reason
    says what this mode cannot detect and which mode would decide. A refuted or untestable verdict is unchanged.
    """
    out = {**verdict, "power": dict(power)}
    if verdict.get("status") != "pass" or power.get("kind") != "none":
        return out
    bound_words = str((verdict.get("reasons") or [""])[0]).removeprefix("held: ")
    out.update(
        status="inconclusive",
        passed=False,
        claim_status="not_refuted",
        reasons=[
            f"not refuted: {bound_words.split(' (')[0]}; {power.get('detail')}; would decide: {power.get('decider')}"
        ],
    )
    if out.get("ceiling_statement", "").startswith("a perfect attack"):
        out["ceiling_statement"] += " (a perfect attack, not this one: see the power)"
    return out
