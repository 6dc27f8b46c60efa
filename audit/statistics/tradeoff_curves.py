"""Trade-off curves (f-DP) of a privacy claim, and the test "does this attack beat the claim's curve".

A mechanism is f-DP (Dong, Roth, Su 2019, "Gaussian Differential Privacy", arXiv 1905.02383) when
every test of "record in" against "record out" with false-positive rate α has false-negative
rate ≥ f(α). A claim (ε, δ) is ONE point of a mechanism's privacy profile; DP-SGD's accountant
states the whole profile δ(ε') for every ε' (the Poisson-subsampled Gaussian composed T times),
and (Dong, Roth, Su 2019, Proposition 2.12) the mechanism is then f-DP with

    f(α) = sup_{ε'} max(0, 1 − δ(ε') − e^{ε'} α, e^{−ε'} (1 − δ(ε') − α)).

Testing an attack against this whole curve at moderate FPR is what gives black-box audits power:
a single (ε, δ = 1e-5) point can only be refuted by likelihood ratios above e^ε, far in the tail.

Conservative by construction: δ(ε') comes from `dp_accounting`'s PLD with the *pessimistic*
discretisation (an upper bound on the true δ(ε')), and the supremum runs over a finite grid of ε';
both make `tradeoff_from_profile` a LOWER envelope of the claim's true curve, so a point found below
it is below the true curve too (a refutation is sound; at worst some refutable points are missed).

Pure functions, no I/O.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats

from audit.statistics.epsilon_bounds import _clopper_pearson_upper_array, clopper_pearson_upper

__all__ = [
    "PrivacyProfile",
    "dpsgd_privacy_profile",
    "gdp_tradeoff",
    "pair_privacy_profile",
    "best_profile_rule",
    "choose_profile_rule",
    "claim_profile",
    "profile_ceiling",
    "profile_test",
    "refute_point",
    "tradeoff_from_profile",
]

# Discretisation of the privacy-loss values (dp_accounting's value_discretization_interval).
PROFILE_DISCRETIZATION = 1e-3
# ε' grid of a DP-SGD profile: 0 .. EPSILON_GRID_MAX in EPSILON_GRID_POINTS steps (δ(ε') below
# 1e-12 beyond the last useful point adds nothing to the curve).
EPSILON_GRID_MAX = 30.0
EPSILON_GRID_POINTS = 1201


@dataclass(frozen=True)
class PrivacyProfile:
    """Pairs (ε'_i, δ_i): the mechanism is (ε'_i, δ_i)-DP for every i (a claim's privacy profile)."""

    epsilons: tuple[float, ...]
    deltas: tuple[float, ...]
    source: str

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self.epsilons, dtype=float), np.asarray(self.deltas, dtype=float)


@lru_cache(maxsize=64)
def dpsgd_privacy_profile(noise_multiplier: float, sample_rate: float, steps: int,
                          discretization: float = PROFILE_DISCRETIZATION) -> PrivacyProfile:
    """The privacy profile of T = `steps` compositions of the Poisson-subsampled (rate q) Gaussian
    mechanism with noise multiplier σ (DP-SGD as its accountant sees it), from `dp_accounting`'s
    privacy-loss distribution (Koskela et al. 2020; Doroshenko et al. 2022, arXiv 2207.04380),
    pessimistic estimate: each δ(ε') is an upper bound on the true one (for both add and remove
    neighbours), so the curve built from it is a lower envelope of the true trade-off curve.
    """
    from dp_accounting.pld import privacy_loss_distribution as pld

    sigma, q, t = float(noise_multiplier), float(sample_rate), int(steps)
    if not (math.isfinite(sigma) and sigma > 0) or not (0 < q <= 1) or t < 1:
        raise ValueError(f"need σ > 0, q in (0, 1], T ≥ 1; got σ={noise_multiplier!r}, q={sample_rate!r}, T={steps!r}")
    distribution = pld.from_gaussian_mechanism(
        sigma, sampling_prob=q, pessimistic_estimate=True, value_discretization_interval=float(discretization),
        use_connect_dots=True,
    ).self_compose(t)
    grid = np.linspace(0.0, EPSILON_GRID_MAX, EPSILON_GRID_POINTS)
    deltas = np.clip(np.asarray(distribution.get_delta_for_epsilon(grid), dtype=float), 0.0, 1.0)
    return PrivacyProfile(tuple(float(v) for v in grid), tuple(float(v) for v in deltas),
                          f"PLD (pessimistic): Poisson-subsampled Gaussian σ={sigma:g}, q={q:g}, T={t}")


def pair_privacy_profile(epsilon: float, delta: float) -> PrivacyProfile:
    """The profile of a bare (ε, δ) claim: the one pair (its curve is f_{ε,δ}, Dong, Roth, Su 2019)."""
    eps, d = float(epsilon), float(delta)
    if not (math.isfinite(eps) and eps >= 0) or not (0 <= d < 1):
        raise ValueError(f"need ε ≥ 0 finite and δ in [0, 1); got ε={epsilon!r}, δ={delta!r}")
    return PrivacyProfile((eps,), (d,), f"({eps:g}, {d:g})-DP")


def claim_profile(epsilon: float | None, delta: float, dpsgd: tuple[float, float, int] | None = None
                  ) -> PrivacyProfile | None:
    """The privacy profile a claim states: DP-SGD's whole profile when the accountant's (σ, q, T) is
    known (`dpsgd`), else the bare (`epsilon`, `delta`) pair's, else None. A caller whose user
    overrode ε passes `dpsgd=None`, so that the stated pair, not the accountant, is tested."""
    if dpsgd is not None:
        sigma, q, steps = dpsgd
        return dpsgd_privacy_profile(float(sigma), float(q), int(steps))
    if epsilon is not None:
        return pair_privacy_profile(epsilon, delta)
    return None


def _curve_terms(profile: PrivacyProfile, alpha: np.ndarray) -> np.ndarray:
    """(len(alpha), pairs) values of max(1 − δ − e^ε α, e^{−ε}(1 − δ − α)) per profile pair."""
    eps, deltas = profile.arrays()
    a = np.asarray(alpha, dtype=float)[..., None]
    first = 1.0 - deltas - np.exp(eps) * a
    second = np.exp(-eps) * (1.0 - deltas - a)
    return np.maximum(first, second)


def tradeoff_from_profile(profile: PrivacyProfile, alpha) -> np.ndarray:
    """f(α) = sup over the profile's pairs of max(0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α)).

    Dong, Roth, Su 2019 (arXiv 1905.02383), Proposition 2.12: a mechanism that is (ε, δ)-DP for
    every pair is f-DP with this f. A lower envelope of the mechanism's true curve (see the module
    docstring): the supremum runs over finitely many pairs.
    """
    terms = _curve_terms(profile, np.atleast_1d(np.asarray(alpha, dtype=float)))
    out = np.clip(terms.max(axis=-1), 0.0, 1.0)
    return out if np.ndim(alpha) else out.reshape(())


def gdp_tradeoff(mu: float, alpha) -> np.ndarray:
    """G_μ(α) = Φ(Φ⁻¹(1 − α) − μ): the trade-off curve of μ-GDP (Dong, Roth, Su 2019, Def. 2.7),
    i.e. of telling N(0, 1) from N(μ, 1)."""
    a = np.asarray(alpha, dtype=float)
    return stats.norm.cdf(stats.norm.isf(a) - float(mu))


def refute_point(profile: PrivacyProfile, fpr_upper: float, fnr_upper: float) -> dict | None:
    """Is the point (FPR, FNR) = (`fpr_upper`, `fnr_upper`) strictly below the claim's curve?

    If an attack's error rates are at most these (e.g. Clopper-Pearson upper bounds that hold
    jointly with probability ≥ 1 − α), and FNR̄ < f_claim(FPR̄), then the mechanism is NOT f_claim-DP
    (f is non-increasing, so its true FNR ≥ f(true FPR) ≥ f(FPR̄) > FNR̄ would contradict the
    bounds). Returns None when the point is on or above the curve; else the profile pair
    (ε', δ(ε')) the point violates most (largest gap), with `margin` = f_claim(FPR̄) − FNR̄.
    """
    fpr, fnr = float(fpr_upper), float(fnr_upper)
    if not (0 <= fpr <= 1 and 0 <= fnr <= 1):
        raise ValueError(f"error rates must lie in [0, 1], got FPR {fpr_upper!r}, FNR {fnr_upper!r}")
    terms = _curve_terms(profile, np.array([fpr]))[0]
    best = int(np.argmax(terms))
    margin = float(terms[best]) - fnr
    if margin <= 0:
        return None
    eps, deltas = profile.arrays()
    return {"epsilon": float(eps[best]), "delta": float(deltas[best]), "margin": margin,
            "fpr_upper": fpr, "fnr_upper": fnr, "claimed_fnr_floor": float(terms[best])}


# --------------------------------------------------------------------------------------------------
# The profile test: one threshold rule, chosen on selection data, judged on independent trials
# --------------------------------------------------------------------------------------------------

HIGH, LOW = "member if score >= threshold", "member if score < threshold"


def _errors(rule: tuple[float, str], scores_in: np.ndarray, scores_out: np.ndarray) -> tuple[int, int]:
    threshold, direction = rule
    if direction == HIGH:
        return int(np.sum(scores_out >= threshold)), int(np.sum(scores_in < threshold))
    return int(np.sum(scores_out < threshold)), int(np.sum(scores_in >= threshold))


# Selection FPRs a rule may have: in the tails the few selection scores make the anticipated margin
# noise (a winner's curse), and the claim's curve is refuted most easily at moderate FPR anyway.
SELECTION_FPR_RANGE = (0.25, 0.75)


def best_profile_rule(scores_in, scores_out, profile: PrivacyProfile, n_eval_in: int, n_eval_out: int,
                      confidence: float = 0.95, fpr_range: tuple[float, float] = SELECTION_FPR_RANGE
                      ) -> tuple[tuple[float, str], float]:
    """(rule, anticipated margin): the threshold rule (threshold, direction) to evaluate on fresh
    trials, chosen on SELECTION scores only, and how far below the claim's curve its anticipated
    Clopper-Pearson point lies (the selection error rates as counts over `n_eval_*` trials; the
    `refute_point` margin f_claim(FPR̄) − FNR̄, > 0 when the point would refute the claim). Among
    the rules whose selection FPR lies in `fpr_range`. Using these scores again for the evaluation
    would make the test invalid.
    """
    s_in = np.asarray(scores_in, dtype=float)
    s_out = np.asarray(scores_out, dtype=float)
    if s_in.size < 1 or s_out.size < 1:
        raise ValueError("need selection scores on both sides")
    alpha = 1.0 - float(confidence)
    candidates = np.unique(np.concatenate([s_in, s_out]))
    best, best_margin = (float(np.median(np.concatenate([s_in, s_out]))), HIGH), -np.inf
    for direction in (HIGH, LOW):
        if direction == HIGH:
            fpr = (s_out[None, :] >= candidates[:, None]).mean(axis=1)
            fnr = (s_in[None, :] < candidates[:, None]).mean(axis=1)
        else:
            fpr = (s_out[None, :] < candidates[:, None]).mean(axis=1)
            fnr = (s_in[None, :] >= candidates[:, None]).mean(axis=1)
        fpr_u = _clopper_pearson_upper_array(np.round(fpr * n_eval_out), int(n_eval_out), alpha / 2)
        fnr_u = _clopper_pearson_upper_array(np.round(fnr * n_eval_in), int(n_eval_in), alpha / 2)
        margin = tradeoff_from_profile(profile, fpr_u) - fnr_u
        margin = np.where((fpr >= fpr_range[0]) & (fpr <= fpr_range[1]), margin, -np.inf)
        i = int(np.argmax(margin))
        if margin[i] > best_margin:
            best, best_margin = (float(candidates[i]), direction), float(margin[i])
    return best, best_margin


def choose_profile_rule(scores_in, scores_out, profile: PrivacyProfile, n_eval_in: int, n_eval_out: int,
                        confidence: float = 0.95, fpr_range: tuple[float, float] = SELECTION_FPR_RANGE
                        ) -> tuple[float, str]:
    """The rule of `best_profile_rule` (chosen on selection scores only), without its margin."""
    return best_profile_rule(scores_in, scores_out, profile, n_eval_in, n_eval_out, confidence, fpr_range)[0]


def profile_test(scores_in, scores_out, rule: tuple[float, str], profile: PrivacyProfile,
                 confidence: float = 0.95) -> dict:
    """Refute the claim's whole privacy profile with ONE pre-chosen threshold rule on independent
    trials (Dong, Roth, Su 2019, arXiv 1905.02383, for the curve; Clopper-Pearson as in Jagielski,
    Ullman, Oprea 2020, arXiv 2006.07709, for the error rates; cf. Nasr et al. 2023, arXiv
    2302.07956, who audit against the f-DP curve).

    `scores_in` / `scores_out`: one score per independent trial with / without the canary; `rule`
    must not depend on them. FPR̄ and FNR̄ are one-sided Clopper-Pearson upper bounds at α/2 each
    (α = 1 − confidence), so both hold together with probability ≥ 1 − α; the claim is refuted when
    (FPR̄, FNR̄) lies below its trade-off curve (`refute_point`). Sound: a mechanism that satisfies
    the claim is refuted with probability ≤ α. Returns counts, rates, `refuted` and the refuted
    (ε', δ(ε')) pair (or None).
    """
    s_in = np.asarray(scores_in, dtype=float)
    s_out = np.asarray(scores_out, dtype=float)
    if s_in.size < 1 or s_out.size < 1:
        raise ValueError("need evaluation scores on both sides")
    alpha = 1.0 - float(confidence)
    fp, fn = _errors(rule, s_in, s_out)
    fpr_u = clopper_pearson_upper(fp, s_out.size, alpha / 2)
    fnr_u = clopper_pearson_upper(fn, s_in.size, alpha / 2)
    refuted = refute_point(profile, fpr_u, fnr_u)
    return {
        "threshold": float(rule[0]), "direction": rule[1],
        "false_positives": fp, "n_without": int(s_out.size), "false_negatives": fn, "n_with": int(s_in.size),
        "fpr": fp / s_out.size, "fnr": fn / s_in.size, "fpr_upper": fpr_u, "fnr_upper": fnr_u,
        "claimed_fnr_floor": float(tradeoff_from_profile(profile, fpr_u)),
        "confidence": float(confidence), "refuted": refuted is not None, "refuted_pair": refuted,
        "profile": profile.source,
    }


def profile_ceiling(profile: PrivacyProfile, n_in: int, n_out: int, confidence: float = 0.95) -> dict:
    """What a PERFECT attack (no error on any of these trials) could show: its Clopper-Pearson
    point and whether that point refutes the profile. When it does not, no attack with this many
    trials can refute the claim: the audit is inconclusive, whatever the code does."""
    alpha = 1.0 - float(confidence)
    fpr_u = clopper_pearson_upper(0, int(n_out), alpha / 2)
    fnr_u = clopper_pearson_upper(0, int(n_in), alpha / 2)
    refuted = refute_point(profile, fpr_u, fnr_u)
    return {"fpr_upper": fpr_u, "fnr_upper": fnr_u, "refutable": refuted is not None,
            "strongest_refutable_pair": refuted}
