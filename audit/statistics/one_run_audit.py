"""One-run audit of a DP claim from coin-flipped canaries: two sound tests, two estimates, a ceiling.

The setting (Steinke, Nasr, Jagielski 2023, arXiv 2305.08846): m canaries, each put into the one
training run by an independent fair coin, each scored by the auditor without looking at the
coins. From the same scores:

* **Steinke et al.** (sound for any mechanism): the (ε, δ) lower bound of
  `epsilon_bounds.epsilon_lower_bound_one_run` and the p-value of the claimed ε
  (`one_run_claim_p_value`);
* **f-DP one-run** (Mahloujifar, Melis, Chaudhuri 2024, arXiv 2410.22235; sound for any
  mechanism): refutation of the claim's whole trade-off curve (`fdp_one_run.fdp_one_run_audit`);
* **Gaussian normalized sum** (an estimate): for DP-SGD with a gradient canary the canary-aligned
  sum of the privatised updates, normalised by the out-canaries' spread, is asymptotically
  Gaussian (a sum over many steps of independent noise; Agrawal et al. 2026, arXiv 2606.12733),
  so in- and out-canaries differ by a Gaussian shift μ. μ's one-sided lower confidence bound
  (Welch standard error) is read as μ-GDP, and ε = the ε of μ-GDP at δ (Dong, Roth, Su 2019,
  arXiv 1905.02383). It rests on that asymptotic assumption (and on equal spreads): an estimate;
* **Andrew et al.** (an estimate): "One-shot Empirical Privacy Estimation for Federated
  Learning", arXiv 2302.03098: fit one Gaussian to the in-canaries' scores and one to the
  out-canaries', and report the ε at δ of the mechanism that outputs a draw from one or the other
  (`epsilon_two_gaussians`, exact for two Gaussians with different means and variances). No
  confidence interval: a point estimate.

The two sound tests decide; each runs at α/2 (Bonferroni). The *ceiling* is what a perfect attack
(every guess right) would give: Steinke et al.'s largest bound at α/2, and whether such an attack
would refute the claim's curve in the f-DP test. A claim neither could refute is untestable here.

Pure functions, no I/O.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import optimize, stats

from audit.statistics.audit_ceilings import smallest_sufficient
from audit.statistics.epsilon_bounds import (
    epsilon_from_gdp_mu,
    epsilon_lower_bound_one_run,
    one_run_ceiling,
    one_run_claim_p_value,
)
from audit.statistics.fdp_one_run import fdp_one_run_audit, fdp_one_run_refutes, profile_blow_up_inverse
from audit.statistics.gdp_fit import gaussian_family_figure, gaussian_tradeoff_fit
from audit.statistics.tradeoff_curves import PrivacyProfile

# The guess fractions of this module's own f-DP p-value and perfect-attack check (a Bonferroni family
# over fixed fractions: sound, though at large m weaker than the pilot split `fdp_one_run_audit` uses).
DEFAULT_GUESS_FRACTIONS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)

__all__ = [
    "GAUSSIAN_SUM_ASSUMPTION",
    "canaries_needed_one_run_claim",
    "delta_two_gaussians",
    "epsilon_andrew",
    "epsilon_gaussian_normalized_sum",
    "epsilon_two_gaussians",
    "fdp_one_run_p_value",
    "fdp_perfect_attack_refutes",
    "one_run_claim_audit",
]

GAUSSIAN_SUM_ASSUMPTION = (
    "the normalized canary-aligned sums of in- and out-canaries are Gaussian with equal "
    "spread (asymptotic over many steps, Agrawal et al. 2026, arXiv 2606.12733); not proven here"
)
ANDREW_ASSUMPTION = (
    "in- and out-canary scores are each Gaussian (Andrew et al. 2023, arXiv 2302.03098); a point "
    "estimate without a confidence interval"
)


def delta_two_gaussians(epsilon: float, mean_0: float, sd_0: float, mean_1: float, sd_1: float) -> float:
    """δ(ε) = sup_S P₁(S) − e^ε P₀(S) for P₀ = N(mean_0, sd_0²), P₁ = N(mean_1, sd_1²).

    The optimal S is {x : ln p₁(x) − ln p₀(x) > ε}, where the log ratio is a quadratic
    a·x² + b·x + c: S is a half-line (equal spreads), the outside of two roots (a > 0) or the
    inside (a < 0); P₀(S), P₁(S) are differences of normal CDFs.
    """
    s0, s1, m0, m1, eps = float(sd_0), float(sd_1), float(mean_0), float(mean_1), float(epsilon)
    if not (s0 > 0 and s1 > 0):
        raise ValueError(f"spreads must be > 0, got {sd_0!r}, {sd_1!r}")
    a = 1 / (2 * s0**2) - 1 / (2 * s1**2)
    b = m1 / s1**2 - m0 / s0**2
    c = m0**2 / (2 * s0**2) - m1**2 / (2 * s1**2) + math.log(s0 / s1) - eps

    def mass(lo: float, hi: float) -> float:
        p1 = stats.norm.cdf(hi, m1, s1) - stats.norm.cdf(lo, m1, s1)
        p0 = stats.norm.cdf(hi, m0, s0) - stats.norm.cdf(lo, m0, s0)
        return p1 - math.exp(eps) * p0 if eps < 700 else (p1 if p0 == 0 else -math.inf)

    # Upper tails through sf (exact far out), lower tails through cdf.
    def upper(x: float) -> float:
        return stats.norm.sf(x, m1, s1) - math.exp(min(eps, 700)) * stats.norm.sf(x, m0, s0)

    def lower(x: float) -> float:
        return stats.norm.cdf(x, m1, s1) - math.exp(min(eps, 700)) * stats.norm.cdf(x, m0, s0)

    if abs(a) < 1e-12 * max(abs(b), 1 / s0**2):
        if b == 0:
            return max(0.0, 1.0 - math.exp(eps)) if c > 0 else 0.0
        root = -c / b
        return max(0.0, upper(root) if b > 0 else lower(root))
    disc = b * b - 4 * a * c
    if disc <= 0:
        return max(0.0, 1.0 - math.exp(min(eps, 700))) if a > 0 else 0.0
    r1, r2 = sorted(((-b - math.sqrt(disc)) / (2 * a), (-b + math.sqrt(disc)) / (2 * a)))
    if a > 0:
        return max(0.0, lower(r1) + upper(r2))
    return max(0.0, mass(r1, r2))


def epsilon_two_gaussians(mean_0: float, sd_0: float, mean_1: float, sd_1: float, delta: float) -> float:
    """The smallest ε with δ(ε) ≤ `delta` in both directions (P₀ vs P₁ and P₁ vs P₀); inf if none ≤ 200."""

    def gap(eps: float) -> float:
        return (
            max(
                delta_two_gaussians(eps, mean_0, sd_0, mean_1, sd_1),
                delta_two_gaussians(eps, mean_1, sd_1, mean_0, sd_0),
            )
            - delta
        )

    if gap(0.0) <= 0:
        return 0.0
    hi = 1.0
    while gap(hi) > 0:
        hi *= 2
        if hi > 200:
            return math.inf
    return float(optimize.brentq(gap, 0.0, hi, xtol=1e-8))


def _split(scores, members) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=float)
    m = np.asarray(members, dtype=bool)
    if s.shape != m.shape or s.ndim != 1:
        raise ValueError("scores and members must be 1-d arrays of the same length")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores must be finite")
    inside, outside = s[m], s[~m]
    if inside.size < 2 or outside.size < 2:
        raise ValueError("need at least two in- and two out-canaries")
    return inside, outside


def epsilon_gaussian_normalized_sum(scores, members, delta: float, confidence: float = 0.95) -> dict[str, Any]:
    """ε estimate from the Gaussian normalized sum (see the module docstring; Agrawal et al. 2026,
    arXiv 2606.12733): μ_LB = (mean_in − mean_out − z_{conf}·√(v_in/n_in + v_out/n_out)) / sd_out,
    floored at 0, then ε of μ_LB-GDP at δ. Sound only under `GAUSSIAN_SUM_ASSUMPTION`."""
    inside, outside = _split(scores, members)
    sd_out = float(outside.std(ddof=1))
    if sd_out == 0:
        raise ValueError("the out-canaries' scores do not vary: nothing to normalise by")
    se = math.sqrt(inside.var(ddof=1) / inside.size + outside.var(ddof=1) / outside.size)
    z = float(stats.norm.ppf(confidence))
    mu_hat = (inside.mean() - outside.mean()) / sd_out
    mu_lb = max(0.0, (inside.mean() - outside.mean() - z * se) / sd_out)
    return {
        "mu": mu_lb,
        "mu_point": float(mu_hat),
        "epsilon": epsilon_from_gdp_mu(mu_lb, delta),
        "confidence": float(confidence),
        "assumption": GAUSSIAN_SUM_ASSUMPTION,
        "sound": False,
    }


def epsilon_andrew(scores, members, delta: float) -> dict[str, Any]:
    """Andrew et al. 2023 (arXiv 2302.03098) one-shot ε estimate: Gaussian fits to the out- and
    in-canaries' scores, ε at δ of the pair (`epsilon_two_gaussians`)."""
    inside, outside = _split(scores, members)
    m0, s0 = float(outside.mean()), float(outside.std(ddof=1))
    m1, s1 = float(inside.mean()), float(inside.std(ddof=1))
    if s0 == 0 or s1 == 0:
        raise ValueError("in- or out-canary scores do not vary: no Gaussian fit")
    return {
        "epsilon": epsilon_two_gaussians(m0, s0, m1, s1, delta),
        "mean_out": m0,
        "sd_out": s0,
        "mean_in": m1,
        "sd_in": s1,
        "assumption": ANDREW_ASSUMPTION,
        "sound": False,
    }


def fdp_perfect_attack_refutes(
    profile: PrivacyProfile, m: int, alpha: float, guess_fractions=DEFAULT_GUESS_FRACTIONS
) -> bool:
    """Would an attack guessing every one of its 2⌊f·m/2⌋ canaries right refute `profile` in the
    f-DP one-run test at level `alpha` (Bonferroni over the fractions, as `fdp_one_run_audit`)?"""
    inverse = profile_blow_up_inverse(profile)
    each = alpha / len(guess_fractions)
    for f in guess_fractions:
        r = 2 * int(math.floor(f * int(m) / 2))
        if r and fdp_one_run_refutes(inverse, int(m), r, r, each):
            return True
    return False


def fdp_one_run_p_value(scores, members, profile: PrivacyProfile, guess_fractions=DEFAULT_GUESS_FRACTIONS) -> float:
    """p-value of the claim's curve in the f-DP one-run test (Mahloujifar, Melis, Chaudhuri 2024,
    arXiv 2410.22235): for each guess fraction the smallest α at which its counts refute `profile`
    (bisection in log α: refutation only gets easier as α grows), times the number of fractions
    (Bonferroni, as `fdp_one_run_audit`); 1 when no fraction refutes even at α = 1."""
    s = np.where(np.isnan(np.asarray(scores, dtype=float)), -np.inf, np.asarray(scores, dtype=float))
    mem = np.asarray(members, dtype=bool)
    inverse = profile_blow_up_inverse(profile)
    order = np.argsort(s, kind="stable")
    best = 1.0
    for f in guess_fractions:
        k = int(math.floor(f * s.size / 2))
        if k == 0:
            continue
        right = int(mem[order[s.size - k :]].sum()) + int((~mem[order[:k]]).sum())
        if right == 0 or not fdp_one_run_refutes(inverse, s.size, 2 * k, right, 1.0 - 1e-12):
            continue
        lo, hi = -40.0, 0.0  # log10 α
        if fdp_one_run_refutes(inverse, s.size, 2 * k, right, 10**lo):
            best = min(best, 10**lo)
            continue
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if fdp_one_run_refutes(inverse, s.size, 2 * k, right, 10**mid) else (mid, hi)
        best = min(best, 10**hi)
    return float(min(1.0, len(guess_fractions) * best))


def canaries_needed_one_run_claim(
    claimed_epsilon: float, profile: PrivacyProfile | None, delta: float, alpha: float, limit: int = 10**6
) -> int | None:
    """Smallest m for which a perfect attack passes either sound test (α split in two); None: > `limit`."""

    def enough(m: int) -> bool:
        if one_run_ceiling(m, delta, alpha / 2) > claimed_epsilon:
            return True
        return profile is not None and fdp_perfect_attack_refutes(profile, m, alpha / 2)

    return smallest_sufficient(enough, start=100, limit=limit)


def one_run_claim_audit(
    scores,
    members,
    *,
    claimed_epsilon: float,
    delta: float,
    profile: PrivacyProfile | None,
    confidence: float = 0.95,
    with_estimates: bool = True,
) -> dict[str, Any]:
    """Everything the one-run white-box audit says about one claim (ε at δ, with its curve `profile`
    when known) from one run's canary `scores` and coins `members`: see the module docstring.

    `status`: "refuted" when either sound test rejects at α/2; else "held" when a perfect attack
    could have refuted it (ceiling above the claim, or the f-DP test's perfect point refutes the
    curve); else "untestable". `p_value`: the two tests' p-values combined by Bonferroni,
    min(1, 2·min(p_Steinke, p_f-DP)), for a Holm family (≤ α exactly when `status` is refuted).
    """
    s = np.asarray(scores, dtype=float)
    mem = np.asarray(members, dtype=bool)
    alpha = 1.0 - float(confidence)
    half = 1.0 - alpha / 2
    steinke = epsilon_lower_bound_one_run(s, mem, delta, half)
    p_steinke = one_run_claim_p_value(steinke.details, claimed_epsilon, delta)
    ceiling = one_run_ceiling(int(s.size), delta, alpha / 2)
    # One check of the Gaussian curve for every Gaussian-family figure of these scores (gdp_fit).
    fit = gaussian_tradeoff_fit(s, mem) if with_estimates else None
    fdp = (
        fdp_one_run_audit(
            s, mem, profile, delta=delta, confidence=half, with_gdp_epsilon=with_estimates, gaussian_fit=fit
        )
        if profile is not None
        else None
    )
    fdp_refutable = bool(profile is not None and fdp_perfect_attack_refutes(profile, int(s.size), alpha / 2))
    p_fdp = fdp_one_run_p_value(s, mem, profile) if profile is not None else 1.0
    refuted_steinke = p_steinke <= alpha / 2
    refuted_fdp = bool(fdp and fdp["refuted"])
    if refuted_steinke or refuted_fdp:
        status = "refuted"
    elif ceiling > claimed_epsilon or fdp_refutable:
        status = "held"
    else:
        status = "untestable"
    needed = None if status != "untestable" else canaries_needed_one_run_claim(claimed_epsilon, profile, delta, alpha)
    result: dict[str, Any] = {
        "claimed_epsilon": float(claimed_epsilon),
        "delta": float(delta),
        "confidence": float(confidence),
        "m": int(s.size),
        "n_in": int(mem.sum()),
        "status": status,
        "steinke": {
            "epsilon": steinke.epsilon,
            "p_value_claim": p_steinke,
            "refuted": refuted_steinke,
            "ceiling": ceiling,
            "r": steinke.details["r"],
            "v": steinke.details["v"],
            "level": alpha / 2,
            "sound": True,
            "paper": "Steinke, Nasr, Jagielski 2023, arXiv 2305.08846",
        },
        "fdp": None
        if fdp is None
        else {
            "refuted": refuted_fdp,
            "refutable_by_perfect_attack": fdp_refutable,
            "curve": fdp["profile"],
            "p_value_claim": p_fdp,
            "gdp_family_epsilon": fdp["gdp_epsilon"],
            "gdp_family_epsilon_withheld": fdp.get("gdp_epsilon_withheld"),
            "level": alpha / 2,
            "sound": True,
            "gdp_family_epsilon_note": "a lower bound only if the curve is Gaussian",
            "paper": "Mahloujifar, Melis, Chaudhuri 2024, arXiv 2410.22235",
        },
        "ceiling": ceiling,
        "p_value": float(min(1.0, 2 * min(p_steinke, p_fdp))),
        "canaries_needed": needed,
    }
    if fit is not None:  # with_estimates
        withheld = fit["reason"] if fit.get("withheld") else None
        for key, estimate in (
            ("gaussian_sum", epsilon_gaussian_normalized_sum(s, mem, delta, confidence)),
            ("andrew", epsilon_andrew(s, mem, delta)),
        ):
            result[key] = {
                **estimate,
                "epsilon": gaussian_family_figure(estimate["epsilon"], fit),
                "withheld": withheld,
            }
    return result
