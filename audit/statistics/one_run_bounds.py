"""One-run ε lower bounds (Steinke, Nasr, Jagielski 2023, arXiv 2305.08846): the guessing game on
coin-flip candidates of one training run, its p-value, the bound, the claim's p-value, the ceiling.
The guess rule is chosen on a pilot split (`one_run_guesses`)."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, special, stats

from audit.statistics.attack_metrics import validate_probability, validate_scores_and_members
from audit.statistics.binomial import binom_cdf, binom_cdf_scalar, binom_sf
from audit.statistics.bound_types import EpsilonLowerBound, _as_count, _check_confidence, _check_delta, _check_epsilon
from audit.statistics.one_run_guesses import (
    DEFAULT_PILOT_FRACTION,
    apply_guess_rule,
    choose_guess_rule,
    pilot_size,
    pilot_split,
)

__all__ = [
    "one_run_p_value",
    "one_run_epsilon_from_counts",
    "epsilon_lower_bound_one_run",
    "one_run_claim_p_value",
    "one_run_ceiling",
]


def _one_run_p_value(epsilon: float, m: int, r: int, v: int, delta: float) -> float:
    q = special.expit(epsilon)
    # audit.statistics.binomial: scipy.stats.binom's values without its per-call overhead (this
    # p-value is evaluated thousands of times per audit: the guess-rule search, each bisection step).
    tail = binom_sf(v - 1, r, q)  # P[Bin(r, q) ≥ v]
    if delta == 0 or v == 0:
        return float(min(tail, 1.0))
    i = np.arange(1, v + 1)
    # P[v > Bin(r, q) ≥ v − i] = cdf(v − 1) − cdf(v − i − 1), for all i at once.
    window = binom_cdf_scalar(v - 1, r, q) - binom_cdf(v - 1 - i, r, q)
    return float(min(tail + 2 * m * delta * np.max(window / i), 1.0))


def _check_one_run_counts(m, r, v) -> tuple[int, int, int]:
    m_ = _as_count("m", m)
    r_ = _as_count("r", r)
    v_ = _as_count("v", v)
    if m_ < 1:
        raise ValueError(f"m: need at least one candidate, got {m!r}")
    if r_ > m_:
        raise ValueError(f"r: number of guesses must be ≤ m = {m_}, got {r!r}")
    if v_ > r_:
        raise ValueError(f"v: correct guesses must be ≤ r = {r_}, got {v!r}")
    return m_, r_, v_


def one_run_p_value(epsilon: float, m: int, r: int, v: int, delta: float) -> float:
    """p-value of "the mechanism is (ε, δ)-DP" given v correct out of r guesses on m candidates.

    Steinke, Nasr, Jagielski 2023, "Privacy Auditing with One (1) Training Run", arXiv 2305.08846
    With q = e^ε/(1 + e^ε):

        p(ε) = P[Bin(r, q) ≥ v] + 2mδ · max_{i=1..v} P[v > Bin(r, q) ≥ v − i] / i,

    capped at 1. Small p means the observed guessing accuracy is implausible under (ε, δ)-DP.
    """
    eps = _check_epsilon(epsilon)
    m_, r_, v_ = _check_one_run_counts(m, r, v)
    d = _check_delta(delta)
    return _one_run_p_value(eps, m_, r_, v_, d)


def _one_run_epsilon(m: int, r: int, v: int, delta: float, alpha: float) -> float:
    if r == 0 or _one_run_p_value(0.0, m, r, v, 0.0) > alpha:
        # The δ term only adds to p, so failing at δ = 0 means failing at every δ.
        return 0.0
    if _one_run_p_value(0.0, m, r, v, delta) > alpha:
        return 0.0
    lo, hi = 0.0, 1.0
    while _one_run_p_value(hi, m, r, v, delta) <= alpha:
        lo, hi = hi, 2 * hi  # p → 1 as ε → ∞ (q → 1), so this terminates.
    return float(optimize.bisect(lambda e: alpha - _one_run_p_value(e, m, r, v, delta), lo, hi, xtol=1e-7))


def one_run_epsilon_from_counts(m: int, r: int, v: int, delta: float, alpha: float = 0.05) -> float:
    """Largest ε whose one-run p-value is ≤ `alpha` (0 if none): an ε lower bound at 1 − alpha.

    Steinke, Nasr, Jagielski 2023, arXiv 2305.08846: m candidates each included independently with
    probability ½, r guesses of which v correct; p(ε) as in `one_run_p_value`, found by bisection
    (p is increasing in ε). Valid for a guess set fixed before looking at membership; choosing
    among several guess sets needs a correction (see `epsilon_lower_bound_one_run`).

    Args:
        m: canaries (candidates), each a member by an independent fair coin.
        r: guesses made (abstentions not counted).
        v: correct guesses among them.
        delta: the δ of the (ε, δ) claim tested.
        alpha: the error level (1 − confidence).

    Returns:
        The ε lower bound at confidence 1 − alpha (0.0 when no ε > 0 is rejected).
    """
    m_, r_, v_ = _check_one_run_counts(m, r, v)
    d = _check_delta(delta)
    a = validate_probability("alpha", alpha, open_low=True, open_high=True)
    return _one_run_epsilon(m_, r_, v_, d, a)


def _check_fair_coin(m: np.ndarray) -> None:
    # The one-run analysis needs P(member) = ½ independently; a grossly unbalanced label vector
    # (e.g. 100 members vs 10 000 non-members) would make "out" guesses trivially right.
    n, k = m.size, int(m.sum())
    p = stats.binomtest(k, n, 0.5).pvalue
    if p < 1e-6:
        raise ValueError(
            f"members: the one-run bound assumes each candidate is a member by an independent fair "
            f"coin flip; {k} members out of {n} is implausible for that (binomial p = {p:.1e})"
        )


def _one_run_criterion(m_eval: int, delta: float, alpha: float):
    """The pilot's criterion: the evaluation part's one-run bound, skipping the bisection when the
    candidate cannot beat the best so far (p is increasing in ε, so p(floor) > α means ε < floor)."""

    def value(r: int, v: int, floor: float) -> float:
        if floor > 0 and _one_run_p_value(floor, m_eval, r, v, delta) > alpha:
            return floor
        return _one_run_epsilon(m_eval, r, v, delta, alpha)

    return value


def epsilon_lower_bound_one_run(
    scores: ArrayLike,
    members: ArrayLike,
    delta: float,
    confidence: float = 0.95,
    pilot_fraction: float = DEFAULT_PILOT_FRACTION,
    seed: int = 0,
) -> EpsilonLowerBound:
    """(ε, δ)-DP lower bound from ONE training run, holding with probability ≥ `confidence`.

    Steinke, Nasr, Jagielski 2023, "Privacy Auditing with One (1) Training Run", arXiv 2305.08846.
    Requirement (not checkable from one run, only grossly sanity-checked here): each of the
    m = len(scores) candidates was included in training by an INDEPENDENT FAIR COIN FLIP, and the
    scores were computed without knowing the coins.

    Guess rule chosen on a pilot, bound on the rest (`audit.statistics.one_run_guesses`): a seeded
    random `pilot_fraction` of the candidates (30 %, chosen without looking at membership) picks
    the thresholds — "in" for scores ≥ t_in, "out" for scores ≤ t_out, abstain between — that
    maximise the bound the other part is expected to give; on the other m_eval candidates the rule
    makes r guesses, v of them right, and `epsilon` = the largest ε with p(ε) ≤ 1 − confidence
    (`one_run_p_value` with m = m_eval), 0 if none. One pre-declared test at the full α: no
    Bonferroni, so the bound does not pay for the search and does not fall as m grows (issue 27:
    fixed guess fractions with Bonferroni gave 5.69 at 10⁴ and 5.47 at 10⁵ canaries on μ = 4
    Gaussian scores). Thresholds guess whole tie groups, so input order never decides a guess.

    Args:
        scores: one score per candidate, higher = more likely a member.
        members: 0/1 (or bool) per candidate: was it included (its fair coin came up heads)?
        delta: the δ of the (ε, δ) bound.
        confidence: the probability with which the bound holds (α = 1 − confidence).
        pilot_fraction: the share of candidates that choose the guess rule (no bound is computed on them).
        seed: seed of the pilot split.

    Returns:
        An `EpsilonLowerBound` (`method="one_run"`, `sound=True`); `details` holds m, r, v, the rule.
    """
    s, m = validate_scores_and_members(scores, members)
    d = _check_delta(delta)
    conf = _check_confidence(confidence)
    frac = validate_probability("pilot_fraction", pilot_fraction, open_low=True, open_high=True)
    _as_count("seed", seed)
    _check_fair_coin(m)

    n = s.size
    alpha = 1.0 - conf
    pilot, evaluation = pilot_split(n, frac, seed)
    n_eval = int(evaluation.size)
    rule = choose_guess_rule(s[pilot], m[pilot], n_eval, _one_run_criterion(n_eval, d, alpha))
    counts = apply_guess_rule(s[evaluation], m[evaluation], rule)
    epsilon = _one_run_epsilon(n_eval, counts["r"], counts["v"], d, alpha) if counts["r"] else 0.0
    row = {"m": n_eval, **counts, "epsilon": epsilon}
    details = {
        "m": int(n),
        "m_eval": n_eval,
        "m_pilot": int(pilot.size),
        "pilot_fraction": frac,
        "seed": int(seed),
        **counts,
        "threshold_in": None if rule is None or math.isinf(rule.t_in) else rule.t_in,
        "threshold_out": None if rule is None or math.isinf(rule.t_out) else rule.t_out,
        "alpha_each": alpha,
        "correction": (
            f"none: guess thresholds chosen on a random pilot of {pilot.size} candidates, "
            f"bound computed on the other {n_eval} only (one pre-declared test)"
        ),
        # One row, the evaluation test; the key is what readers of results.json look for.
        "per_fraction": [row],
        "delta": d,
        "assumption": "membership of each candidate is an independent fair coin flip",
        "quantity": "one-run epsilon lower bound",
    }
    return EpsilonLowerBound(
        epsilon=float(epsilon),
        method="one_run",
        confidence=conf,
        sound=True,
        details=details,
    )


def one_run_claim_p_value(details: dict[str, Any], claimed_epsilon: float, delta: float) -> float:
    """p-value of "the training is (`claimed_epsilon`, δ)-DP" from a one-run audit's recorded guesses.

    Steinke, Nasr, Jagielski 2023, arXiv 2305.08846 (Theorem 3.1 / `one_run_p_value`): for each test
    recorded by `epsilon_lower_bound_one_run` (`details["per_fraction"]`: m, r, v — one row, the
    evaluation part, since the guess rule is chosen on a pilot) the p-value is p(ε_claim); with F
    rows (results written before the pilot split, one per guess fraction tried on all canaries) it is
    min(1, F · min p) (Bonferroni, as those bounds were). Rejecting when this is ≤ α is the same
    decision as "the one-run lower bound at confidence 1 − α exceeds the claim" (p is increasing in
    ε), so a family of such tests can be corrected with Holm's procedure.
    """
    eps = _check_epsilon(claimed_epsilon)
    d = _check_delta(delta)
    rows = details.get("per_fraction") or []
    if not rows:
        raise ValueError("details: expected the 'per_fraction' rows written by epsilon_lower_bound_one_run")
    m = _as_count("m", details["m"])
    best = min(
        _one_run_p_value(eps, _as_count("m", row.get("m", m)), int(row["r"]), int(row["v"]), d)
        if int(row["r"])
        else 1.0
        for row in rows
    )
    return float(min(1.0, len(rows) * best))


@functools.lru_cache(maxsize=1024)  # the verdict asks once per check with the same (m, δ, α)
def one_run_ceiling(m: int, delta: float, alpha: float, pilot_fraction: float = DEFAULT_PILOT_FRACTION) -> float:
    """The largest one-run lower bound ANY attack could reach: every guess right, at level `alpha`.

    Steinke, Nasr, Jagielski 2023, arXiv 2305.08846. With m candidates `epsilon_lower_bound_one_run`
    evaluates on m_eval = m − pilot; the best outcome is a guess on every one of them, all right
    (the bound grows with r at v = r). A claim at or above this ceiling cannot be refuted by this
    audit: it is inconclusive for it.

    Args:
        m: canaries (candidates), each a member by an independent fair coin.
        delta: the δ of the claim.
        alpha: the error level (1 − confidence).
        pilot_fraction: the share of the canaries the guess rule is chosen on (not evaluated).

    Returns:
        The ceiling ε: no attack on m canaries can show a larger one-run bound.
    """
    m_ = _as_count("m", m)
    d = _check_delta(delta)
    a = validate_probability("alpha", alpha, open_low=True, open_high=True)
    n_eval = m_ - pilot_size(m_, pilot_fraction)
    if n_eval < 1 or m_ < 2:
        return 0.0
    return float(_one_run_epsilon(n_eval, n_eval, n_eval, d, a))
