"""Clopper-Pearson (ε, δ) lower bounds from a threshold attack, with the threshold chosen honestly.

Jagielski et al. 2020 (arXiv 2006.07709), Nasr et al. 2021 (arXiv 2101.04535): one-sided
Clopper-Pearson upper bounds on FPR and FNR of a threshold rule, turned into the largest ε the
(ε, δ) hypothesis-testing region excludes. The rule is chosen on a held-out part or paid for by
Bonferroni (`bound_types`). `_threshold_audit` is shared with the GDP estimate (`gdp_estimate`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from audit.statistics.attack_metrics import validate_probability, validate_scores_and_members
from audit.statistics.binomial import beta_ppf
from audit.statistics.bound_types import (
    EpsilonLowerBound,
    HeldOut,
    ThresholdStrategy,
    _as_count,
    _check_confidence,
    _check_delta,
    _check_rate,
    _check_strategy,
)
from audit.statistics.gdp_conversions import _gdp_mu_array

__all__ = [
    "clopper_pearson_upper",
    "epsilon_from_error_rates",
    "epsilon_lower_bound_from_counts",
    "epsilon_lower_bound_clopper_pearson",
    "choose_clopper_pearson_rule",
]


def _clopper_pearson_upper_array(k: np.ndarray | int, n, alpha: float) -> np.ndarray:
    k = np.asarray(k)
    n = np.asarray(n)
    # beta.ppf needs b > 0; where k == n the bound is 1 anyway.
    upper = beta_ppf(1.0 - alpha, k + 1, np.maximum(n - k, 1))
    return np.where(k < n, upper, 1.0)


def clopper_pearson_upper(k: int, n: int, alpha: float) -> float:
    """One-sided upper Clopper-Pearson bound p̄ on a binomial rate from k successes in n trials.

    Returns the (1 − alpha) quantile of Beta(k + 1, n − k), i.e. P[p ≤ p̄] ≥ 1 − alpha; 1.0 when
    k == n (Clopper & Pearson 1934, Biometrika 26:404-413).

    Args:
        k: successes (errors of the test, e.g. false positives).
        n: trials.
        alpha: one-sided error level.

    Returns:
        The upper bound p̄ in [0, 1].
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

    Args:
        fpr_upper: an upper confidence bound on the false-positive rate.
        fnr_upper: an upper confidence bound on the false-negative rate.
        delta: the δ of the claim.

    Returns:
        The ε lower bound (≥ 0; inf where a rate bound is 0 and the other term positive).
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
    return np.where(k_eval < n_eval, beta_ppf(1.0 - alpha, k_eval + 1.0, np.maximum(n_eval - k_eval, 1e-9)), 1.0)


def _best_rule(
    thresholds, s, m, alpha_per_rate, delta, criterion: Criterion, evaluation_sizes: tuple[int, int] | None = None
) -> dict[str, Any]:
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
            value = criterion(
                _anticipated_upper(fp_d, n0, evaluation_sizes[0], alpha_per_rate),
                _anticipated_upper(fn_d, n1, evaluation_sizes[1], alpha_per_rate),
                delta,
            )
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
    scores: ArrayLike,
    members: ArrayLike,
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

    Args:
        scores: one score per candidate, higher = more likely a member.
        members: 0/1 (or bool) per candidate.
        delta: the δ of the (ε, δ) bound.
        confidence: the probability with which the bound holds.
        strategy: how the threshold rule is chosen without paying on the bound (`HeldOut` or `Bonferroni`).

    Returns:
        An `EpsilonLowerBound` (`method="clopper_pearson"`, `sound=True`); `details` holds the rule,
        the counts and FPR̄, FNR̄.
    """
    s, m = validate_scores_and_members(scores, members)
    d = _check_delta(delta)
    conf = _check_confidence(confidence)
    strat = _check_strategy(strategy)
    details = _threshold_audit(s, m, d, conf, strat, _cp_criterion)
    eps = float(_epsilon_from_rates_array(details["fpr_upper"], details["fnr_upper"], d))
    details.update({"delta": d, "quantity": "clopper_pearson epsilon lower bound"})
    return EpsilonLowerBound(epsilon=eps, method="clopper_pearson", confidence=conf, sound=True, details=details)


def choose_clopper_pearson_rule(
    scores,
    members,
    n_eval_nonmembers: int,
    n_eval_members: int,
    alpha_per_rate: float,
    delta: float,
    max_thresholds: int = 512,
) -> tuple[float, bool]:
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
    chosen = _best_rule(
        thresholds,
        s,
        m,
        float(alpha_per_rate),
        _check_delta(delta),
        _cp_criterion,
        (int(n_eval_nonmembers), int(n_eval_members)),
    )
    return chosen["threshold"], chosen["direction"] == _HIGH
