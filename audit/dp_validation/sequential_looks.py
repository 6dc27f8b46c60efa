"""The declared looks of the DP-validation audits that spend many runs (issue #40): the profile canary audit,
`whitebox-audit --mode runs` and `mechanism-audit`.

Each plans a size, splits α over up to `looks` looks at the planned size halved each time (none below the audit's
smallest useful look) and stops at the first look that refutes (`audit.statistics.sequential`: group-sequential
testing, Haybittle-Peto-type α spending by default, Bonferroni over the looks). The design is fixed here, before
the first run, from the arguments alone, so a caller can print it first; `looks=1` is the fixed-size audit at the
full level.
"""

from __future__ import annotations

from audit.errors import AuditInputError
from audit.statistics.sequential import SPENDING, GroupSequentialDesign, group_sequential_design

__all__ = ["DEFAULT_LOOKS", "declared_design"]

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
