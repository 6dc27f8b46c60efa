"""Audit ceilings: the largest ε lower bound a PERFECT attack could reach with this many runs.

An audit's bound is limited twice: by how well the attack tells the two worlds apart, and by how
many independent trials it has. The second limit does not depend on the mechanism at all: with
n evaluation runs per side and no error on any of them, the one-sided Clopper-Pearson upper
bounds on FPR and FNR are still 1 − (α/2)^{1/n}, and the (ε, δ) bound cannot exceed
ln((1 − δ − FNR̄)/FPR̄). When that ceiling is at or below the claimed ε, the audit could not have
refuted the claim whatever the code does: it is *inconclusive*, not a pass (docs/statistics.md,
"The verdict"). The same holds for the one-run audit of Steinke, Nasr, Jagielski 2023 (arXiv
2305.08846): all r guesses correct is the best outcome m canaries can give.

Pure functions, no I/O.
"""

from __future__ import annotations

import math

from audit.statistics.epsilon_bounds import (
    epsilon_lower_bound_from_counts,
    one_run_ceiling,
)
from audit.statistics.one_run_guesses import DEFAULT_PILOT_FRACTION

__all__ = [
    "ceiling_one_run",
    "ceiling_threshold_audit",
    "evaluation_runs",
    "canaries_needed_one_run",
    "runs_needed_threshold_audit",
    "smallest_sufficient",
]

# Beyond this many runs or canaries per side we say "more than" instead of searching on.
SEARCH_LIMIT = 10**7


def smallest_sufficient(enough, start: int, limit: int) -> int | None:
    """Smallest n ≥ `start` with `enough(n)` for a predicate that stays true once true (a ceiling
    that does not fall as runs are added): doubling, then bisection. None when n would pass `limit`."""
    lo, hi = start - 1, start
    while not enough(hi):
        lo, hi = hi, 2 * hi
        if hi > limit:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi


def evaluation_runs(n_per_side: int, selection_fraction: float = 0.5) -> int:
    """Runs per side left for evaluation once `threshold_audit` took ⌊fraction·n⌋ (≥ 1) to choose."""
    n = int(n_per_side)
    n_sel = min(max(int(selection_fraction * n), 1), n - 1)
    return n - n_sel


def ceiling_threshold_audit(
    n_positive_eval: int, n_negative_eval: int, delta: float, confidence: float = 0.95
) -> float:
    """Largest (ε, δ) lower bound a threshold audit with these evaluation counts can give.

    A perfect attack (no false positive among `n_negative_eval`, no false negative among
    `n_positive_eval`) fed to `epsilon_lower_bound_from_counts` (Clopper-Pearson, Jagielski,
    Ullman, Oprea 2020, arXiv 2006.07709): 1.84 with 25 runs per side at 95 % and δ = 1e-5,
    3.28 with 100, 5.60 with 1000.
    """
    return epsilon_lower_bound_from_counts(0, int(n_negative_eval), 0, int(n_positive_eval), delta, confidence)


def runs_needed_threshold_audit(
    claimed_epsilon: float, delta: float, confidence: float = 0.95, selection_fraction: float = 0.5
) -> int | None:
    """Smallest number of runs PER SIDE whose ceiling exceeds `claimed_epsilon` (None: > 10⁷).

    Closed form for the evaluation count n: with u = 1 − (α/2)^{1/n} the ceiling is
    ln((1 − δ − u)/u) > ε ⇔ u < (1 − δ)/(1 + e^ε); then the smallest total whose held-out part
    has n runs, checked against `ceiling_threshold_audit` itself.
    """
    eps = float(claimed_epsilon)
    alpha = 1.0 - float(confidence)
    u_star = (1.0 - float(delta)) / (1.0 + math.exp(eps))
    n_eval = max(1, math.floor(math.log(alpha / 2) / math.log1p(-u_star)) + 1)
    n = max(2, 2 * n_eval - 1)
    if n > SEARCH_LIMIT:
        return None

    def enough(k: int) -> bool:
        m = evaluation_runs(k, selection_fraction)
        return ceiling_threshold_audit(m, m, delta, confidence) > eps

    # The ceiling does not fall as runs are added, so walk from the closed form to the exact edge
    # (floating point can put the closed form one run off).
    while not enough(n):
        n += 1
    while n > 2 and enough(n - 1):
        n -= 1
    return n


def ceiling_one_run(
    n_canaries: int, delta: float, confidence: float = 0.95, pilot_fraction: float = DEFAULT_PILOT_FRACTION
) -> float:
    """Largest bound `epsilon_lower_bound_one_run` can return with m = `n_canaries` canaries.

    Steinke, Nasr, Jagielski 2023 (arXiv 2305.08846): the guess rule is chosen on a pilot part and
    the bound computed on the other m_eval candidates at the full α; at best every one of them is
    guessed and every guess is right (`one_run_ceiling`). With m = 200 at 95 % and δ = 1e-5 this is
    far below 3 (one run is cheap, not strong).
    """
    return one_run_ceiling(int(n_canaries), float(delta), 1.0 - float(confidence), float(pilot_fraction))


def canaries_needed_one_run(
    claimed_epsilon: float,
    delta: float,
    confidence: float = 0.95,
    pilot_fraction: float = DEFAULT_PILOT_FRACTION,
    limit: int = 10**6,
) -> int | None:
    """Smallest m (canaries in one run) whose `ceiling_one_run` exceeds the claim; None: > `limit`.

    Even a perfect attack's bound stays below about ln(α / 2δ) (the 2mδ term of the p-value), so
    for a large claim no m suffices: then None.
    """
    eps = float(claimed_epsilon)

    return smallest_sufficient(
        lambda m: ceiling_one_run(m, delta, confidence, pilot_fraction) > eps, start=2, limit=limit
    )
