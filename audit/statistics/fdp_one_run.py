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

import functools
import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, special

from audit.statistics.epsilon_bounds import epsilon_from_gdp_mu, gdp_mu_from_epsilon
from audit.statistics.gdp_fit import gaussian_family_figure, gaussian_tradeoff_fit
from audit.statistics.one_run_guesses import (
    DEFAULT_PILOT_FRACTION,
    DEFAULT_SEED,
    apply_guess_rule,
    choose_guess_rule,
    pilot_split,
)
from audit.statistics.profile_inverse import profile_inverse_fast
from audit.statistics.tradeoff_curves import PrivacyProfile

__all__ = [
    "fdp_one_run_audit",
    "fdp_one_run_epsilon_gdp",
    "fdp_one_run_refutes",
    "gdp_blow_up_inverse",
    "profile_blow_up_inverse",
]


def gdp_blow_up_inverse(mu: float) -> Callable[[float], float]:
    """f̄⁻¹ of μ-GDP: y ↦ Φ(Φ⁻¹(y) − μ) (Dong, Roth, Su 2019, arXiv 1905.02383)."""
    m = float(mu)
    return lambda y: float(special.ndtr(special.ndtri(min(max(y, 0.0), 1.0)) - m))


@functools.lru_cache(maxsize=32)  # one twin asks for the same curve's inverse for many canary counts
def profile_blow_up_inverse(profile: PrivacyProfile) -> Callable[[float], float]:
    """f̄⁻¹ of the curve a privacy profile implies (see the module docstring), evaluated on the lines that
    can be largest near y (`profile_inverse.profile_inverse_fast`: bit for bit the value over every line)."""
    return profile_inverse_fast(profile)


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


def fdp_one_run_refutes(
    blow_up_inverse: Callable[[float], float], m: int, n_guess: int, n_correct: int, alpha: float = 0.05
) -> bool:
    """True when `n_correct` right guesses out of `n_guess` (m canaries) are impossible, at
    significance `alpha`, for a mechanism whose curve has inverse blow-up `blow_up_inverse`
    (Mahloujifar, Melis, Chaudhuri 2024, arXiv 2410.22235)."""
    m_, g, c = _check_counts(m, n_guess, n_correct)
    if g == 0 or c == 0:
        return False
    return _excess(blow_up_inverse, m_, g, c, float(alpha)) > 0


@functools.lru_cache(maxsize=4096)  # the guess-rule search asks for the same floor many times
def _mu_of_epsilon(eps: float, delta: float) -> float:
    return gdp_mu_from_epsilon(eps, delta)


def fdp_one_run_epsilon_gdp(
    m: int, n_guess: int, n_correct: int, alpha: float, delta: float, floor: float = 0.0
) -> float:
    """The largest ε such that "μ-GDP with (ε, δ) on its curve" is refuted by these counts, 0 if none.

    A GDP-family statement: the mechanism is less private than the Gaussian mechanism whose curve
    passes through (ε, δ). It is a lower bound on the mechanism's ε at δ only if its trade-off
    curve is Gaussian (DP-SGD's is close to it in the middle, not in the tails): label it so.
    The search runs over μ (the refuted set is an interval [0, μ*) because f̄⁻¹ grows with μ), then
    ε = `epsilon_from_gdp_mu(μ*, δ)` (Dong, Roth, Su 2019, Cor. 2.13: the curve through (ε, δ)).
    With `floor` > 0, returns `floor` at once when these counts do not refute the curve at `floor`
    (the search for the best guess rule uses that to skip hopeless candidates).
    """
    m_, g, c = _check_counts(m, n_guess, n_correct)
    floor = max(0.0, float(floor))
    if g == 0 or c == 0:
        return floor

    def margin(mu: float) -> float:
        return _excess(gdp_blow_up_inverse(mu), m_, g, c, float(alpha))

    low = _mu_of_epsilon(floor, float(delta)) if floor > 0 else 1e-9
    if margin(low) <= 0:
        return floor
    high = max(1.0, 2 * low)
    while margin(high) > 0:
        low, high = high, 2 * high
        if high > 64:  # ε far above 10³ at any δ this package accepts
            return math.inf
    mu = float(optimize.brentq(margin, low, high, xtol=1e-10))
    return max(floor, epsilon_from_gdp_mu(mu, float(delta)))


def fdp_one_run_audit(
    scores: ArrayLike,
    members: ArrayLike,
    profile: PrivacyProfile | None,
    *,
    delta: float,
    confidence: float = 0.95,
    pilot_fraction: float = DEFAULT_PILOT_FRACTION,
    seed: int = DEFAULT_SEED,
    with_gdp_epsilon: bool = True,
    gaussian_fit: dict | None = None,
) -> dict:
    """Test the claim's curve (`profile`) on coin-flipped canaries from one mechanism run.

    Mahloujifar, Melis, Chaudhuri 2024 (arXiv 2410.22235). The guess rule ("in" above one score
    threshold, "out" below another) is chosen on a random pilot part of the canaries (seeded,
    membership never consulted; `audit.statistics.one_run_guesses`), maximising the GDP-family ε the
    other part is expected to give; on that other part the rule's guesses are ONE pre-declared test
    at α = 1 − confidence, so nothing is paid for the search and the bound does not fall as canaries
    are added. `refuted` (the claim's curve is rejected) is sound for any mechanism whose canaries
    were inserted by independent fair coins and scored without the coins; `profile=None` skips it.
    Also returned: `gdp_epsilon` (`fdp_one_run_epsilon_gdp`: an ε lower bound only if the
    mechanism's trade-off curve is Gaussian; `with_gdp_epsilon=False` skips its root search), None
    with `gdp_epsilon_withheld` saying why when the scores contradict a Gaussian curve
    (`gdp_fit.gaussian_family_figure`; `gaussian_fit`: that check, when the caller already ran it).

    Args:
        scores: one score per canary, higher = more likely inserted.
        members: the coin flips (bool / 0-1), one per canary.
        profile: the claim's privacy profile (audit.statistics.tradeoff_curves); None skips the test.
        delta: the δ at which the GDP-family ε is read.
        confidence: 1 − α of the one pre-declared test.
        pilot_fraction: the share of canaries the guess rule is chosen on.
        seed: seeds the pilot split.
        with_gdp_epsilon: compute the GDP-family ε (a root search).
        gaussian_fit: the Gaussian-curve check, when the caller already ran it.

    Returns:
        A dict: `refuted`, `gdp_epsilon` (or None, `gdp_epsilon_withheld` saying why), the counts `m`,
        `m_eval`, `m_pilot`, `guesses`, `right`, and `confidence`, `correction`, `assumption` in words.
    """
    s = np.asarray(scores, dtype=float)
    mem = np.asarray(members, dtype=bool)
    if s.shape != mem.shape or s.ndim != 1 or s.size < 2:
        raise ValueError("scores and members must be 1-d arrays of the same length ≥ 2")
    s = np.where(np.isnan(s), -np.inf, s)
    alpha = 1.0 - float(confidence)
    pilot, evaluation = pilot_split(s.size, pilot_fraction, seed)
    n_eval = int(evaluation.size)

    def criterion(r: int, v: int, floor: float) -> float:
        value = fdp_one_run_epsilon_gdp(n_eval, r, v, alpha, delta, floor=floor)
        return 1e3 if math.isinf(value) else value

    rule = choose_guess_rule(s[pilot], mem[pilot], n_eval, criterion)
    counts = apply_guess_rule(s[evaluation], mem[evaluation], rule)
    guesses, right = counts["r"], counts["v"]
    refuted = (
        fdp_one_run_refutes(profile_blow_up_inverse(profile), n_eval, guesses, right, alpha)
        if profile is not None
        else None
    )
    gdp, withheld = None, None
    if with_gdp_epsilon:
        fit = gaussian_fit if gaussian_fit is not None else gaussian_tradeoff_fit(s, mem, seed=seed)
        gdp = gaussian_family_figure(fdp_one_run_epsilon_gdp(n_eval, guesses, right, alpha, delta), fit)
        withheld = fit["reason"] if fit.get("withheld") else None
    row = {
        "m": n_eval,
        "guesses": guesses,
        "right": right,
        "refuted": refuted,
        "gdp_epsilon": gdp,
        "k_plus": counts["k_plus"],
        "k_minus": counts["k_minus"],
    }
    return {
        "m": int(s.size),
        "m_eval": n_eval,
        "m_pilot": int(pilot.size),
        "guesses": guesses,
        "right": right,
        "refuted": refuted,
        "profile": None if profile is None else profile.source,
        "gdp_epsilon": gdp,
        "gdp_epsilon_withheld": withheld,
        "alpha_each": alpha,
        "per_fraction": [row],
        "confidence": float(confidence),
        "correction": (
            f"none: guess thresholds chosen on a random pilot of {pilot.size} canaries, "
            f"tested on the other {n_eval} only (one pre-declared test)"
        ),
        "assumption": "canaries inserted by independent fair coins; GDP ε assumes a Gaussian trade-off curve",
    }
