"""The main job's white-box one-run rows: each DP target trained once more with gradient canaries.

The membership attacks test what an attacker learns from the released model; with a few thousand
candidates they cannot reach a claim above ε ≈ 2.5 (their one-run ceiling). The white-box one-run
audit (Steinke, Nasr, Jagielski 2023, arXiv 2305.08846) trains a *twin* of each DP target — same
data, seed, σ, q, T and Opacus optimizer — with m gradient canaries (`targets.canaries`: Dirac
canaries on coordinates of their own, each in by a fair coin, then Poisson-sampled like a record)
and scores every canary from every iterate. The released target is the plain model; the twin only
tests the claim (its test accuracy is shown beside the target's). From the twin's scores
(`audit.statistics.one_run_audit`): Steinke et al. and the f-DP one-run test decide (their
Bonferroni-combined p-value joins the verdict's Holm family), the estimates are shown.

The row tests the *same* claim as the target's membership rows (the accountant's (ε, δ)), in one
Holm family with them (`audit.machinery.verdict`). Whether it could have refuted the claim at its
Holm level α/K is known only once K is: so the row carries what a *perfect* attack would reach,
computed before any score is read (it depends on m, δ, q, T, σ only) — the f-DP test's perfect-attack
p-value against the claim's curve and against the curves of the same DP-SGD with less noise
(`curve_ceilings`: the largest ε a perfect attack refutes at a level is the row's ceiling there) and
at larger m (`fdp_perfect_p_by_m`: what m would make it testable).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from audit.statistics.one_run_audit import fdp_one_run_p_value, one_run_claim_audit
from audit.statistics.epsilon_bounds import one_run_ceiling
from audit.statistics.tradeoff_curves import dpsgd_privacy_profile
from targets.training import TrainedTarget, TrainingSpec, train_target

__all__ = ["ROW_FAMILY", "curve_ceilings", "fdp_perfect_p_value", "whitebox_one_run_entry"]

ROW_FAMILY = "white-box one-run"
_CANARY_STREAM = 77
# σ' = factor · σ: the DP-SGD curves (same q, T) whose refutability by a perfect attack gives the
# row's ceiling as an ε (the claim's own curve is factor 1; less noise, larger ε below it).
CEILING_NOISE_FACTORS = (1.0, 0.99, 0.98, 0.96, 0.94, 0.9, 0.85, 0.8, 0.7, 0.6, 0.5)
# Canary counts (multiples of m) whose perfect-attack p-values say what m would make a row testable.
NEEDED_M_FACTORS = (1, 2, 4, 8, 16, 32, 64)
MAX_CANARIES = 1_000_000


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


def curve_ceilings(noise_multiplier: float, sample_rate: float, steps: int, m: int, delta: float,
                   claim: float) -> list[dict[str, float]]:
    """[{factor, epsilon, fdp_perfect_p_value}]: for σ' = factor·σ (same q, T), the curve's ε at δ
    (the claim itself at factor 1) and the f-DP test's perfect-attack p-value against it. At level
    a, the row's f-DP ceiling is the largest ε whose p-value is ≤ a (less noise: harder to refute)."""
    rows = []
    for factor in CEILING_NOISE_FACTORS:
        profile = dpsgd_privacy_profile(float(noise_multiplier) * factor, float(sample_rate), int(steps))
        p = fdp_perfect_p_value(profile, m)
        rows.append({"factor": factor, "epsilon": float(claim) if factor == 1.0 else _epsilon_at(profile, delta),
                     "fdp_perfect_p_value": p})
        if p >= 1.0:  # refutation only gets harder with less noise
            break
    return rows


def whitebox_one_run_entry(features: np.ndarray, labels: np.ndarray, n_classes: int, spec: TrainingSpec, *,
                           target: TrainedTarget, target_accuracy: float, test_features: np.ndarray,
                           test_labels: np.ndarray, accountant: str, seed: int, device, confidence: float,
                           n_canaries: int | None, secure_mode: bool = False) -> dict[str, Any]:
    """Train the twin of `target` with canaries and audit its claim (the target's accountant ε)."""
    canary_seed = int(np.random.SeedSequence([int(seed), _CANARY_STREAM]).generate_state(1)[0])
    twin = train_target(features, labels, n_classes, spec, epsilon=float(target.epsilon_target), delta=target.delta,
                        accountant=accountant, seed=seed, device=device, secure_mode=secure_mode,
                        canaries={"m": n_canaries, "seed": canary_seed})
    probes = twin.canaries
    accuracy = float((twin.logits(test_features).argmax(axis=1) == test_labels).mean())
    claim = float(target.accountant_epsilon)
    delta = float(target.delta)
    profile = dpsgd_privacy_profile(float(twin.noise_multiplier), float(twin.sample_rate), int(twin.steps))
    coins = probes.coins.copy()
    audit = one_run_claim_audit(probes.scores("all"), coins, claimed_epsilon=claim, delta=delta, profile=profile,
                                confidence=confidence)
    final = one_run_claim_audit(probes.scores("final"), coins, claimed_epsilon=claim, delta=delta, profile=profile,
                                confidence=confidence, with_estimates=False)
    alpha = 1.0 - float(confidence)
    ceilings = curve_ceilings(twin.noise_multiplier, twin.sample_rate, twin.steps, probes.m, delta, claim)
    by_m = {str(k * probes.m): fdp_perfect_p_value(profile, k * probes.m) for k in NEEDED_M_FACTORS
            if k * probes.m <= MAX_CANARIES}
    # Which sound tests the row's p-value combines (Bonferroni): those a perfect attack could pass
    # alone at α — Steinke et al. cannot reach a large claim at small δ (its 2mδ term), and spending
    # half of α on it would cost the f-DP test its power. Depends on m, δ, q, T, σ and the claim,
    # never on the scores: the family stays pre-declared.
    able = {"steinke": one_run_ceiling(probes.m, delta, alpha) > claim,
            "fdp": float(ceilings[0]["fdp_perfect_p_value"]) <= alpha}
    tests = [name for name, ok in able.items() if ok] or ["steinke", "fdp"]
    p_of = {"steinke": float(audit["steinke"]["p_value_claim"]), "fdp": float(audit["fdp"]["p_value_claim"])}
    p_value = float(min(1.0, len(tests) * min(p_of[name] for name in tests)))
    refutable_alone = any(able.values()) and (
        ("steinke" in tests and one_run_ceiling(probes.m, delta, alpha / len(tests)) > claim)
        or ("fdp" in tests and float(ceilings[0]["fdp_perfect_p_value"]) <= alpha / len(tests)))
    same = (math.isclose(twin.noise_multiplier, target.noise_multiplier, rel_tol=1e-9)
            and twin.steps == target.steps and math.isclose(twin.sample_rate, target.sample_rate))
    return {
        "family": ROW_FAMILY,
        "paper": "Steinke, Nasr, Jagielski 2023, arXiv 2305.08846; Mahloujifar, Melis, Chaudhuri 2024, arXiv 2410.22235",
        "claim": claim,
        "delta": delta,
        "m": probes.m,
        "kind": probes.kind,
        "n_in": int(coins.sum()),
        "canary_rows_inserted": int(probes.inserted),
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
        "final_model": {"status": final["status"], "steinke_epsilon": final["steinke"]["epsilon"],
                        "fdp_refuted": bool(final["fdp"]["refuted"]), "note": "same twin, final model only: shown"},
        "twin_matches_target": bool(same),
        "test_accuracy_with_canaries": accuracy,
        "test_accuracy_target": float(target_accuracy),
        "train_seconds_with_canaries": float(twin.train_seconds),
        "train_seconds_target": float(target.train_seconds),
    }
