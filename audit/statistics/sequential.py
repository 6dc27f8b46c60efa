"""Group-sequential testing: look at the evidence at pre-declared sizes, stop at the first look that
rejects, stay sound at every look.

An audit that plans N runs but looks after N/32, N/16, …, N and stops at the first look whose
p-value is at or below that look's level tests K hypotheses on nested data. Whatever the
dependence between the looks, the chance that ANY of them rejects a true claim is at most the sum
of their levels (the union bound, Bonferroni), so levels that add up to α give a test of level α
at every look and overall. Each look's test only needs to be valid on its own, given everything
the audit chose before it (for the profile canary audit: the rule and canary design chosen on pilot
runs that none of the tested runs share).

How α is split over the looks (`look_levels`):

* "haybittle-peto" (the default): a small equal level at every interim look, the rest at the
  last — Haybittle 1971 (Br. J. Radiology 44:793) and Peto et al. 1976 (Br. J. Cancer 34:585)
  stop early only on overwhelming evidence (p ≤ 0.001), which keeps the final look's test almost
  as strong as a fixed-size test's. Here the interim looks share α/10 (0.001 each for 6 looks at
  α = 0.05) and the last look keeps 0.9·α (0.045), with the Bonferroni correction that makes the
  total exactly α rather than Haybittle-Peto's "about α".
* "obrien-fleming": the levels are the increments of the Lan-DeMets spending function of the
  O'Brien-Fleming type, α(t) = 2 − 2Φ(z_{1−α/2}/√t) (Lan & DeMets 1983, Biometrika 70:659), again
  summed by Bonferroni (conservative: the classical boundaries use the joint normal law of the
  looks, which an exact binomial test over a curve does not have). It spends almost nothing early
  (α(1/2) = 0.0056 at α = 0.05, α(1/32) ≈ 10⁻²⁸, below what a double-precision p-value can show),
  so on this audit it stops early far less often; offered for users who pre-register it.
* "bonferroni": α/K at every look, the plain choice.

Pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scipy import stats

__all__ = [
    "SPENDING",
    "GroupSequentialDesign",
    "SequentialOutcome",
    "group_sequential_design",
    "look_levels",
    "look_sizes",
    "obrien_fleming_spending",
    "run_group_sequential",
    "smallest_rejecting_level",
]

SPENDING = ("haybittle-peto", "obrien-fleming", "bonferroni")
# Share of α the interim looks get together under "haybittle-peto" (the last look keeps the rest).
INTERIM_SHARE = 0.1


def obrien_fleming_spending(t: float, alpha: float) -> float:
    """α spent by information fraction t ∈ (0, 1]: 2 − 2Φ(z_{1−α/2}/√t), Lan & DeMets 1983 (Biometrika 70:659),
    the O'Brien-Fleming-type spending function (one-sided use of the two-sided form, as in their paper)."""
    if not (0.0 < t <= 1.0):
        raise ValueError(f"information fraction must lie in (0, 1], got {t!r}")
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    return float(2.0 * stats.norm.sf(stats.norm.isf(alpha / 2.0) / math.sqrt(t)))


def look_levels(
    sizes: tuple[int, ...] | list[int], alpha: float, spending: str = "haybittle-peto"
) -> tuple[float, ...]:
    """The nominal level of each look (ordered by size); they add up to `alpha` (Bonferroni over the looks)."""
    sizes = [int(n) for n in sizes]
    if not sizes or any(n < 1 for n in sizes) or sizes != sorted(set(sizes)):
        raise ValueError(f"look sizes must be increasing positive counts, got {sizes!r}")
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    k = len(sizes)
    if k == 1:
        return (float(alpha),)
    if spending == "haybittle-peto":
        interim = alpha * INTERIM_SHARE / (k - 1)
        return tuple([interim] * (k - 1) + [alpha - interim * (k - 1)])
    if spending == "bonferroni":
        return tuple([alpha / k] * k)
    if spending == "obrien-fleming":
        spent = [obrien_fleming_spending(n / sizes[-1], alpha) for n in sizes]
        return tuple(float(b - a) for a, b in zip([0.0] + spent[:-1], spent))
    raise ValueError(f"spending must be one of {', '.join(SPENDING)}, got {spending!r}")


def look_sizes(planned: int, max_looks: int, first_at_least: int = 1) -> tuple[int, ...]:
    """Sizes of the looks: the planned size halved (max_looks − 1) times, the looks below `first_at_least`
    dropped (a look too small to show anything only spends α); the last look is always the planned size."""
    planned, max_looks = int(planned), int(max_looks)
    if planned < 1 or max_looks < 1:
        raise ValueError(f"need planned ≥ 1 and max_looks ≥ 1, got {planned}, {max_looks}")
    sizes = {planned}
    for j in range(1, max_looks):
        n = planned >> j
        if n >= max(1, int(first_at_least)):
            sizes.add(n)
    return tuple(sorted(sizes))


@dataclass(frozen=True)
class GroupSequentialDesign:
    """What is declared before the first run: the looks (sizes), each look's level, the spending rule."""

    sizes: tuple[int, ...]
    levels: tuple[float, ...]
    alpha: float
    spending: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "looks": list(self.sizes),
            "levels": list(self.levels),
            "alpha": self.alpha,
            "spending": self.spending,
            "planned": self.sizes[-1],
        }

    def describe(self, unit: str = "runs") -> str:
        """One line a reader can check before the audit starts: planned size, looks, levels."""
        looks = ", ".join(f"{n:,} ({level:.2g})" for n, level in zip(self.sizes, self.levels))
        if len(self.sizes) == 1:
            return f"fixed size: {self.sizes[-1]:,} {unit}, one test at level {self.alpha:g}"
        return (
            f"sequential: {self.sizes[-1]:,} {unit} planned, {len(self.sizes)} looks after {looks} {unit} "
            f"(level in brackets; {self.spending} spending, Bonferroni over the looks: "
            f"family-wise α = {self.alpha:g}); "
            "it stops at the first look that refutes"
        )


def group_sequential_design(
    planned: int, alpha: float, *, max_looks: int = 6, first_at_least: int = 1, spending: str = "haybittle-peto"
) -> GroupSequentialDesign:
    """The design of an audit that plans `planned` trials: `look_sizes` and their `look_levels`."""
    sizes = look_sizes(planned, max_looks, first_at_least)
    return GroupSequentialDesign(sizes, look_levels(sizes, alpha, spending), float(alpha), spending)


@dataclass
class SequentialOutcome:
    """Where a group-sequential test stopped and why."""

    design: GroupSequentialDesign
    looks: list[dict[str, Any]] = field(default_factory=list)  # per look taken: size, level, p_value, rejected, ...
    stopped_at: int = 0  # index of the last look taken

    @property
    def rejected(self) -> bool:
        return bool(self.looks and self.looks[-1]["rejected"])

    @property
    def size_used(self) -> int:
        return int(self.design.sizes[self.stopped_at])

    def reason(self, unit: str = "runs") -> str:
        last = self.looks[-1]
        k, total = self.stopped_at + 1, len(self.design.sizes)
        if self.rejected:
            if last["p_value"] is None:  # a level-α test without a p-value: its own words
                evidence = f"{last.get('evidence') or 'its test rejected'}; look level {last['level']:.2g}"
            else:
                p = f"p = {last['p_value']:.2g}" if last["p_value"] > 1e-15 else "p ≤ 1e-15"
                evidence = f"{p} ≤ {'its level ' if k < total else ''}{last['level']:.2g}"
            return (
                f"stopped early: look {k} of {total} refuted the claim after {self.size_used:,} {unit} ({evidence})"
                if k < total
                else f"refuted at the last look ({self.size_used:,} {unit}, {evidence})"
            )
        if total == 1:
            return f"fixed size: all {self.size_used:,} {unit} were run"
        return (
            f"ran to the planned {self.size_used:,} {unit}: no look refuted the claim, and holding it needs "
            "the full planned size"
        )

    def summary(self, unit: str, runs_used: int, runs_planned: int) -> dict[str, Any]:
        """The `sequential` block of a result file: the declared design, runs used of runs planned, where and
        why it stopped, and every look taken."""
        return {
            **self.design.to_dict(),
            "description": self.design.describe(unit),
            "runs_planned": int(runs_planned),
            "runs_used": int(runs_used),
            "stopped_at_look": self.stopped_at + 1,
            "stopped_early": bool(self.stopped_at + 1 < len(self.design.sizes)),
            "stop_reason": self.reason(unit),
            "looks_taken": self.looks,
        }


def run_group_sequential(
    design: GroupSequentialDesign, look: Callable[[int, int, float], tuple[float, dict[str, Any]]]
) -> SequentialOutcome:
    """Take the looks in order: `look(index, size, level)` gathers the data up to `size`, tests it and
    returns (p-value, details); stop at the first p-value ≤ its level, else after the last look.

    A look whose test is a level-`level` test without an exact p-value (a Clopper-Pearson bound whose rule was
    chosen for that level) puts its decision in `details["rejected"]`; its p-value is then only shown, or NaN
    (recorded as None) with `details["evidence"]` saying in words what rejected.

    Sound at family-wise level `design.alpha` when each look's test is valid at its level given what was chosen
    before it (union bound over the looks; the levels add up to α)."""
    outcome = SequentialOutcome(design)
    for index, (size, level) in enumerate(zip(design.sizes, design.levels)):
        p_value, details = look(index, int(size), float(level))
        p_value = float(p_value)
        details = dict(details)
        rejected = bool(details.pop("rejected")) if "rejected" in details else bool(p_value <= level)
        outcome.looks.append(
            {
                "look": index + 1,
                "size": int(size),
                "level": float(level),
                "p_value": None if math.isnan(p_value) else p_value,  # NaN: the look's test has no p-value
                "rejected": rejected,
                **details,
            }
        )
        outcome.stopped_at = index
        if rejected:
            break
    return outcome


def smallest_rejecting_level(rejects: Callable[[float], bool], *, floor: float = 1e-15, steps: int = 20) -> float:
    """The p-value of a test given as a family of level-α decisions `rejects(α)` that is monotone in α (a fixed
    rule's Clopper-Pearson bound: the bound at confidence 1 − α only grows with α): the smallest α in
    [`floor`, 1] at which it rejects, by bisection on log α (1.0 when it rejects at no level below 1; `floor`
    when it rejects there already: confidences 1 − α closer to 1 are not representable in double precision)."""
    if not rejects(1.0 - 1e-12):
        return 1.0
    if rejects(floor):
        return float(floor)
    lo, hi = math.log(floor), math.log(1.0 - 1e-12)
    for _ in range(steps):
        mid = (lo + hi) / 2
        if rejects(math.exp(mid)):
            hi = mid
        else:
            lo = mid
    return float(math.exp(hi))
