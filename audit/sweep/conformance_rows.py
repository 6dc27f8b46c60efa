"""The main job's conformance checks: each DP target's own Opacus setup does what its accountant assumes.

Two parts per DP target (`conformance_entry`):

* **its training, as it ran**: the PrivacyEngine accountant's history after the target's training
  must hold exactly the steps the training took, at the optimizer's σ and the loader's q
  (deterministic: fails only on a mismatch);
* **its setup, stepped**: the same setup built again with the same seed (`targets.training.private_setup`:
  model, DPOptimizer, DPDataLoader, PrivacyEngine, exactly as `train_target` builds them, untrained)
  and run through the checks of `audit.conformance.opacus_objects` — noise std at every step,
  per-example clipping, Poisson sampling rate and dispersion, independent inclusion, noise
  independence (a second setup under another seed), steps and σ in the accountant.

In the verdict the deterministic checks are rules; the statistical checks of all targets are
Bonferroni-combined into ONE p-value that joins the Holm family (one test for the whole run, so the
other rows keep their power).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from audit.conformance.opacus_objects import STATISTICAL, check, object_checks
from targets.devices import resolve_device
from targets.training import TrainedTarget, TrainingSpec, private_setup

__all__ = ["conformance_entry", "conformance_probes_task", "conformance_record"]

# The level each target's checks report `passed` at (the verdict decides from the p-values).
DISPLAY_ALPHA = 0.05


def trained_accountant_checks(target: TrainedTarget) -> list[dict[str, Any]]:
    """The target's accountant history vs the training it recorded: steps, σ, q (deterministic)."""
    history = [tuple(float(v) for v in h) for h in target.accountant_history or ()]
    told = int(sum(h[2] for h in history))
    sigmas = sorted({round(h[0], 12) for h in history})
    rates = sorted({round(h[1], 12) for h in history})
    return [
        check(
            "trained_steps",
            told == int(target.steps),
            told,
            int(target.steps),
            "steps in the accountant's history after the target's training vs the optimizer steps it took",
        ),
        check(
            "trained_sigma_q",
            sigmas == [round(float(target.noise_multiplier or 0.0), 12)]
            and rates == [round(float(target.sample_rate), 12)],
            {"sigma": sigmas, "q": rates},
            {"sigma": float(target.noise_multiplier or 0.0), "q": float(target.sample_rate)},
            "σ and q the accountant was told during the training vs the optimizer's σ and the loader's q",
        ),
    ]


# Pieces of the conformance record, for progress: the setup, then object_checks' four probes of the optimizer and
# loader (zero gradients, one huge gradient, the batch sampler, a second setup's noise).
CONFORMANCE_PHASES = 5


def conformance_entry(
    features: np.ndarray,
    labels: np.ndarray,
    n_classes: int,
    spec: TrainingSpec,
    *,
    target: TrainedTarget,
    accountant: str,
    seed: int,
    device,
    secure_mode: bool = False,
    on_phase: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """The conformance record of one DP target (see the module docstring), its probes run here; `on_phase(done,
    CONFORMANCE_PHASES)` after each piece (progress)."""
    probes = conformance_probes_task(
        features,
        labels,
        n_classes,
        spec,
        epsilon=float(target.epsilon_target or 0.0),  # the record is made for DP targets only
        delta=float(target.delta),
        accountant=accountant,
        seed=seed,
        device=str(device),
        secure_mode=secure_mode,
        on_phase=on_phase,
    )
    return conformance_record(probes, target)


def conformance_probes_task(
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
    secure_mode: bool = False,
    on_phase: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """The stepped part: the target's setup (ε, index seed `seed`) built again, untrained, and probed. Plain data,
    an executor task (`on_phase(done, CONFORMANCE_PHASES)`: progress; in a worker it reports through the
    worker's channel). The setup's σ calibration is cached (targets.opacus_setups), so the second setup and a
    target trained in the same process pay for it once."""
    if on_phase is None:
        from audit.machinery.workers import report_task_progress

        on_phase = report_task_progress  # a no-op outside a worker
    started = time.perf_counter()
    done = [0]

    def finished_one() -> None:
        done[0] += 1
        on_phase(min(done[0], CONFORMANCE_PHASES), CONFORMANCE_PHASES)

    @contextlib.contextmanager
    def phase(_what: str):
        yield
        finished_one()

    kwargs: dict[str, Any] = dict(
        epsilon=float(epsilon),
        delta=float(delta),
        accountant=accountant,
        device=resolve_device(device),
        secure_mode=secure_mode,
    )
    _, optimizer, loader, engine = private_setup(features, labels, n_classes, spec, seed=seed, **kwargs)
    finished_one()
    stepped = object_checks(
        optimizer,
        loader,
        engine,
        spec.epochs,
        seed=seed,
        alpha=DISPLAY_ALPHA,
        second_optimizer=lambda: private_setup(features, labels, n_classes, spec, seed=seed + 1, **kwargs)[1],
        guard=phase,
        field="training",
    )
    return {"checks": stepped, "seconds": time.perf_counter() - started}


def conformance_record(probes: dict[str, Any], target: TrainedTarget) -> dict[str, Any]:
    """The record from the probes (`conformance_probes_task`) and the target's own training (its accountant history)."""
    checks = trained_accountant_checks(target) + list(probes["checks"])
    a = DISPLAY_ALPHA / STATISTICAL
    statistical = [c for c in checks if c.get("p_value") is not None]
    # A statistical check failing while its p-value is above its level failed on something exact
    # (a repeated index in a batch): a rule, like the steps and σ checks.
    rules = [c for c in checks if c.get("p_value") is None or (not c["passed"] and c["p_value"] > a)]
    return {
        "checks": checks,
        "statistical_p_values": {c["check"]: float(c["p_value"]) for c in statistical},
        "rules_failed": [c["check"] for c in rules if not c["passed"]],
        "display_alpha": DISPLAY_ALPHA,
        "seconds": probes["seconds"],
        "setup": "the target's own Opacus setup, built again with its seed (untrained), and the accountant "
        "history of its training",
    }
