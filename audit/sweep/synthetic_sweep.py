"""The synthetic-data part of `run`: train each configured generator, check its release.

Generators are trained on the target's training rows (the candidates whose coin came up heads) and
checked against the other candidates as holdout, so membership is an independent fair coin flip
and the one-run bound applies. dp_vae runs once per ε of the sweep; the non-private generators
once. Each entry is what `synthetic_privacy_checks` returns plus the generator and its ε.

Each (generator, ε) is one executor task (`checked_release`), seeded from the config alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd

from audit.errors import AuditInputError
from audit.machinery.config import AuditConfig, SyntheticConfig
from audit.machinery.progress import Progress
from audit.statistics.synthetic_evaluation import synthetic_privacy_checks
from targets.splits import AuditSplits
from targets.synthesizers import DPVAESynthesizer, GaussianCopulaSynthesizer, NoisyCopySynthesizer


def synthetic_section(config: AuditConfig) -> SyntheticConfig:
    """The config's `synthetic:` section; the sweep runs generators only for a config with one."""
    if config.synthetic is None:
        raise AuditInputError("config", "has no 'synthetic' section")
    return config.synthetic


def generator_runs(config: AuditConfig) -> list[tuple[str, float | None]]:
    """(generator, ε) of every release the sweep checks, in report order (ε None = non-private)."""
    synthetic = synthetic_section(config)
    epsilons = synthetic.epsilons or [e for e in config.privacy.epsilons if math.isfinite(e)]
    runs: list[tuple[str, float | None]] = []
    for name in synthetic.generators:
        runs += [(name, epsilon) for epsilon in epsilons] if name == "dp_vae" else [(name, None)]
    return runs


def _generator(config: AuditConfig, name: str, epsilon: float | None):
    if name == "noisy_copy":
        return NoisyCopySynthesizer(noise_scale=0.01)
    if name == "gaussian_copula":
        return GaussianCopulaSynthesizer(seed=config.seed)
    if epsilon is None:  # generator_runs gives the DP generator an ε, always
        raise ValueError("dp_vae needs a finite ε")
    return DPVAESynthesizer(
        epsilon,
        delta=config.privacy.delta,
        epochs=synthetic_section(config).dp_vae_epochs,
        accountant=config.privacy.accountant,
        seed=config.seed,
    )


def checked_release(
    name: str, epsilon: float | None, *, config: AuditConfig, train: pd.DataFrame, holdout: pd.DataFrame
) -> dict[str, Any]:
    """A task: train generator `name` (at `epsilon`), sample a release, check it; plain data back."""
    generator = _generator(config, name, epsilon)
    release = generator.fit(train).sample(len(train), seed=config.seed)
    checks = synthetic_privacy_checks(
        train,
        holdout,
        release,
        seed=config.seed,
        delta=config.privacy.delta,
        confidence=config.attacks.confidence,
        membership_randomized=True,
        subsample_train=True,
        accountant_epsilon=getattr(generator, "accountant_epsilon", None) or epsilon,
    )
    return {
        "generator": name,
        "epsilon_target": epsilon,
        "noise_multiplier": getattr(generator, "noise_multiplier", None),
        **checks,
    }


def synthetic_sweep(
    config: AuditConfig,
    frame: pd.DataFrame,
    splits: AuditSplits,
    progress: Progress,
    executor=None,
    finished: dict[int, dict[str, Any]] | None = None,
    on_entry: Callable[[int, dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """One checked release per (generator, ε), each a progress step.

    `executor` (default: here, one after another) runs the releases; `finished` holds entries of an
    interrupted attempt by index (not recomputed); `on_entry(index, entry)` sees each new one.
    """
    candidates = frame.iloc[splits.candidate_idx].reset_index(drop=True)
    train = candidates[splits.candidate_member].reset_index(drop=True)
    holdout = candidates[~splits.candidate_member].reset_index(drop=True)
    runs = generator_runs(config)
    finished = dict(finished or {})
    todo = [i for i in range(len(runs)) if i not in finished]
    shared = dict(config=config, train=train, holdout=holdout)

    def label(i: int) -> str:
        name, epsilon = runs[i]
        return f"synthetic: {name}" + (f" at ε = {epsilon:g}" if epsilon is not None else "")

    def keep(position: int, entry: dict[str, Any]) -> None:
        finished[todo[position]] = entry
        if on_entry is not None:
            on_entry(todo[position], entry)

    if executor is None:
        for position, i in enumerate(todo):
            with progress.step(f"{label(i)}: generator, release, privacy checks and risks"):
                keep(position, checked_release(*runs[i], **shared))
    else:
        with progress.step(
            f"synthetic: {len(todo)} release(s) on the {getattr(executor, 'name', 'given')} executor", total=len(todo)
        ) as step:

            def on_result(position: int, entry: dict[str, Any]) -> None:
                keep(position, entry)
                step.advance()

            executor.map(checked_release, [runs[i] for i in todo], shared, on_result=on_result)
    return [finished[i] for i in range(len(runs))]
