"""Which canaries a one-run audit guesses on: a rule chosen on a random pilot part, used on the rest.

The one-run audits (Steinke, Nasr, Jagielski 2023, arXiv 2305.08846; Mahloujifar, Melis, Chaudhuri
2024, arXiv 2410.22235) guess "in" for high scores and "out" for low ones and abstain on the rest.
How many to guess must not be chosen by looking at the outcome it is then tested on. Trying a fixed
set of guess fractions with Bonferroni (what this package did before) has two costs that grow with
the number of canaries m: the fractions are relative, so the (ε, δ) bound pays its 2mδ term on
guess sets that are far too large or too small for the attack, and a finer grid pays more
Bonferroni. Both made the bound FALL as canaries were added (5.69 at 10⁴ → 5.47 at 10⁵ on Gaussian
scores with μ = 4; issue 27).

Here the rule is chosen on a random PILOT part of the candidates (a seeded permutation that never
looks at membership), maximising the bound the rest would give if it behaved like the pilot, and the
bound is computed on the other part only, as ONE pre-declared test at the full α. This is sound:
given the pilot's scores and coins, the rule is a fixed function of the model's output, and the
evaluation canaries' coins are still independent fair coins, so the theorems apply with m = the
evaluation part's size (the same construction as jax-privacy's `Split` strategy). The pilot costs
30 % of the canaries; in exchange nothing is paid for the search, so the search can be as wide as
the computation allows (a geometric grid of guess counts per side, then a finer local refinement)
and the bound's expectation does not fall as m grows (tests/test_one_run_monotone.py measures it).

Rules are score THRESHOLDS, not counts: "in" if score ≥ t_in, "out" if score ≤ t_out (and not
"in"). A tie group is then guessed whole or not at all, so input order never decides a guess.

Pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DEFAULT_PILOT_FRACTION",
    "GuessRule",
    "apply_guess_rule",
    "choose_guess_rule",
    "pilot_split",
    "pilot_size",
]

#: Share of the candidates used to choose the guess rule. 0.3 was chosen on simulated Gaussian
#: scores (μ = 1, 2, 4; m = 10³ … 10⁵), never on an audit's own scores: 0.5 left too few canaries to
#: evaluate at m = 10³, 0.2 made the choice noisy.
DEFAULT_PILOT_FRACTION = 0.3
DEFAULT_SEED = 0

# Criterion: (r, v, floor) -> the bound the evaluation part would give with r guesses, v right,
# or `floor` when it cannot beat `floor` (lets the criterion skip its root search).
Criterion = Callable[[int, int, float], float]


@dataclass(frozen=True)
class GuessRule:
    """Guess "in" when score ≥ `t_in` (never if inf), "out" when score ≤ `t_out` (never if -inf)."""

    t_in: float
    t_out: float
    pilot_in: int
    pilot_out: int


def pilot_size(m: int, fraction: float = DEFAULT_PILOT_FRACTION) -> int:
    """Candidates in the pilot part: round(fraction·m), at least 1 and leaving at least 1 (0 if m < 2)."""
    m = int(m)
    if m < 2:
        return 0
    return min(max(int(round(float(fraction) * m)), 1), m - 1)


def pilot_split(m: int, fraction: float = DEFAULT_PILOT_FRACTION, seed: int = DEFAULT_SEED):
    """(pilot, evaluation) index arrays: a seeded permutation of range(m), independent of membership."""
    order = np.random.default_rng(seed).permutation(int(m))
    n_pilot = pilot_size(m, fraction)
    return np.sort(order[:n_pilot]), np.sort(order[n_pilot:])


def _geometric_counts(n: int) -> list[int]:
    counts, k = [0], 1
    while k <= n:
        counts.append(k)
        k *= 2
    return counts


def choose_guess_rule(scores, members, n_eval: int, criterion: Criterion) -> GuessRule | None:
    """The rule (t_in, t_out) on the PILOT scores whose anticipated evaluation bound is largest.

    Each candidate guesses the k_in highest and k_out lowest pilot scores (k on a doubling grid per
    side, then refined by factors 2^(j/8) around the best). Its anticipated evaluation counts scale
    the pilot's by n_eval / n_pilot, with one extra wrong guess (Laplace's rule: a pilot tail with
    no error is not promised to stay perfect). None when no candidate gives a positive bound.
    """
    s = np.asarray(scores, dtype=float)
    mem = np.asarray(members, dtype=bool)
    n = s.size
    if n == 0 or n_eval < 1:
        return None
    order = np.argsort(s, kind="stable")
    s_sorted, m_sorted = s[order], mem[order]
    right_top = np.r_[0, np.cumsum(m_sorted[::-1])]
    right_bottom = np.r_[0, np.cumsum(~m_sorted)]
    scale = n_eval / n

    def anticipated(k_in: int, k_out: int) -> tuple[int, int]:
        r = k_in + k_out
        wrong = r - int(right_top[k_in] + right_bottom[k_out])
        r_eval = min(n_eval, max(1, int(round(r * scale))))
        v_eval = max(0, int(math.floor(r_eval - (wrong + 1) * scale)))
        return r_eval, v_eval

    best_value, best = 0.0, None

    def consider(pairs) -> None:
        nonlocal best_value, best
        rows = []
        for k_in, k_out in pairs:
            if 0 < k_in + k_out <= n:
                r, v = anticipated(k_in, k_out)
                rows.append((v / r, k_in, k_out, r, v))
        rows.sort(reverse=True)  # most precise first: later ones are mostly pruned by the floor
        for _, k_in, k_out, r, v in rows:
            value = criterion(r, v, best_value)
            if value > best_value:
                best_value, best = value, (k_in, k_out)

    grid = _geometric_counts(n)
    consider([(a, b) for a in grid for b in grid])
    if best is None:
        return None
    k_in, k_out = best
    steps = [2 ** (j / 8) for j in range(-7, 8) if j]
    consider([(int(round(k_in * f)), k_out) for f in steps] if k_in else [])
    k_in, k_out = best
    consider([(k_in, int(round(k_out * f))) for f in steps] if k_out else [])
    k_in, k_out = best
    return GuessRule(
        t_in=float(s_sorted[n - k_in]) if k_in else math.inf,
        t_out=float(s_sorted[k_out - 1]) if k_out else -math.inf,
        pilot_in=int(k_in),
        pilot_out=int(k_out),
    )


def apply_guess_rule(scores, members, rule: GuessRule | None) -> dict[str, int]:
    """Guesses of `rule` on the evaluation scores: k_plus ("in"), k_minus ("out"), r and v (right)."""
    s = np.asarray(scores, dtype=float)
    mem = np.asarray(members, dtype=bool)
    if rule is None:
        return {"k_plus": 0, "k_minus": 0, "r": 0, "v": 0}
    guess_in = s >= rule.t_in
    guess_out = (s <= rule.t_out) & ~guess_in
    k_plus, k_minus = int(guess_in.sum()), int(guess_out.sum())
    v = int(mem[guess_in].sum()) + int((~mem[guess_out]).sum())
    return {"k_plus": k_plus, "k_minus": k_minus, "r": k_plus + k_minus, "v": v}
