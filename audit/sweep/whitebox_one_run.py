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
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from audit.statistics.one_run_audit import fdp_perfect_attack_refutes, one_run_claim_audit
from audit.statistics.epsilon_bounds import one_run_ceiling
from audit.statistics.tradeoff_curves import dpsgd_privacy_profile
from targets.training import TrainedTarget, TrainingSpec, train_target

__all__ = ["ROW_FAMILY", "whitebox_one_run_entry"]

ROW_FAMILY = "white-box one-run"
_CANARY_STREAM = 77


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
    # Could this row reject its claim even alone (a perfect attack at level α, either test)? Depends
    # on m, δ and the claim only, never on the scores: the family stays pre-declared.
    refutable_alone = (one_run_ceiling(probes.m, delta, alpha / 2) > claim
                       or fdp_perfect_attack_refutes(profile, probes.m, alpha / 2))
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
        "p_value": audit["p_value"],
        "refutable_alone": bool(refutable_alone),
        "ceiling": audit["ceiling"],
        "steinke_epsilon": audit["steinke"]["epsilon"],
        "fdp_refuted": bool(audit["fdp"]["refuted"]),
        "fdp_gdp_family_epsilon": audit["fdp"]["gdp_family_epsilon"],
        "gaussian_sum_epsilon": audit["gaussian_sum"]["epsilon"],
        "andrew_epsilon": audit["andrew"]["epsilon"],
        "canaries_needed": audit.get("canaries_needed"),
        "final_model": {"status": final["status"], "steinke_epsilon": final["steinke"]["epsilon"],
                        "fdp_refuted": bool(final["fdp"]["refuted"]), "note": "same twin, final model only: shown"},
        "twin_matches_target": bool(same),
        "test_accuracy_with_canaries": accuracy,
        "test_accuracy_target": float(target_accuracy),
        "train_seconds_with_canaries": float(twin.train_seconds),
        "train_seconds_target": float(target.train_seconds),
    }
