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
from targets.devices import resolve_device
from targets.training import TrainedTarget, TrainingSpec, train_target

__all__ = ["ROW_FAMILY", "twin_row_entry", "twin_task", "whitebox_one_run_entry"]

ROW_FAMILY = "white-box one-run"
_CANARY_STREAM = 77


def twin_task(
    features: np.ndarray,
    labels: np.ndarray,
    n_classes: int,
    spec: TrainingSpec,
    *,
    epsilon: float,
    delta: float,
    accountant: str,
    seed: int,
    device: str,
    confidence: float,
    n_canaries: int | None,
    test_features: np.ndarray,
    test_labels: np.ndarray,
    secure_mode: bool = False,
    on_epoch: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Train the twin of the target at `epsilon` (index seed `seed`) with canaries and score them: plain data, an
    executor task (`on_epoch(done, epochs + 1)`: progress in epochs, then one unit more when the canaries are
    scored and tested; in a worker it reports through the worker's channel).

    The row is computed against the twin's own accountant ε, which is the target's whenever the twin took the
    target's σ, q and T (`whitebox_one_run_entry` recomputes it against the target's where they differ)."""
    if on_epoch is None:
        from audit.machinery.workers import report_task_progress

        on_epoch = report_task_progress  # a no-op outside a worker
    canary_seed = int(np.random.SeedSequence([int(seed), _CANARY_STREAM]).generate_state(1)[0])
    twin = train_target(
        features,
        labels,
        n_classes,
        spec,
        epsilon=float(epsilon),
        delta=delta,
        accountant=accountant,
        seed=seed,
        device=resolve_device(device),
        secure_mode=secure_mode,
        canaries={"m": n_canaries, "seed": canary_seed},
        on_epoch=on_epoch,
    )
    probes: Any = twin.canaries  # targets.canaries.GradientCanaries: a twin is trained with canaries
    scores_all, scores_final, coins = probes.scores("all"), probes.scores("final"), probes.coins.copy()
    twin_data: dict[str, Any] = {
        "claim": _private(twin.accountant_epsilon),
        "scores_all": np.asarray(scores_all),
        "scores_final": np.asarray(scores_final),
        "coins": np.asarray(coins),
        "kind": probes.kind,
        "inserted": int(probes.inserted),
        "noise_multiplier": _private(twin.noise_multiplier),
        "sample_rate": float(twin.sample_rate),
        "steps": int(twin.steps),
        "delta": float(twin.delta),
        "test_accuracy": float((twin.logits(test_features).argmax(axis=1) == test_labels).mean()),
        "train_seconds": float(twin.train_seconds),
    }
    twin_data["row"] = _row(twin_data, twin_data["claim"], confidence)
    on_epoch(spec.epochs + 1, spec.epochs + 1)  # the last unit: the canaries scored and tested (seconds on a CPU)
    return twin_data


def _private(value: float | None) -> float:
    """A DP target's or twin's ε or σ (set for every private training; the rows exist only for those)."""
    if value is None:
        raise ValueError("a white-box one-run row needs a DP-trained target and twin")
    return float(value)


def _row(twin: dict[str, Any], claim: float, confidence: float) -> dict[str, Any]:
    return one_run_row(
        twin["scores_all"],
        twin["scores_final"],
        twin["coins"],
        claim=float(claim),
        delta=twin["delta"],
        noise_multiplier=twin["noise_multiplier"],
        sample_rate=twin["sample_rate"],
        steps=twin["steps"],
        confidence=confidence,
    )


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
    """Train the twin of `target` with canaries (here) and audit its claim (the target's accountant ε); `on_epoch`
    as `train_target`'s (progress)."""
    twin = twin_task(
        features,
        labels,
        n_classes,
        spec,
        epsilon=_private(target.epsilon_target),
        delta=target.delta,
        accountant=accountant,
        seed=seed,
        device=str(device),
        confidence=confidence,
        n_canaries=n_canaries,
        test_features=test_features,
        test_labels=test_labels,
        secure_mode=secure_mode,
        on_epoch=on_epoch,
    )
    return twin_row_entry(twin, target=target, target_accuracy=target_accuracy, confidence=confidence)


def twin_row_entry(
    twin: dict[str, Any], *, target: TrainedTarget, target_accuracy: float, confidence: float
) -> dict[str, Any]:
    """The row of `target` from its twin (`twin_task`'s result): the claim tested is the target's accountant ε."""
    claim = _private(target.accountant_epsilon)
    row = twin["row"]
    if claim != twin["claim"]:  # the twin's accountant said otherwise: test the target's own claim
        row = _row(twin, claim, confidence)
    same = (
        math.isclose(twin["noise_multiplier"], _private(target.noise_multiplier), rel_tol=1e-9)
        and twin["steps"] == target.steps
        and math.isclose(twin["sample_rate"], target.sample_rate)
    )
    return {
        "family": ROW_FAMILY,
        "paper": "Steinke, Nasr, Jagielski 2023, arXiv 2305.08846; Mahloujifar, Melis, Chaudhuri 2024, arXiv 2410.22235",
        **row,
        "kind": twin["kind"],
        "canary_rows_inserted": twin["inserted"],
        "twin_matches_target": bool(same),
        "test_accuracy_with_canaries": twin["test_accuracy"],
        "test_accuracy_target": float(target_accuracy),
        "train_seconds_with_canaries": twin["train_seconds"],
        "train_seconds_target": float(target.train_seconds),
    }
