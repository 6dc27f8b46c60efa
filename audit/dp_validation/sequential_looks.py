"""The declared looks of the DP-validation audits that spend many runs (issue #40): the profile canary audit,
`whitebox-audit --mode runs` and `mechanism-audit`.

Each plans a size, splits α over up to `looks` looks at the planned size halved each time (none below the audit's
smallest useful look) and stops at the first look that refutes (`audit.statistics.sequential`: group-sequential
testing, Haybittle-Peto-type α spending by default, Bonferroni over the looks). The design is fixed here, before
the first run, from the arguments alone, so a caller can print it first; `looks=1` is the fixed-size audit at the
full level.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from audit.errors import AuditInputError
from audit.statistics.epsilon_bounds import epsilon_lower_bound_from_counts
from audit.statistics.sequential import (
    SPENDING,
    GroupSequentialDesign,
    SequentialOutcome,
    group_sequential_design,
    run_group_sequential,
    smallest_rejecting_level,
)
from audit.statistics.threshold_audit import threshold_audit

__all__ = ["DEFAULT_LOOKS", "declared_design", "look_confidence", "sequential_threshold_audit"]

# At most this many looks (the planned size halved each time): 6 looks at 1/32 … 1 of the plan.
DEFAULT_LOOKS = 6


def declared_design(
    planned: int,
    confidence: float = 0.95,
    *,
    looks: int | None = DEFAULT_LOOKS,
    spending: str = "haybittle-peto",
    first_look: int = 1,
) -> GroupSequentialDesign:
    """The looks of an audit of `planned` runs (trials, runs per side: the caller's unit) at family-wise
    α = 1 − `confidence`: the planned size halved up to `looks` − 1 times, no look below `first_look`, α split by
    `spending`. Errors name the parameter (`looks`, `spending`); the commands show them as flags."""
    from audit.machinery.limits import check_count

    looks = check_count("--looks", DEFAULT_LOOKS if looks is None else looks, where="looks")
    if spending not in SPENDING:
        raise AuditInputError("spending", f"expected one of {', '.join(SPENDING)}, got {spending!r}")
    return group_sequential_design(
        int(planned), 1.0 - float(confidence), max_looks=looks, first_at_least=int(first_look), spending=spending
    )


def look_confidence(design: GroupSequentialDesign, confidence: float, level: float) -> float:
    """The confidence of one look's test: 1 − its level (the fixed design keeps the caller's number, bit for bit)."""
    return float(confidence) if len(design.sizes) == 1 else 1.0 - float(level)


def threshold_p_value(audit: dict[str, Any], epsilon: float, delta: float) -> float:
    """The smallest α at which a threshold audit's rule, kept fixed, refutes `epsilon` on its evaluation counts
    (shown beside the decision; the decision is the look's own Clopper-Pearson bound at its level)."""
    counts = audit["evaluation"]

    def refutes(alpha: float) -> bool:
        bound = epsilon_lower_bound_from_counts(
            counts["false_positives"],
            counts["n_negative"],
            counts["false_negatives"],
            counts["n_positive"],
            delta,
            1.0 - alpha,
        )
        return bool(bound > epsilon)

    return smallest_rejecting_level(refutes)


def sequential_threshold_audit(
    design: GroupSequentialDesign,
    draw: Callable[[int], tuple[np.ndarray, np.ndarray]],
    *,
    epsilon: float,
    delta: float,
    confidence: float,
) -> tuple[SequentialOutcome, dict[str, Any]]:
    """The held-out threshold audit (`audit.statistics.threshold_audit`) at each look of `design`: `draw(size)`
    returns the first `size` scores of each side (positive, negative), drawn or trained as far as needed; the first
    half of them choose the rule and the second half test it at the look's level, so each look is valid on its own
    and the union bound keeps the family-wise level. Stops at the first look whose bound exceeds `epsilon`. Returns
    the outcome and the deciding look's audit (its `confidence` is the look's)."""
    last: dict[str, Any] = {}

    def look(index: int, size: int, level: float) -> tuple[float, dict[str, Any]]:
        positive, negative = draw(size)
        audit = threshold_audit(positive, negative, delta=delta, confidence=look_confidence(design, confidence, level))
        last["audit"] = audit
        bound = audit["epsilon_lower_bound"]
        return threshold_p_value(audit, epsilon, delta), {
            "rejected": bool(bound > epsilon),
            "epsilon_lower_bound": bound,
        }

    outcome = run_group_sequential(design, look)
    return outcome, last["audit"]
