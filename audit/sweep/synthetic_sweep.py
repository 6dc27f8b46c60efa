"""The synthetic-data part of `run`: train each configured generator, check its release.

Generators are trained on the target's training rows (the candidates whose coin came up heads) and
checked against the other candidates as holdout, so membership is an independent fair coin flip
and the one-run bound applies. dp_vae runs once per ε of the sweep; the non-private generators
once. Each entry is what `synthetic_privacy_checks` returns plus the generator and its ε.
"""
from __future__ import annotations

import math
from typing import Any

import pandas as pd

from audit.machinery.config import AuditConfig
from audit.machinery.progress import Progress
from audit.statistics.synthetic_evaluation import synthetic_privacy_checks
from targets.splits import AuditSplits
from targets.synthesizers import DPVAESynthesizer, GaussianCopulaSynthesizer, NoisyCopySynthesizer


def _generators(config: AuditConfig):
    synthetic = config.synthetic
    epsilons = synthetic.epsilons or [e for e in config.privacy.epsilons if math.isfinite(e)]
    for name in synthetic.generators:
        if name == "noisy_copy":
            yield name, None, NoisyCopySynthesizer(noise_scale=0.01)
        elif name == "gaussian_copula":
            yield name, None, GaussianCopulaSynthesizer(seed=config.seed)
        else:
            for epsilon in epsilons:
                yield name, epsilon, DPVAESynthesizer(
                    epsilon, delta=config.privacy.delta, epochs=synthetic.dp_vae_epochs,
                    accountant=config.privacy.accountant, seed=config.seed,
                )


def synthetic_sweep(config: AuditConfig, frame: pd.DataFrame, splits: AuditSplits, progress: Progress) -> list[dict[str, Any]]:
    """One checked release per (generator, ε), each a progress step."""
    candidates = frame.iloc[splits.candidate_idx].reset_index(drop=True)
    train = candidates[splits.candidate_member].reset_index(drop=True)
    holdout = candidates[~splits.candidate_member].reset_index(drop=True)
    entries = []
    for name, epsilon, generator in _generators(config):
        what = f"synthetic {name}" + (f" at ε = {epsilon:g}" if epsilon is not None else "")
        with progress.step(f"{what}: training the generator"):
            release = generator.fit(train).sample(len(train), seed=config.seed)
        with progress.step(f"{what}: privacy checks and risks"):
            checks = synthetic_privacy_checks(
                train, holdout, release, seed=config.seed, delta=config.privacy.delta,
                confidence=config.attacks.confidence, membership_randomized=True, subsample_train=True,
                accountant_epsilon=getattr(generator, "accountant_epsilon", None) or epsilon,
            )
        entries.append({"generator": name, "epsilon_target": epsilon,
                        "noise_multiplier": getattr(generator, "noise_multiplier", None), **checks})
    return entries
