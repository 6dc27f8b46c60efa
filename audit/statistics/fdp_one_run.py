"""The one-run f-DP audit: many coin-flipped canaries, one mechanism run, tested against a trade-off curve.

Mahloujifar, Melis, Chaudhuri 2024, "Auditing f-Differential Privacy in One Run", arXiv 2410.22235
(the recursion with abstentions, their Algorithm "audit with cap"). Setting as in Steinke, Nasr,
Jagielski 2023 (arXiv 2305.08846): m canaries, each inserted by an independent fair coin; the
auditor guesses "in" or "out" for c' of them (abstaining on the rest) and c guesses are right. If
the mechanism is f-DP for every canary, the probability of c or more right guesses is small unless
a bound computed from f alone allows it; when it does not, the f-DP claim is refuted at the
stated significance. Sound for ANY mechanism (no independence between canaries is assumed), and
tighter than Steinke et al.'s (ε, δ) analysis because it uses the whole curve f.

The curve enters through its *inverse blow-up* f̄⁻¹(y) = inf{x : 1 − f(x) ≥ y}: the smallest
false-positive rate at which a test can reach power y. For μ-GDP, f̄⁻¹(y) = Φ(Φ⁻¹(y) − μ); for
a privacy profile {(ε_i, δ_i)} (`tradeoff_curves.PrivacyProfile`), 1 − f is the minimum of the
lines δ_i + e^{ε_i} x and 1 − e^{−ε_i}(1 − δ_i − x), so f̄⁻¹(y) = max_i max((y − δ_i) e^{−ε_i},
1 − δ_i − (1 − y) e^{ε_i}) (floored at 0). A pessimistic profile is a weaker claim, so using it
can only make refutation harder (conservative).

Pure functions, no I/O.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import optimize, special

from audit.statistics.tradeoff_curves import PrivacyProfile

__all__ = [
    "fdp_one_run_audit",
    "fdp_one_run_epsilon_gdp",
    "fdp_one_run_refutes",
    "gdp_blow_up_inverse",
    "profile_blow_up_inverse",
]

DEFAULT_GUESS_FRACTIONS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)


def gdp_blow_up_inverse(mu: float) -> Callable[[float], float]:
    """f̄⁻¹ of μ-GDP: y ↦ Φ(Φ⁻¹(y) − μ) (Dong, Roth, Su 2019, arXiv 1905.02383)."""
    m = float(mu)
    return lambda y: float(special.ndtr(special.ndtri(min(max(y, 0.0), 1.0)) - m))


def profile_blow_up_inverse(profile: PrivacyProfile) -> Callable[[float], float]:
    """f̄⁻¹ of the curve a privacy profile implies (see the module docstring)."""
    eps, deltas = profile.arrays()
    scale_down, scale_up = np.exp(-eps), np.exp(eps)

    def inverse(y: float) -> float:
        y = min(max(float(y), 0.0), 1.0)
        first = (y - deltas) * scale_down
        second = 1.0 - deltas - (1.0 - y) * scale_up
        return float(min(1.0, max(0.0, np.max(first), np.max(second))))

    return inverse


def _check_counts(m: int, n_guess: int, n_correct: int) -> tuple[int, int, int]:
    m_, g, c = int(m), int(n_guess), int(n_correct)
    if not (0 <= c <= g <= m and m >= 1):
        raise ValueError(f"need 0 ≤ correct ≤ guesses ≤ canaries, canaries ≥ 1; got {n_correct}, {n_guess}, {m}")
    return m_, g, c


def _excess(blow_up_inverse: Callable[[float], float], m: int, n_guess: int, n_correct: int, alpha: float) -> float:
    """r₀ + h₀ − c'/m of the recursion: > 0 means P[≥ c right guesses] < alpha under the curve."""
    r = alpha * n_correct / m  # mass the right guesses must carry at level alpha
    h = alpha * (n_guess - n_correct) / m  # ... and the wrong ones
    for i in range(n_correct - 1, -1, -1):
        h_next = max(h, blow_up_inverse(r))
        if h_next == h:  # from here on neither value changes
            break
        r = min(1.0, r + i / (n_guess - i) * (h_next - h))
        h = h_next
    return r + h - n_guess / m


def fdp_one_run_refutes(blow_up_inverse: Callable[[float], float], m: int, n_guess: int, n_correct: int,
                        alpha: float = 0.05) -> bool:
    """True when `n_correct` right guesses out of `n_guess` (m canaries) are impossible, at
    significance `alpha`, for a mechanism whose curve has inverse blow-up `blow_up_inverse`
    (Mahloujifar, Melis, Chaudhuri 2024, arXiv 2410.22235)."""
    m_, g, c = _check_counts(m, n_guess, n_correct)
    if g == 0 or c == 0:
        return False
    return _excess(blow_up_inverse, m_, g, c, float(alpha)) > 0


def fdp_one_run_epsilon_gdp(m: int, n_guess: int, n_correct: int, alpha: float, delta: float) -> float:
    """The largest ε such that "μ-GDP with (ε, δ) on its curve" is refuted by these counts, 0 if none.

    A GDP-family statement: the mechanism is less private than the Gaussian mechanism whose curve
    passes through (ε, δ). It is a lower bound on the mechanism's ε at δ only if its trade-off
    curve is Gaussian (DP-SGD's is close to it in the middle, not in the tails): label it so.
    """
    m_, g, c = _check_counts(m, n_guess, n_correct)
    if g == 0 or c == 0:
        return 0.0
    from dp_accounting import get_sigma_gaussian

    def refuted(eps: float) -> float:
        sigma = get_sigma_gaussian(eps, delta)
        inverse = (lambda y: float(y >= 1.0)) if sigma == 0 else gdp_blow_up_inverse(1.0 / sigma)
        return _excess(inverse, m_, g, c, float(alpha))

    low = 1e-6
    if refuted(low) <= 0:
        return 0.0
    high = 1.0
    while refuted(high) > 0:
        low, high = high, 2 * high
        if high > 1e3:
            return math.inf
    return float(optimize.brentq(refuted, low, high, xtol=1e-6))


def _guess_counts(scores: np.ndarray, members: np.ndarray, fraction: float) -> tuple[int, int]:
    """Guess "in" for the ⌊f·m/2⌋ highest scores and "out" for as many lowest: (guesses, right)."""
    n = scores.size
    k = int(math.floor(fraction * n / 2))
    if k == 0:
        return 0, 0
    order = np.argsort(scores, kind="stable")
    right = int(members[order[n - k:]].sum()) + int((~members[order[:k]]).sum())
    return 2 * k, right


def fdp_one_run_audit(scores, members, profile: PrivacyProfile, *, delta: float, confidence: float = 0.95,
                      guess_fractions=DEFAULT_GUESS_FRACTIONS, with_gdp_epsilon: bool = True) -> dict:
    """Test the claim's curve (`profile`) on coin-flipped canaries from one mechanism run.

    Mahloujifar, Melis, Chaudhuri 2024 (arXiv 2410.22235). For each guess fraction f: top and
    bottom ⌊f·m/2⌋ scores guessed "in" / "out"; each fraction is tested at α/len(fractions)
    (Bonferroni: the fraction is chosen after seeing the outcome). `refuted` is sound for any
    mechanism whose canaries were inserted by independent fair coins and scored without the coins
    (ties are broken by position, which must not depend on the coins). Also returned: the GDP-family
    ε (`fdp_one_run_epsilon_gdp`, an estimate that assumes a Gaussian curve; `with_gdp_epsilon=False`
    skips its root search, which costs about a second per fraction).
    """
    s = np.asarray(scores, dtype=float)
    mem = np.asarray(members, dtype=bool)
    if s.shape != mem.shape or s.ndim != 1 or s.size < 2:
        raise ValueError("scores and members must be 1-d arrays of the same length ≥ 2")
    s = np.where(np.isnan(s), -np.inf, s)
    fractions = tuple(float(f) for f in guess_fractions)
    alpha_each = (1.0 - float(confidence)) / len(fractions)
    inverse = profile_blow_up_inverse(profile)
    rows = []
    for f in fractions:
        guesses, right = _guess_counts(s, mem, f)
        rows.append({"fraction": f, "guesses": guesses, "right": right,
                     "refuted": fdp_one_run_refutes(inverse, s.size, guesses, right, alpha_each),
                     "gdp_epsilon": (fdp_one_run_epsilon_gdp(s.size, guesses, right, alpha_each, delta)
                                     if with_gdp_epsilon else None)})
    gdp = max((row["gdp_epsilon"] for row in rows if row["gdp_epsilon"] is not None), default=None)
    return {"m": int(s.size), "refuted": any(row["refuted"] for row in rows), "profile": profile.source,
            "gdp_epsilon": gdp, "alpha_each": alpha_each, "per_fraction": rows,
            "assumption": "canaries inserted by independent fair coins; GDP ε assumes a Gaussian trade-off curve"}
