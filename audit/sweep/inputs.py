"""The sweep's inputs, checked before anything is trained: data, splits, the pool the attacks need,
--out, the tracking URI, a run to resume, and (the dry run only) Opacus's noise calibration.

Apart from `audit.sweep.runner` so that `run --dry-run` and `run --resume DIR` load only what
the checks need (pandas, and PyTorch for Opacus), not the attacks, the figures and the tracker the
run itself imports (~2 s of CPU in a fresh process)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attacks.reference_models import check_pool_capacity
from audit.errors import AuditInputError
from audit.machinery.attack_setup import attack_options
from audit.machinery.config import AuditConfig, read_config_file
from audit.machinery.run_directory import StagedRunDirectory, check_output_folder
from audit.machinery.tracking import check_tracking_uri
from targets.datasets import TabularData
from targets.devices import resolve_device
from targets.splits import AuditSplits


def _validate_training_set(data: TabularData, splits: AuditSplits, delta: float) -> list[str]:
    train_labels = data.labels[splits.train_idx]
    if np.unique(train_labels).size < 2:
        raise AuditInputError(
            "data", "the members drawn for training hold a single class; use more or more balanced data"
        )
    warnings_out = []
    n_train = len(splits.train_idx)
    if delta >= 1.0 / n_train:
        warnings_out.append(
            f"δ = {delta:g} ≥ 1/n = {1 / n_train:.2g} (n = {n_train} training rows): such a δ permits "
            "releasing a whole record; choose δ well below 1/n"
        )
    return warnings_out


def resolve_resume(config: AuditConfig, out_dir: str | Path, resume: str | Path) -> StagedRunDirectory:
    run_dir = StagedRunDirectory.resume(out_dir, resume, config.name)
    stored_hash = _stored(run_dir).config_hash()
    if stored_hash != config.config_hash():
        raise AuditInputError(
            f"--resume '{resume}'",
            f"that run was started with another config (hash {stored_hash}, now {config.config_hash()}); "
            "resume with the same config, or give only --resume DIR to use the stored one",
        )
    return run_dir


def stored_config(out_dir: str | Path, resume: str | Path, name: str = "default") -> AuditConfig:
    """The resolved config saved in an interrupted run's folder (for `run --resume DIR` alone)."""
    run_dir = StagedRunDirectory.resume(out_dir, resume, name)
    return _stored(run_dir)


def _stored(run_dir: StagedRunDirectory) -> AuditConfig:
    from pydantic import ValidationError

    path = run_dir.staging / "config.yaml"
    try:
        return AuditConfig.model_validate(read_config_file(path))
    except ValidationError as exc:  # edited or written by another version
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"])[:80]
        raise AuditInputError(f"--resume: config file '{path}': field '{field}'", first["msg"][:200]) from None


def prepare_inputs(config: AuditConfig):
    """Data, splits and warnings: everything validated before a folder or an MLflow run exists (the
    attack names were checked with the config; the pool they need is checked here)."""
    data = config.load_data()
    splits = config.audit_splits(data.n_rows)
    run_warnings = _validate_training_set(data, splits, config.privacy.delta)
    check_pool_capacity(config.attacks.names, attack_options(config), len(splits.pool_idx), len(splits.train_idx))
    return data, splits, run_warnings


def check_run_inputs(
    config: AuditConfig,
    *,
    out_dir: str | Path = "runs",
    tracking_uri: str | None = None,
    resume: str | Path | None = None,
) -> list[str]:
    """`run --dry-run`: validate everything `run_audit` would, create and write nothing; the warnings."""
    resolve_device(config.device)
    _, splits, run_warnings = prepare_inputs(config)
    check_output_folder(out_dir)
    check_tracking_uri(tracking_uri)
    if resume is not None:
        resolve_resume(config, out_dir, resume)
    _check_noise_calibration(config, len(splits.train_idx))
    return run_warnings


def _check_noise_calibration(config: AuditConfig, n_train: int) -> None:
    """Can Opacus calibrate σ for every finite target ε? (What `make_private_with_epsilon` will do:
    q = 1 / batches per epoch, T = epochs × batches.) Only the dry run pays for this check; a real
    run finds out when it trains the target (exit 2, its folder discarded)."""
    import math
    import warnings

    from opacus.accountants.utils import get_noise_multiplier

    batches = max(1, math.ceil(n_train / config.training.batch_size))
    for epsilon in config.privacy.epsilons:
        if math.isinf(epsilon):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                get_noise_multiplier(
                    target_epsilon=epsilon,
                    target_delta=config.privacy.delta,
                    sample_rate=1 / batches,
                    steps=config.training.epochs * batches,
                    accountant=config.privacy.accountant,
                )
        except ValueError as exc:
            raise AuditInputError(
                "privacy.epsilons",
                f"Opacus cannot calibrate noise for ε={epsilon:g}, "
                f"δ={config.privacy.delta:g} with this data size and schedule ({str(exc)[:120]})",
            ) from None
