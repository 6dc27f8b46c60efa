"""What an audit of a claim could have found, and the verdict that follows from it.

A bound of 0 from an audit whose ceiling (the best a perfect attack could reach with its runs, see
`audit.statistics.audit_ceilings`) is below the claim says nothing about the claim: such an audit
is *inconclusive*, never a pass. The verdict dict follows the shared contract
(`results["verdict"]`: status pass | fail | inconclusive, passed = status != "fail", one-line
reasons, decided_by).
"""
from __future__ import annotations

from typing import Any

__all__ = ["claim_verdict"]


def claim_verdict(*, bound: float, ceiling: float, claimed_epsilon: float, delta: float,
                  needed: int | None, unit: str, confidence: float) -> dict[str, Any]:
    """Verdict of one (ε, δ) lower bound against the claimed ε, knowing the audit's ceiling.

    fail: bound > claim (a violation at `confidence`). inconclusive: ceiling ≤ claim, the audit
    could not have refuted the claim; `needed` (`unit`, e.g. "runs per side") says how many would
    have let a perfect attack do so (None: more than we searched). pass: neither — the audit
    could have refuted the claim and did not (which is still not a proof that the claim holds).
    """
    need_text = f"it needs ≥ {needed} {unit}" if needed is not None else f"no feasible number of {unit} would"
    if bound > claimed_epsilon:
        status = "fail"
        reasons = [f"violation: empirical ε lower bound {bound:.3f} > claimed ε {claimed_epsilon:.3f} "
                   f"(δ {delta:g}, {confidence:.0%} confidence)"]
    elif ceiling <= claimed_epsilon:
        status = "inconclusive"
        reasons = [f"inconclusive: this audit cannot refute ε = {claimed_epsilon:.3f}: a perfect attack reaches at "
                   f"most {ceiling:.3f} here; {need_text}"]
    else:
        status = "pass"
        reasons = [f"no violation: bound {bound:.3f} ≤ claimed ε {claimed_epsilon:.3f} (the audit could have "
                   f"reached {ceiling:.3f}; a bound below the claim is not a proof that the claim holds)"]
    return {
        "status": status,
        "passed": status != "fail",
        "reasons": reasons,
        "decided_by": "built-in checks",
        "ceiling": float(ceiling),
        "needed": None if needed is None else int(needed),
        "needed_unit": unit,
    }
