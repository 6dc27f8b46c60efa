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
from collections.abc import Callable
from typing import Any

import numpy as np

from audit.statistics.one_run_power import one_run_row
from targets.training import TrainedTarget, TrainingSpec, train_target

__all__ = ["ROW_FAMILY", "whitebox_one_run_entry"]

ROW_FAMILY = "white-box one-run"
_CANARY_STREAM = 77


def whitebox_one_run_entry(
    features: np.ndarray,
    labels: np.ndarray,
    n_classes: int,
    spec: TrainingSpec,
    *,
    target: TrainedTarget,
    target_accuracy: float,
    test_features: np.ndarray,
    test_labels: np.ndarray,
    accountant: str,
    seed: int,
    device,
    confidence: float,
    n_canaries: int | None,
    secure_mode: bool = False,
    on_epoch: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Train the twin of `target` with canaries and audit its claim (the target's accountant ε); `on_epoch` as
    `train_target`'s (progress)."""
    canary_seed = int(np.random.SeedSequence([int(seed), _CANARY_STREAM]).generate_state(1)[0])
    twin = train_target(
        features,
        labels,
        n_classes,
        spec,
        epsilon=float(target.epsilon_target),
        delta=target.delta,
        accountant=accountant,
        seed=seed,
        device=device,
        secure_mode=secure_mode,
        canaries={"m": n_canaries, "seed": canary_seed},
        on_epoch=on_epoch,
    )
    probes = twin.canaries
    accuracy = float((twin.logits(test_features).argmax(axis=1) == test_labels).mean())
    row = one_run_row(
        probes.scores("all"),
        probes.scores("final"),
        probes.coins.copy(),
        claim=float(target.accountant_epsilon),
        delta=float(target.delta),
        noise_multiplier=float(twin.noise_multiplier),
        sample_rate=float(twin.sample_rate),
        steps=int(twin.steps),
        confidence=confidence,
    )
    same = (
        math.isclose(twin.noise_multiplier, target.noise_multiplier, rel_tol=1e-9)
        and twin.steps == target.steps
        and math.isclose(twin.sample_rate, target.sample_rate)
    )
    return {
        "family": ROW_FAMILY,
        "paper": "Steinke, Nasr, Jagielski 2023, arXiv 2305.08846; Mahloujifar, Melis, Chaudhuri 2024, arXiv 2410.22235",
        **row,
        "kind": probes.kind,
        "canary_rows_inserted": int(probes.inserted),
        "twin_matches_target": bool(same),
        "test_accuracy_with_canaries": accuracy,
        "test_accuracy_target": float(target_accuracy),
        "train_seconds_with_canaries": float(twin.train_seconds),
        "train_seconds_target": float(target.train_seconds),
    }
