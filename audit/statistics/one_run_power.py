"""One-run canary rows: their statistics, and what a perfect attack could show at a Holm level.

A row (the main job's white-box twin, audit.sweep.whitebox_one_run; the federated job's canary
clients, audit.federated.canary_rows) carries, computed before any score was read, the f-DP
one-run test's perfect-attack p-values (Mahloujifar, Melis, Chaudhuri 2024, arXiv 2410.22235)
against the claim's DP-SGD curve and the same DP-SGD with less noise, and at larger m; the
Steinke et al. ceiling (arXiv 2305.08846) follows from m and δ. The verdict asks at its family's
first Holm level α/K whether the row could have refuted its claim (`whitebox_power`).
`one_run_row` computes a row's statistics from one run's canary scores. Pure functions.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from audit.statistics.epsilon_bounds import one_run_ceiling
from audit.statistics.one_run_audit import fdp_one_run_p_value, one_run_claim_audit
from audit.statistics.tradeoff_curves import dpsgd_privacy_profile

__all__ = ["curve_ceilings", "fdp_perfect_p_value", "one_run_row", "whitebox_power"]


# σ' = factor · σ: the DP-SGD curves (same q, T) whose refutability by a perfect attack gives the
# row's ceiling as an ε (the claim's own curve is factor 1; less noise, larger ε below it).
CEILING_NOISE_FACTORS = (1.0, 0.99, 0.98, 0.96, 0.94, 0.9, 0.85, 0.8, 0.7, 0.6, 0.5)
# Canary counts (multiples of m) whose perfect-attack p-values say what m would make a row testable.
NEEDED_M_FACTORS = (1, 2, 4, 8, 16, 32, 64)
MAX_CANARIES = 1_000_000


@functools.lru_cache(maxsize=64)  # a row asks for (its claim's curve, m) twice: `curve_ceilings` and `by_m`
def fdp_perfect_p_value(profile, m: int) -> float:
    """The f-DP one-run test's p-value (`fdp_one_run_p_value`, Mahloujifar, Melis, Chaudhuri 2024,
    arXiv 2410.22235) of `profile` for an attack that guesses every one of its canaries right, with
    m canaries, half of them in: the smallest level at which the test could refute the curve here."""
    m = int(m)
    coins = np.zeros(m, dtype=bool)
    coins[: m // 2] = True
    return float(fdp_one_run_p_value(coins.astype(float), coins, profile))


def _epsilon_at(profile, delta: float) -> float:
    """The profile's ε at δ (its grid's first ε' with δ(ε') ≤ δ; the pessimistic PLD: an upper
    bound on the curve's true ε, so a ceiling read from it is never overstated by the grid)."""
    eps, deltas = profile.arrays()
    below = np.flatnonzero(deltas <= delta)
    return float(eps[below[0]]) if below.size else math.inf


def curve_ceilings(
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    m: int,
    delta: float,
    claim: float,
    factors=CEILING_NOISE_FACTORS,
) -> list[dict[str, float]]:
    """[{factor, epsilon, fdp_perfect_p_value}]: for σ' = factor·σ (same q, T), the curve's ε at δ
    (the claim itself at factor 1) and the f-DP test's perfect-attack p-value against it. At level
    a, the row's f-DP ceiling is the largest ε whose p-value is ≤ a (less noise: harder to refute)."""
    rows = []
    for factor in factors:
        profile = dpsgd_privacy_profile(float(noise_multiplier) * factor, float(sample_rate), int(steps))
        p = fdp_perfect_p_value(profile, m)
        rows.append(
            {
                "factor": factor,
                "epsilon": float(claim) if factor == 1.0 else _epsilon_at(profile, delta),
                "fdp_perfect_p_value": p,
            }
        )
        if p >= 1.0:  # refutation only gets harder with less noise
            break
    return rows


def whitebox_power(row: dict[str, Any], level: float) -> dict[str, Any]:
    """What a perfect attack could show with the white-box one-run row at Holm level `level` (the
    sound tests its p-value combines, `row["tests"]`, at `level`/len each, Bonferroni):
    {powered, ceiling, steinke_ceiling, curve_ceiling, needed}. Pure; reads only what the row computed
    before any score (m, δ, the curves' perfect-attack p-values), so the family stays pre-declared. Rows of
    older results (without `curve_ceilings`) fall back to `refutable_alone`."""
    claim, m, delta = float(row["claim"]), int(row["m"]), float(row.get("delta") or 0.0)
    tests = [t for t in row.get("tests") or ["steinke", "fdp"] if t in ("steinke", "fdp")] or ["steinke", "fdp"]
    half = level / len(tests)  # each test of the row's Bonferroni pair (or the one test alone)
    steinke = one_run_ceiling(m, delta, half) if "steinke" in tests else 0.0
    curves = [c for c in row.get("curve_ceilings") or [] if isinstance(c, dict)]
    if not curves:
        return {
            "powered": bool(row.get("refutable_alone")),
            "ceiling": row.get("ceiling"),
            "steinke_ceiling": steinke,
            "curve_ceiling": None,
            "needed": row.get("canaries_needed"),
        }
    if "fdp" not in tests:
        curves = []
    refutable = [float(c["epsilon"]) for c in curves if float(c["fdp_perfect_p_value"]) <= half]
    curve_ceiling = max(refutable) if refutable else None
    powered = steinke > claim or any(
        float(c["factor"]) == 1.0 and float(c["fdp_perfect_p_value"]) <= half for c in curves
    )
    needed = None
    if not powered:
        needed = next(
            (
                int(k)
                for k, p in sorted((row.get("fdp_perfect_p_by_m") or {}).items(), key=lambda kv: int(kv[0]))
                if float(p) <= level / 2 or one_run_ceiling(int(k), delta, level / 2) > claim
            ),
            None,
        )
    return {
        "powered": bool(powered),
        "ceiling": max([steinke] + refutable),
        "steinke_ceiling": steinke,
        "curve_ceiling": curve_ceiling,
        "needed": needed,
    }


def one_run_row(
    scores_all,
    scores_final,
    coins,
    *,
    claim: float,
    delta: float,
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    confidence: float,
) -> dict[str, Any]:
    """The statistics of a one-run canary row (every iterate decides; the final model is shown) for a
    claim whose mechanism is the Poisson-subsampled Gaussian (σ, q, T): Steinke et al. and the f-DP
    test (`one_run_claim_audit`), combined by Bonferroni over the tests a perfect attack could pass
    alone at α — Steinke et al. cannot reach a large claim at small δ (its 2mδ term), and spending
    half of α on it would cost the f-DP test its power; the choice depends on m, δ, σ, q, T and the
    claim, never on the scores, so the family stays pre-declared. Plus what a perfect attack would
    reach (`curve_ceilings`, `fdp_perfect_p_by_m`) for the verdict's power at its Holm level."""
    coins = np.asarray(coins, dtype=bool)
    m = int(coins.size)
    profile = dpsgd_privacy_profile(float(noise_multiplier), float(sample_rate), int(steps))
    audit = one_run_claim_audit(
        scores_all, coins, claimed_epsilon=claim, delta=delta, profile=profile, confidence=confidence
    )
    final = one_run_claim_audit(
        scores_final,
        coins,
        claimed_epsilon=claim,
        delta=delta,
        profile=profile,
        confidence=confidence,
        with_estimates=False,
    )
    alpha = 1.0 - float(confidence)
    ceilings = curve_ceilings(noise_multiplier, sample_rate, steps, m, delta, claim)
    by_m = {str(k * m): fdp_perfect_p_value(profile, k * m) for k in NEEDED_M_FACTORS if k * m <= MAX_CANARIES}
    able = {
        "steinke": one_run_ceiling(m, delta, alpha) > claim,
        "fdp": float(ceilings[0]["fdp_perfect_p_value"]) <= alpha,
    }
    tests = [name for name, ok in able.items() if ok] or ["steinke", "fdp"]
    p_of = {"steinke": float(audit["steinke"]["p_value_claim"]), "fdp": float(audit["fdp"]["p_value_claim"])}
    p_value = float(min(1.0, len(tests) * min(p_of[name] for name in tests)))
    refutable_alone = any(able.values()) and (
        ("steinke" in tests and one_run_ceiling(m, delta, alpha / len(tests)) > claim)
        or ("fdp" in tests and float(ceilings[0]["fdp_perfect_p_value"]) <= alpha / len(tests))
    )
    return {
        "claim": float(claim),
        "delta": float(delta),
        "m": m,
        "n_in": int(coins.sum()),
        "observe": "every iterate",
        "status": audit["status"],
        "p_value": p_value,
        "tests": tests,  # the sound tests in the p-value, Bonferroni over len(tests)
        "p_value_steinke": p_of["steinke"],
        "p_value_fdp": p_of["fdp"],
        "refutable_alone": bool(refutable_alone),
        "ceiling": audit["ceiling"],
        "steinke_epsilon": audit["steinke"]["epsilon"],
        "fdp_refuted": bool(audit["fdp"]["refuted"]),
        "fdp_gdp_family_epsilon": audit["fdp"]["gdp_family_epsilon"],
        "gaussian_sum_epsilon": audit["gaussian_sum"]["epsilon"],
        "andrew_epsilon": audit["andrew"]["epsilon"],
        "canaries_needed": audit.get("canaries_needed"),
        # What a perfect attack would reach (before any score is read): the verdict's power at its Holm level.
        "curve_ceilings": ceilings,
        "fdp_perfect_p_by_m": by_m,
        "final_model": {
            "status": final["status"],
            "steinke_epsilon": final["steinke"]["epsilon"],
            "fdp_refuted": bool(final["fdp"]["refuted"]),
            "note": "same run, final model only: shown",
        },
    }
