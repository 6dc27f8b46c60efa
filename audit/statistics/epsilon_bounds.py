"""Empirical ε lower bounds (and one ε estimate) from membership-inference attack outcomes.

Every estimator is a pure function of attack scores and membership labels (plus δ and a
confidence level); no I/O. The docstring of each names its paper and the exact quantity returned.
STATS.md is the contract; its reference values are tested in tests/test_epsilon_bounds.py.

Score-based estimators share the conventions of `audit.statistics.attack_metrics`: `scores` higher = more
likely a member, `members` bool/0-1, validated at the boundary with `ValueError` naming the
argument. They return an `EpsilonLowerBound`.

Threshold choice is the classic way to fool yourself: a threshold picked to maximise the bound on
the same scores the bound is computed on gives an optimistic "bound". Hence the strategies
`HeldOut` (choose on one part, bound on the other) and `Bonferroni` (pay for every threshold
tried), as small frozen dataclasses instead of string flags.
"""
from __future__ import annotations

import functools
import math
import operator
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np
from scipy import optimize, special, stats

from audit.statistics.attack_metrics import validate_probability, validate_scores_and_members
from audit.statistics.one_run_guesses import (
    DEFAULT_PILOT_FRACTION,
    apply_guess_rule,
    choose_guess_rule,
    pilot_size,
    pilot_split,
)

__all__ = [
    "EpsilonLowerBound",
    "HeldOut",
    "Bonferroni",
    "clopper_pearson_upper",
    "epsilon_from_error_rates",
    "epsilon_lower_bound_from_counts",
    "epsilon_lower_bound_clopper_pearson",
    "choose_clopper_pearson_rule",
    "one_run_p_value",
    "one_run_epsilon_from_counts",
    "epsilon_lower_bound_one_run",
    "one_run_claim_p_value",
    "one_run_ceiling",
    "gdp_mu_lower_bound",
    "epsilon_from_gdp_mu",
    "gdp_mu_from_epsilon",
    "epsilon_estimate_gdp",
    "ESTIMATORS",
]

GDP_LABEL = "estimate (assumes GDP)"


# --------------------------------------------------------------------------------------------------
# Result and strategy types
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EpsilonLowerBound:
    """One ε lower bound (or, for GDP, estimate) with everything needed to reproduce it.

    `sound` is False for the GDP estimate: it assumes a Gaussian trade-off curve and must never
    decide a violation verdict on its own. `details` is JSON-serialisable (plain floats, ints,
    strings, lists, dicts).
    """

    epsilon: float
    method: str
    confidence: float
    sound: bool
    details: dict = field(default_factory=dict)


@dataclass(frozen=True)
class HeldOut:
    """Choose threshold and direction on a random stratified `fraction` of the candidates
    (members and non-members split separately, seeded by `seed`); bound on the rest only."""

    fraction: float = 0.5
    seed: int = 0

    def __post_init__(self):
        validate_probability("fraction", self.fraction, open_low=True, open_high=True)
        _as_count("seed", self.seed)


@dataclass(frozen=True)
class Bonferroni:
    """Try up to `max_thresholds` thresholds (quantiles of all scores) × both directions on all
    data, splitting the failure probability equally across every one-sided bound computed."""

    max_thresholds: int = 100

    def __post_init__(self):
        if _as_count("max_thresholds", self.max_thresholds) < 1:
            raise ValueError(f"max_thresholds: must be ≥ 1, got {self.max_thresholds!r}")


ThresholdStrategy = HeldOut | Bonferroni


# --------------------------------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------------------------------


def _as_count(name: str, value) -> int:
    """A non-negative integer (Python or numpy int, or an integral float), else ValueError."""
    if isinstance(value, bool):
        raise ValueError(f"{name}: expected a non-negative integer, got {value!r}")
    try:
        out = operator.index(value)
    except TypeError:
        if isinstance(value, float) and value.is_integer():
            out = int(value)
        else:
            raise ValueError(f"{name}: expected a non-negative integer, got {value!r}") from None
    if out < 0:
        raise ValueError(f"{name}: expected a non-negative integer, got {value!r}")
    return out


def _check_delta(delta) -> float:
    return validate_probability("delta", delta, open_low=False, open_high=True)


def _check_confidence(confidence) -> float:
    return validate_probability("confidence", confidence, open_low=True, open_high=True)


def _check_rate(name: str, value) -> float:
    return validate_probability(name, value, open_low=False, open_high=False)


def _check_epsilon(epsilon) -> float:
    try:
        eps = float(epsilon)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"epsilon: expected a number, got {epsilon!r}") from exc
    if math.isnan(eps) or eps < 0:
        raise ValueError(f"epsilon: must be ≥ 0, got {epsilon!r}")
    return eps


def _check_strategy(strategy) -> ThresholdStrategy:
    if not isinstance(strategy, (HeldOut, Bonferroni)):
        raise ValueError(f"strategy: expected HeldOut(...) or Bonferroni(...), got {strategy!r}")
    return strategy


# --------------------------------------------------------------------------------------------------
# Clopper-Pearson and the (ε, δ) hypothesis-testing region
# --------------------------------------------------------------------------------------------------


def _clopper_pearson_upper_array(k: np.ndarray, n, alpha: float) -> np.ndarray:
    k = np.asarray(k)
    n = np.asarray(n)
    # beta.ppf needs b > 0; where k == n the bound is 1 anyway.
    upper = stats.beta.ppf(1.0 - alpha, k + 1, np.maximum(n - k, 1))
    return np.where(k < n, upper, 1.0)


def clopper_pearson_upper(k: int, n: int, alpha: float) -> float:
    """One-sided upper Clopper-Pearson bound p̄ on a binomial rate from k successes in n trials.

    Returns the (1 − alpha) quantile of Beta(k + 1, n − k), i.e. P[p ≤ p̄] ≥ 1 − alpha; 1.0 when
    k == n (Clopper & Pearson 1934, Biometrika 26:404-413).
    """
    k_ = _as_count("k", k)
    n_ = _as_count("n", n)
    if n_ < 1:
        raise ValueError(f"n: need at least one trial, got {n!r}")
    if k_ > n_:
        raise ValueError(f"k: must be ≤ n = {n_}, got {k!r}")
    a = validate_probability("alpha", alpha, open_low=True, open_high=True)
    return float(_clopper_pearson_upper_array(np.asarray(k_), n_, a))


def _log_ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    # ln(num/den), with num ≤ 0 → -inf (no evidence) and num > 0, den = 0 → +inf.
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.where(numerator > 0, numerator, 1.0)) - np.log(denominator)
    return np.where(numerator > 0, out, -np.inf)


def _epsilon_from_rates_array(fpr_u, fnr_u, delta: float, *, floor: bool = True) -> np.ndarray:
    fpr_u = np.asarray(fpr_u, dtype=float)
    fnr_u = np.asarray(fnr_u, dtype=float)
    eps = np.maximum(
        _log_ratio(1.0 - delta - fnr_u, fpr_u),
        _log_ratio(1.0 - delta - fpr_u, fnr_u),
    )
    return np.maximum(eps, 0.0) if floor else eps


def epsilon_from_error_rates(fpr_upper: float, fnr_upper: float, delta: float) -> float:
    """ε implied by upper bounds on a test's error rates under (ε, δ)-DP, floored at 0:

        max{ ln((1 − δ − FNR̄)/FPR̄), ln((1 − δ − FPR̄)/FNR̄) }.

    Any (ε, δ)-DP mechanism forces FPR + e^ε·FNR ≥ 1 − δ and FNR + e^ε·FPR ≥ 1 − δ (Kairouz, Oh,
    Viswanath 2015, arXiv 1311.0776); plugging in upper confidence bounds on FPR and FNR gives a
    lower bound on ε (Jagielski et al. 2020, arXiv 2006.07709; Nasr et al. 2021, arXiv 2101.04535).
    A term with numerator ≤ 0 contributes 0; a zero denominator with a positive numerator gives inf.
    """
    f = _check_rate("fpr_upper", fpr_upper)
    g = _check_rate("fnr_upper", fnr_upper)
    d = _check_delta(delta)
    return float(_epsilon_from_rates_array(f, g, d))


def epsilon_lower_bound_from_counts(
    false_positives: int,
    n_nonmembers: int,
    false_negatives: int,
    n_members: int,
    delta: float,
    confidence: float = 0.95,
) -> float:
    """(ε, δ) lower bound at `confidence` from the error counts of ONE threshold fixed in advance.

    α = 1 − confidence is split equally between the two one-sided Clopper-Pearson upper bounds
    (FPR̄ at α/2 over n_nonmembers trials, FNR̄ at α/2 over n_members trials), then
    `epsilon_from_error_rates(FPR̄, FNR̄, δ)` (Jagielski, Ullman, Oprea 2020, arXiv 2006.07709;
    Nasr et al. 2021, arXiv 2101.04535). Only valid when the threshold did not depend on these
    outcomes (e.g. a canary audit with a pre-registered threshold). A perfect attack with N trials
    per side at 95% caps at 3.28 (N=100) and 5.60 (N=1000).
    """
    fp = _as_count("false_positives", false_positives)
    n0 = _as_count("n_nonmembers", n_nonmembers)
    fn = _as_count("false_negatives", false_negatives)
    n1 = _as_count("n_members", n_members)
    if n0 < 1:
        raise ValueError(f"n_nonmembers: need at least one non-member, got {n_nonmembers!r}")
    if n1 < 1:
        raise ValueError(f"n_members: need at least one member, got {n_members!r}")
    if fp > n0:
        raise ValueError(f"false_positives: must be ≤ n_nonmembers = {n0}, got {false_positives!r}")
    if fn > n1:
        raise ValueError(f"false_negatives: must be ≤ n_members = {n1}, got {false_negatives!r}")
    d = _check_delta(delta)
    alpha = 1.0 - _check_confidence(confidence)
    fpr_u = clopper_pearson_upper(fp, n0, alpha / 2)
    fnr_u = clopper_pearson_upper(fn, n1, alpha / 2)
    return float(_epsilon_from_rates_array(fpr_u, fnr_u, d))


# --------------------------------------------------------------------------------------------------
# Threshold selection shared by the Clopper-Pearson bound and the GDP estimate
# --------------------------------------------------------------------------------------------------

# Two decision rules per threshold t. "score >= t" predicts member for high scores; "score < t"
# is the mirror image (for attacks whose score points the wrong way).
_HIGH, _LOW = "member if score >= threshold", "member if score < threshold"


def _error_counts(thresholds: np.ndarray, s: np.ndarray, m: np.ndarray):
    """FP and FN counts of the rule "member iff score >= t" at every t, plus n0, n1."""
    member_scores = np.sort(s[m])
    nonmember_scores = np.sort(s[~m])
    n1, n0 = member_scores.size, nonmember_scores.size
    fn = np.searchsorted(member_scores, thresholds, side="left")  # members with score < t
    fp = n0 - np.searchsorted(nonmember_scores, thresholds, side="left")  # non-members ≥ t
    return fp, fn, n0, n1


def _both_directions(fp: np.ndarray, fn: np.ndarray, n0: int, n1: int):
    # Flipping the rule turns every false positive into a true negative and vice versa.
    return [(_HIGH, fp, fn), (_LOW, n0 - fp, n1 - fn)]


# A criterion maps (FPR̄, FNR̄, δ) arrays to "bigger is better" scores; unfloored so that argmax
# still ranks thresholds when nothing beats 0.
Criterion = Callable[[np.ndarray, np.ndarray, float], np.ndarray]


def _cp_criterion(fpr_u, fnr_u, delta):
    return _epsilon_from_rates_array(fpr_u, fnr_u, delta, floor=False)


def _gdp_criterion(fpr_u, fnr_u, delta):
    return _gdp_mu_array(fpr_u, fnr_u)


def _anticipated_upper(k: np.ndarray, n: int, n_eval: int, alpha: float) -> np.ndarray:
    """The Clopper-Pearson upper bound an evaluation part of `n_eval` would give if its error
    rate were the selection's, smoothed by Laplace's rule ((k + 1)/(n + 2): never 0 in a tail)."""
    k_eval = (np.asarray(k, dtype=float) + 1.0) / (n + 2.0) * n_eval
    return np.where(k_eval < n_eval, stats.beta.ppf(1.0 - alpha, k_eval + 1.0, np.maximum(n_eval - k_eval, 1e-9)), 1.0)


def _best_rule(thresholds, s, m, alpha_per_rate, delta, criterion: Criterion,
               evaluation_sizes: tuple[int, int] | None = None) -> dict[str, Any]:
    """The (threshold, direction) maximising `criterion` of the Clopper-Pearson upper bounds.

    With `evaluation_sizes` (n₀, n₁ of the held-out part) the criterion is applied to the bounds
    that part is *expected* to give (`_anticipated_upper`) instead of the selection's own: the
    selection's bounds reward the extreme tail, where a handful of selection scores happen to show
    no error but the evaluation part's interval is widest — which made the GDP estimate fall as
    runs grew (0.95 → 0.67 of the claim from 10k to 50k runs per side, issue 11).
    """
    fp, fn, n0, n1 = _error_counts(thresholds, s, m)
    best: dict[str, Any] | None = None
    for direction, fp_d, fn_d in _both_directions(fp, fn, n0, n1):
        fpr_u = _clopper_pearson_upper_array(fp_d, n0, alpha_per_rate)
        fnr_u = _clopper_pearson_upper_array(fn_d, n1, alpha_per_rate)
        if evaluation_sizes is None:
            value = criterion(fpr_u, fnr_u, delta)
        else:
            value = criterion(_anticipated_upper(fp_d, n0, evaluation_sizes[0], alpha_per_rate),
                              _anticipated_upper(fn_d, n1, evaluation_sizes[1], alpha_per_rate), delta)
        i = int(np.argmax(value))
        if best is None or value[i] > best["value"]:
            best = {
                "value": float(value[i]),
                "threshold": float(thresholds[i]),
                "direction": direction,
                "false_positives": int(fp_d[i]),
                "n_nonmembers": int(n0),
                "false_negatives": int(fn_d[i]),
                "n_members": int(n1),
                "fpr_upper": float(fpr_u[i]),
                "fnr_upper": float(fnr_u[i]),
            }
    assert best is not None
    return best


def _held_out_split(m: np.ndarray, strategy: HeldOut) -> tuple[np.ndarray, np.ndarray]:
    """Indices (selection, evaluation), stratified by membership and seeded by `strategy.seed`."""
    rng = np.random.default_rng(strategy.seed)
    selection, evaluation = [], []
    for idx in (np.flatnonzero(m), np.flatnonzero(~m)):
        if idx.size < 2:
            raise ValueError(
                "members: HeldOut needs at least 2 members and 2 non-members to split, "
                f"got {int(m.sum())} member(s) and {int((~m).sum())} non-member(s)"
            )
        idx = rng.permutation(idx)
        n_sel = min(max(int(round(strategy.fraction * idx.size)), 1), idx.size - 1)
        selection.append(idx[:n_sel])
        evaluation.append(idx[n_sel:])
    return np.sort(np.concatenate(selection)), np.sort(np.concatenate(evaluation))


def _bonferroni_thresholds(s: np.ndarray, max_thresholds: int) -> np.ndarray:
    # Interior quantiles of the pooled scores: they depend on the scores but not on who is a
    # member (the same convention as jax_privacy's Bonferroni, which uses every pooled score).
    levels = np.arange(1, max_thresholds + 1) / (max_thresholds + 1)
    return np.unique(np.quantile(s, levels))


def _threshold_audit(s, m, delta, confidence, strategy, criterion: Criterion) -> dict[str, Any]:
    """Pick a rule per `strategy` and return its error counts and CP upper bounds.

    α = 1 − confidence is split equally between FPR̄ and FNR̄; under Bonferroni it is further
    divided by 2 directions × the number of thresholds tried.
    """
    alpha = 1.0 - confidence
    if isinstance(strategy, HeldOut):
        sel, ev = _held_out_split(m, strategy)
        alpha_per_rate = alpha / 2
        # The GDP estimate anticipates the evaluation part's interval width (see `_best_rule`).
        sizes = (int((~m[ev]).sum()), int(m[ev].sum())) if criterion is _gdp_criterion else None
        chosen = _best_rule(np.unique(s[sel]), s[sel], m[sel], alpha_per_rate, delta, criterion, sizes)
        # The rule is now fixed; only the evaluation part sees the bound.
        fp, fn, n0, n1 = _error_counts(np.array([chosen["threshold"]]), s[ev], m[ev])
        if chosen["direction"] == _LOW:
            fp, fn = n0 - fp, n1 - fn
        fp_i, fn_i = int(fp[0]), int(fn[0])
        result = {
            "threshold": chosen["threshold"],
            "direction": chosen["direction"],
            "false_positives": fp_i,
            "n_nonmembers": int(n0),
            "false_negatives": fn_i,
            "n_members": int(n1),
            "fpr_upper": float(_clopper_pearson_upper_array(fp_i, n0, alpha_per_rate)),
            "fnr_upper": float(_clopper_pearson_upper_array(fn_i, n1, alpha_per_rate)),
            "alpha_per_rate": alpha_per_rate,
            "strategy": {"name": "HeldOut", **asdict(strategy)},
            "n_selection": int(sel.size),
            "n_evaluation": int(ev.size),
            "selection_counts": {
                "false_positives": chosen["false_positives"],
                "n_nonmembers": chosen["n_nonmembers"],
                "false_negatives": chosen["false_negatives"],
                "n_members": chosen["n_members"],
            },
        }
        return result

    thresholds = _bonferroni_thresholds(s, strategy.max_thresholds)
    n_rules = 2 * thresholds.size
    alpha_per_rate = alpha / (2 * n_rules)
    chosen = _best_rule(thresholds, s, m, alpha_per_rate, delta, criterion)
    chosen.pop("value")
    return {
        **chosen,
        "alpha_per_rate": alpha_per_rate,
        "strategy": {"name": "Bonferroni", **asdict(strategy)},
        "n_thresholds": int(thresholds.size),
        "n_rules_tested": int(n_rules),
        "n_evaluation": int(s.size),
    }


# --------------------------------------------------------------------------------------------------
# 1. Clopper-Pearson (ε, δ) lower bound
# --------------------------------------------------------------------------------------------------


def epsilon_lower_bound_clopper_pearson(
    scores,
    members,
    delta: float,
    confidence: float = 0.95,
    strategy: ThresholdStrategy = HeldOut(),
) -> EpsilonLowerBound:
    """(ε, δ)-DP lower bound from a thresholded attack, holding with probability ≥ `confidence`.

    Jagielski, Ullman, Oprea 2020, "Auditing Differentially Private Machine Learning: How Private
    is Private SGD?", arXiv 2006.07709; Nasr et al. 2021, "Adversary Instantiation: Lower Bounds
    for Differentially Private Machine Learning", arXiv 2101.04535.

    Returned `epsilon` = max{ln((1 − δ − FNR̄)/FPR̄), ln((1 − δ − FPR̄)/FNR̄)} floored at 0, where
    FPR̄, FNR̄ are one-sided Clopper-Pearson upper bounds, each at level α/2 (α = 1 − confidence),
    for the rule "member iff score ≥ t" or its mirror "member iff score < t". The rule is chosen
    per `strategy`, never on the scores the bound is computed on without correction:

    - `HeldOut(fraction, seed)`: pick (t, direction) maximising the same CP-based ε on a stratified
      random `fraction` of the candidates; bound with the remaining candidates only.
    - `Bonferroni(max_thresholds)`: try up to `max_thresholds` pooled-score quantiles × 2
      directions on all data, each error rate at level α / (2 · rules tried).

    Each candidate's score must be computed independently of the others' membership being
    evaluated (the usual "independent trials" assumption behind Clopper-Pearson).
    """
    s, m = validate_scores_and_members(scores, members)
    d = _check_delta(delta)
    conf = _check_confidence(confidence)
    strat = _check_strategy(strategy)
    details = _threshold_audit(s, m, d, conf, strat, _cp_criterion)
    eps = float(_epsilon_from_rates_array(details["fpr_upper"], details["fnr_upper"], d))
    details.update({"delta": d, "quantity": "clopper_pearson epsilon lower bound"})
    return EpsilonLowerBound(
        epsilon=eps, method="clopper_pearson", confidence=conf, sound=True, details=details
    )


def choose_clopper_pearson_rule(scores, members, n_eval_nonmembers: int, n_eval_members: int,
                                alpha_per_rate: float, delta: float, max_thresholds: int = 512) -> tuple[float, bool]:
    """(threshold, member_if_higher): the rule, chosen on SELECTION scores only, whose (ε, δ)
    Clopper-Pearson bound an evaluation part of the given sizes is expected to make largest (the
    selection's error rates as that part's counts, Laplace-smoothed: `_anticipated_upper`).

    The (ε, δ) bound lives in the tail (a small FPR̄ with a likelihood ratio above e^ε), where the
    equal-error point that suits a trade-off-curve test shows little: Jagielski, Ullman, Oprea
    2020 (arXiv 2006.07709) pick their threshold for the bound the same way. Candidates are up to
    `max_thresholds` quantiles of the pooled selection scores. Using these scores again for the
    bound would make it invalid.
    """
    s, m = validate_scores_and_members(scores, members)
    if m.all() or not m.any():
        raise ValueError("members: need selection scores on both sides")
    thresholds = np.unique(np.quantile(s, np.linspace(0.0, 1.0, max_thresholds + 2)[1:-1]))
    chosen = _best_rule(thresholds, s, m, float(alpha_per_rate), _check_delta(delta), _cp_criterion,
                        (int(n_eval_nonmembers), int(n_eval_members)))
    return chosen["threshold"], chosen["direction"] == _HIGH


# --------------------------------------------------------------------------------------------------
# 2. One-run audit (Steinke, Nasr, Jagielski 2023)
# --------------------------------------------------------------------------------------------------


def _one_run_p_value(epsilon: float, m: int, r: int, v: int, delta: float) -> float:
    q = special.expit(epsilon)
    tail = stats.binom.sf(v - 1, r, q)  # P[Bin(r, q) ≥ v]
    if delta == 0 or v == 0:
        return float(min(tail, 1.0))
    i = np.arange(1, v + 1)
    # P[v > Bin(r, q) ≥ v − i] = cdf(v − 1) − cdf(v − i − 1), for all i at once.
    window = stats.binom.cdf(v - 1, r, q) - stats.binom.cdf(v - 1 - i, r, q)
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
    return float(
        optimize.bisect(lambda e: alpha - _one_run_p_value(e, m, r, v, delta), lo, hi, xtol=1e-7)
    )


def one_run_epsilon_from_counts(m: int, r: int, v: int, delta: float, alpha: float = 0.05) -> float:
    """Largest ε whose one-run p-value is ≤ `alpha` (0 if none): an ε lower bound at 1 − alpha.

    Steinke, Nasr, Jagielski 2023, arXiv 2305.08846: m candidates each included independently with
    probability ½, r guesses of which v correct; p(ε) as in `one_run_p_value`, found by bisection
    (p is increasing in ε). Valid for a guess set fixed before looking at membership; choosing
    among several guess sets needs a correction (see `epsilon_lower_bound_one_run`).
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
    scores,
    members,
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
        "correction": (f"none: guess thresholds chosen on a random pilot of {pilot.size} candidates, "
                       f"bound computed on the other {n_eval} only (one pre-declared test)"),
        # One row, the evaluation test; the key is what readers of results.json look for.
        "per_fraction": [row],
        "delta": d,
        "assumption": "membership of each candidate is an independent fair coin flip",
        "quantity": "one-run epsilon lower bound",
    }
    return EpsilonLowerBound(
        epsilon=float(epsilon), method="one_run", confidence=conf, sound=True, details=details,
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
    best = min(_one_run_p_value(eps, _as_count("m", row.get("m", m)), int(row["r"]), int(row["v"]), d)
               if int(row["r"]) else 1.0 for row in rows)
    return float(min(1.0, len(rows) * best))


@functools.lru_cache(maxsize=1024)  # the verdict asks once per check with the same (m, δ, α)
def one_run_ceiling(m: int, delta: float, alpha: float, pilot_fraction: float = DEFAULT_PILOT_FRACTION) -> float:
    """The largest one-run lower bound ANY attack could reach: every guess right, at level `alpha`.

    Steinke, Nasr, Jagielski 2023, arXiv 2305.08846. With m candidates `epsilon_lower_bound_one_run`
    evaluates on m_eval = m − pilot; the best outcome is a guess on every one of them, all right
    (the bound grows with r at v = r). A claim at or above this ceiling cannot be refuted by this
    audit: it is inconclusive for it.
    """
    m_ = _as_count("m", m)
    d = _check_delta(delta)
    a = validate_probability("alpha", alpha, open_low=True, open_high=True)
    n_eval = m_ - pilot_size(m_, pilot_fraction)
    if n_eval < 1 or m_ < 2:
        return 0.0
    return float(_one_run_epsilon(n_eval, n_eval, n_eval, d, a))


# --------------------------------------------------------------------------------------------------
# 3. Gaussian DP estimate
# --------------------------------------------------------------------------------------------------


def _gdp_mu_array(fpr_u, fnr_u) -> np.ndarray:
    # isf(x) = Φ⁻¹(1 − x), accurate for tiny x where 1 − x would round to 1.
    return stats.norm.isf(np.asarray(fpr_u, dtype=float)) - stats.norm.ppf(
        np.asarray(fnr_u, dtype=float)
    )


def gdp_mu_lower_bound(fpr_upper: float, fnr_upper: float) -> float:
    """μ-GDP parameter implied by error-rate upper bounds: Φ⁻¹(1 − FPR̄) − Φ⁻¹(FNR̄), floored at 0.

    A μ-GDP mechanism's trade-off curve is G_μ(x) = Φ(Φ⁻¹(1 − x) − μ) (Dong, Roth, Su 2019,
    "Gaussian Differential Privacy", arXiv 1905.02383); solving FNR = G_μ(FPR) for μ.
    """
    f = _check_rate("fpr_upper", fpr_upper)
    g = _check_rate("fnr_upper", fnr_upper)
    return float(max(_gdp_mu_array(f, g), 0.0))


def _gdp_delta_gap(eps: float, mu: float, log_delta: float) -> float:
    # ln(Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)) − ln δ, in log space so large ε cannot overflow.
    a = stats.norm.logcdf(-eps / mu + mu / 2)
    b = eps + stats.norm.logcdf(-eps / mu - mu / 2)
    if b >= a:
        return -np.inf
    return float(a + np.log1p(-np.exp(b - a)) - log_delta)


def epsilon_from_gdp_mu(mu: float, delta: float) -> float:
    """The ε at which a μ-GDP mechanism is (ε, δ)-DP: the root of
    δ = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)  (Dong, Roth, Su 2019, arXiv 1905.02383, Cor. 2.13).

    Found with `scipy.optimize.brentq`. 0 for μ = 0 or when δ already exceeds the ε = 0 value
    2Φ(μ/2) − 1; inf for δ = 0 and μ > 0, or μ = inf.
    """
    try:
        mu_ = float(mu)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"mu: expected a number, got {mu!r}") from exc
    if math.isnan(mu_) or mu_ < 0:
        raise ValueError(f"mu: must be ≥ 0, got {mu!r}")
    d = _check_delta(delta)
    if mu_ == 0:
        return 0.0
    if math.isinf(mu_) or d == 0:
        return math.inf
    log_delta = math.log(d)
    if _gdp_delta_gap(0.0, mu_, log_delta) <= 0:
        return 0.0
    hi = max(1.0, mu_)
    while _gdp_delta_gap(hi, mu_, log_delta) > 0:
        hi *= 2
    return float(optimize.brentq(_gdp_delta_gap, 0.0, hi, args=(mu_, log_delta), xtol=1e-10))


def gdp_mu_from_epsilon(epsilon: float, delta: float) -> float:
    """The μ whose μ-GDP mechanism has exactly this ε at δ (inverse of `epsilon_from_gdp_mu`)."""
    hi = 1.0
    while epsilon_from_gdp_mu(hi, delta) < epsilon:
        hi *= 2
    return float(optimize.brentq(lambda m: epsilon_from_gdp_mu(m, delta) - epsilon, 1e-9, hi, xtol=1e-12))


def epsilon_estimate_gdp(
    scores,
    members,
    delta: float,
    confidence: float = 0.95,
    strategy: ThresholdStrategy = HeldOut(),
) -> EpsilonLowerBound:
    """ε estimate (assumes GDP): the ε of the μ-GDP mechanism matching the attack's error rates.

    Nasr et al. 2023, "Tight Auditing of Differentially Private Machine Learning", arXiv
    2302.07956; Dong, Roth, Su 2019, "Gaussian Differential Privacy", arXiv 1905.02383.
    The rule (threshold, direction) and the one-sided Clopper-Pearson bounds FPR̄, FNR̄ are obtained
    exactly as in `epsilon_lower_bound_clopper_pearson` (same `strategy`, the rule maximising μ);
    then μ_LB = Φ⁻¹(1 − FPR̄) − Φ⁻¹(FNR̄) floored at 0, and
    `epsilon` = `epsilon_from_gdp_mu(μ_LB, δ)`.

    Only a lower bound IF the mechanism's trade-off curve is exactly Gaussian (roughly true for
    DP-SGD with many steps, not in general): `sound=False`, and it must never decide a violation
    verdict on its own.
    """
    s, m = validate_scores_and_members(scores, members)
    d = _check_delta(delta)
    conf = _check_confidence(confidence)
    strat = _check_strategy(strategy)
    details = _threshold_audit(s, m, d, conf, strat, _gdp_criterion)
    mu = float(max(_gdp_mu_array(details["fpr_upper"], details["fnr_upper"]), 0.0))
    eps = epsilon_from_gdp_mu(mu, d)
    details.update({"delta": d, "mu": mu, "quantity": GDP_LABEL})
    return EpsilonLowerBound(
        epsilon=eps, method="gdp", confidence=conf, sound=False, details=details
    )


# --------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------

#: Score-based estimators by name; each is callable as f(scores, members, delta, confidence).
ESTIMATORS: dict[str, Callable[..., EpsilonLowerBound]] = {
    "clopper_pearson": epsilon_lower_bound_clopper_pearson,
    "one_run": epsilon_lower_bound_one_run,
    "gdp": epsilon_estimate_gdp,
}
