"""Audit the user's own trained model, whatever it is: membership inference on their member/non-member files.

Inputs
------
* the model (`targets.model_sources`, one interface for every kind; the attacks never see which):
  a PyTorch `nn.Module` built by the user's `module:factory` with a state_dict (`torch.load(...,
  weights_only=True)`) or safetensors file — or, without a factory, the harness's own `MLP`
  (`training.hidden_sizes`); a scikit-learn estimator saved with skops (trusted types only); an
  ONNX file (onnxruntime); a black-box `module:function` returning logits, probabilities or, for
  a label-only model, classes; from Python, a live `nn.Module`, fitted estimator or callable.
  Factories and functions run in an isolated worker process (audit/machinery/workers.py);
* the config (`privacy.epsilons` holds exactly ONE value, the model's claimed ε, `inf` =
  non-private; `training` says how a torch model was trained; `model:` may name everything here);
* the members file (the model's whole training set), the non-members file (records from the same
  distribution the model never saw) and optionally a population file (more such records, for the
  reference/shadow models of `lira`, `lira_offline`, `rmia`, `shadow`): CSV or Parquet with the
  same columns in every file (the label column and the features exactly as the model consumes
  them), or `.npz` with arrays `features` (n, ...) of any shape (images n×C×H×W) and `labels`.
  NO transformation is applied: the numbers in the files are fed to the model as they are.
  Labels are the model's output class indices 0..K-1;
* how reference/shadow models are trained: the user's `train(features, labels, seed) -> model`
  (`--trainer`, the `canary-audit` contract), in parallel worker processes; without it, for a torch
  model (the factory's architecture or the harness's MLP), the vectorized DP-SGD trainer. Without
  either, those attacks are skipped (or refused when named).

Membership here is given by the files, not drawn by a fair coin per record, so the one-run bound
of Steinke et al. (2023) is not claimed (reported as None); the Clopper-Pearson bound (threshold
chosen on one random half of the candidates, bound computed on the other) is what may decide a
violation: decided by audit.machinery.verdict from bounds proven for the setting only.

The result is a results dict (schema_version 2) with one target, the shape of
`audit.model_audits.score_audit.audit_scores`'s, so `write_outputs`, the report and the policy gate apply.
"""
from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from pydantic import ValidationError

from attacks import AttackContext, AttackOptions, TargetTraining, attacks_needing, get_attack, knobs_of
from attacks.registry import IN_OUT_REFERENCES, LABELS_ONLY, POPULATION, TRAINS_MODELS
from audit.statistics.accountants import DPSGDEvent, epsilons_for_event
from audit.statistics.attack_evaluation import best_sound_lower_bound, evaluate_attack
from audit.machinery.config import AuditConfig, ModelSourceConfig
from audit.machinery.environment import describe_environment
from audit.machinery.verdict import verdict_for_results
from audit.statistics.distribution_shift import blind_baseline
from audit.errors import AuditInputError
from targets.table_checks import MAX_CLASSES
from audit.machinery.attack_setup import attack_options
from audit.machinery.user_code import check_spec
from audit.machinery.executors import check_executor_options, make_user_code_executor
from audit.machinery.workers import WorkerPool
from audit.model_audits.user_models import (
    isolated_factory_model, isolated_function_model, isolated_onnx_model, isolated_skops_model, user_trainer,
    vectorized_factory_trainer,
)
from targets.datasets import read_table
from targets.devices import resolve_device
from targets.model_sources import (
    ModelQuery, live_query, load_state_dict_file, tensor_shape,
)
from targets.models import MLP
from targets.training import TrainingSpec, predict_logits
from targets.vectorized_dpsgd import DPSGDSpec

SCHEMA_VERSION = 3
PLD_PRV_TOLERANCE = 0.05


# --------------------------------------------------------------------------------------------
# data files


@dataclass(frozen=True)
class _Table:
    path: Path
    role: str
    features: np.ndarray  # (n, ...) float32, as given: (n, d) from tables, any shape from .npz
    labels: np.ndarray  # (n,) int64 class indices
    frame: pd.DataFrame | None  # tables: the feature columns + label, in the members file's column order
    hashes: np.ndarray  # (n,) one hash per row (features and label): duplicates between files


def _array_hashes(features: np.ndarray, labels: np.ndarray) -> np.ndarray:
    rows = np.ascontiguousarray(features.reshape(len(features), -1))
    return np.array([hash((row.tobytes(), int(label))) for row, label in zip(rows, labels)], dtype=np.int64)


def _from_arrays(features, labels, path: Path, role: str, shape: tuple | None) -> _Table:
    where = _where(role, path)
    features = np.asarray(features)
    labels = np.asarray(labels)
    if features.ndim < 2 or len(features) == 0:
        raise AuditInputError(f"{where}: features", f"must be an array (n, ...) with n ≥ 1 rows, got shape {features.shape}")
    if not np.issubdtype(features.dtype, np.number) or np.issubdtype(features.dtype, np.complexfloating):
        raise AuditInputError(f"{where}: features", f"must hold real numbers, got dtype {features.dtype}")
    if not np.all(np.isfinite(features)):
        raise AuditInputError(f"{where}: features", "contains NaN or infinite values")
    if labels.shape != (len(features),):
        raise AuditInputError(f"{where}: labels", f"must have shape ({len(features)},), one per row; got {labels.shape}")
    if shape is not None and tuple(features.shape[1:]) != shape:
        raise AuditInputError(f"{where}: features", f"rows have shape {tuple(features.shape[1:])}, the members' have {shape}")
    labels = _class_indices(pd.Series(labels), f"{where}: labels")
    features = np.ascontiguousarray(features, dtype=np.float32)
    return _Table(path=path, role=role, features=features, labels=labels, frame=None,
                  hashes=_array_hashes(features, labels))


def _read_npz(path: Path, role: str, shape: tuple | None) -> _Table:
    """A `.npz` with arrays `features` (n, ...) — any shape, e.g. images n×C×H×W — and `labels` (n,)."""
    where = _where(role, path)
    if not path.is_file():
        raise AuditInputError(where, "does not exist or is not a file")
    try:
        with np.load(path, allow_pickle=False) as archive:  # object arrays would need unpickling: refused
            missing = [k for k in ("features", "labels") if k not in archive.files]
            if missing:
                raise AuditInputError(where, f"has no array '{missing[0]}' (arrays: {', '.join(archive.files) or 'none'}); "
                                      "expected 'features' (n, ...) and 'labels' (n,)")
            features, labels = archive["features"], archive["labels"]
    except AuditInputError:
        raise
    except ValueError as exc:
        raise AuditInputError(where, f"could not be read without unpickling ({exc})") from None
    except Exception as exc:  # zipfile.BadZipFile, OSError, ...
        raise AuditInputError(where, f"could not be read as .npz ({type(exc).__name__})") from None
    return _from_arrays(features, labels, path, role, shape)


def _read_data(source, role: str, label: str | None, reference: _Table | None) -> _Table:
    """A data file (CSV / Parquet with `label`, or .npz) or, from the Python API, a (features, labels) pair."""
    shape = tuple(reference.features.shape[1:]) if reference is not None else None
    if isinstance(source, tuple):
        return _from_arrays(source[0], source[1], Path(f"<{role} arrays>"), role, shape)
    path = Path(source)
    if path.suffix.lower() == ".npz":
        if reference is not None and reference.frame is not None:
            raise AuditInputError(_where(role, path), "is .npz while the members file is a table: use one format")
        return _read_npz(path, role, shape)
    if reference is not None and reference.frame is None:
        raise AuditInputError(_where(role, path), "is a table while the members file is .npz: use one format")
    if not label:
        raise AuditInputError("--label", f"the {role} '{path}' is a table: name its label column")
    columns = list(reference.frame.columns) if reference is not None else None
    return _read_table(path, role, label, columns)


def _where(role: str, path: Path) -> str:
    return f"{role} '{path}'"


def _read_table(path: Path, role: str, label: str, columns: list[str] | None) -> _Table:
    frame = read_table(path, role=role)
    where = _where(role, path)
    frame.columns = [str(c) for c in frame.columns]
    if len(set(frame.columns)) != len(frame.columns):
        duplicate = next(c for c in frame.columns if list(frame.columns).count(c) > 1)
        raise AuditInputError(f"{where}: column '{duplicate}'", "appears more than once")
    if label not in frame.columns:
        shown = ", ".join(frame.columns[:10])
        raise AuditInputError(where, f"has no label column '{label}' (columns: {shown})")
    if columns is not None:  # every file must hold the members file's columns, no more, no fewer
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise AuditInputError(
                f"{where}: column '{missing[0]}'",
                f"is missing: every file must hold the members file's columns ({len(missing)} missing)",
            )
        extra = [c for c in frame.columns if c not in columns]
        if extra:
            raise AuditInputError(
                f"{where}: column '{extra[0]}'",
                "is not in the members file: every file must hold the same columns (no transformation is applied, "
                "so the model sees exactly these columns)",
            )
        frame = frame[columns]
    feature_columns = [c for c in frame.columns if c != label]
    if not feature_columns:
        raise AuditInputError(where, f"has no feature columns besides the label '{label}'")
    for column in feature_columns:
        values = frame[column]
        if values.isna().any():
            rows = np.flatnonzero(values.isna().to_numpy())
            raise AuditInputError(
                f"{where}: column '{column}'",
                f"contains missing values (NaN) in {rows.size} row(s), first at row {int(rows[0]) + 2}; "
                "no imputation is applied: give the values the model was trained on",
            )
        if not pd.api.types.is_numeric_dtype(values):
            raise AuditInputError(
                f"{where}: column '{column}'",
                f"must be numeric, already preprocessed as the model expects (no encoding is applied), "
                f"got values such as {values.iloc[0]!r}",
            )
        numeric = values.to_numpy(dtype=np.float64)
        if not np.isfinite(numeric).all():
            raise AuditInputError(f"{where}: column '{column}'", "contains infinite values")
        # Checked in the dtype the model is queried in: 1e39 is finite in float64 and inf in float32.
        too_big = np.abs(numeric) > float(np.finfo(np.float32).max)
        if too_big.any():
            row = int(np.flatnonzero(too_big)[0])
            raise AuditInputError(f"{where}: column '{column}'", f"row {row + 2} holds {numeric[row]:g}, beyond float32 "
                                  f"(|x| ≤ {float(np.finfo(np.float32).max):.3g}), the type the model is queried in")
    labels = _class_indices(frame[label], f"{where}: label column '{label}'")
    features = frame[feature_columns].to_numpy(dtype=np.float32)
    return _Table(path=path, role=role, features=features, labels=labels, frame=frame, hashes=_row_hashes(frame))


def _class_indices(values: pd.Series, where: str) -> np.ndarray:
    """Labels as the model's output class indices: integers ≥ 0, used as they are (no re-encoding)."""
    if values.isna().any():
        raise AuditInputError(where, f"has {int(values.isna().sum())} missing label(s)")
    if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values):
        raise AuditInputError(where, f"must hold integer class indices of the model's output, got values such as {values.iloc[0]!r}")
    numeric = values.to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(numeric)) or not np.all(numeric == np.round(numeric)):
        raise AuditInputError(where, "must hold integer class indices (found fractional or infinite values)")
    if numeric.min() < 0:
        raise AuditInputError(where, f"must hold class indices 0..K-1 of the model's output, found {numeric.min():g}")
    if numeric.max() >= MAX_CLASSES:  # checked before a K-class head is allocated
        raise AuditInputError(where, f"must hold class indices below {MAX_CLASSES}, found {numeric.max():g}")
    return numeric.astype(np.int64)


def _row_hashes(frame: pd.DataFrame) -> np.ndarray:
    return pd.util.hash_pandas_object(frame, index=False).to_numpy()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --------------------------------------------------------------------------------------------
# weights


def _guess_hidden_sizes(state: Mapping[str, torch.Tensor]) -> list[int] | None:
    """Hidden sizes of an `MLP`-shaped state dict (keys 0.weight, 2.weight, ...), None if not one."""
    layers = sorted(
        (int(m.group(1)), v) for k, v in state.items() if (m := re.fullmatch(r"(\d+)\.weight", k)) and v.dim() == 2
    )
    if not layers or [i for i, _ in layers] != list(range(0, 2 * len(layers), 2)):
        return None
    for (_, a), (_, b) in zip(layers, layers[1:]):
        if b.shape[1] != a.shape[0]:
            return None
    return [int(w.shape[0]) for _, w in layers[:-1]]


def _build_model(
    state: dict[str, torch.Tensor], path: Path, in_features: int, hidden_sizes: list[int], n_classes: int
) -> MLP:
    where = f"weights file '{path}'"
    model = MLP(in_features, hidden_sizes, n_classes)
    expected = model.state_dict()
    guess = _guess_hidden_sizes(state)
    hint = ""
    if guess is not None and guess != list(hidden_sizes):
        hint = f"; the file looks like hidden_sizes {guess}: set training.hidden_sizes to match"
    head = f"expected hidden_sizes {list(hidden_sizes)}"
    context = f"the MLP for {in_features} feature column(s) and {n_classes} class(es)"
    for key, tensor in expected.items():
        if key not in state:
            raise AuditInputError(where, f"{head}: layer {key} is missing in the file{hint}")
        found = state[key]
        if tuple(found.shape) != tuple(tensor.shape):
            raise AuditInputError(
                where,
                f"{head}: layer {key} has shape {tensor_shape(found.shape)} in the file, {context} needs "
                f"{tensor_shape(tensor.shape)}{hint}",
            )
        if not found.is_floating_point():
            raise AuditInputError(where, f"layer {key} holds {found.dtype} values, expected floating point weights")
        if not torch.isfinite(found).all():
            raise AuditInputError(where, f"layer {key} holds NaN or infinite weights")
    unexpected = [k for k in state if k not in expected]
    if unexpected:
        raise AuditInputError(where, f"{head}: the file holds layer {unexpected[0]} that the MLP does not have{hint}")
    model.load_state_dict({k: v.to(torch.float32) for k, v in state.items()})
    return model.eval()


# --------------------------------------------------------------------------------------------
# the audit


def _claimed_epsilon(config: AuditConfig) -> float:
    epsilons = config.privacy.epsilons
    if len(epsilons) != 1:
        shown = ", ".join("inf" if math.isinf(e) else f"{e:g}" for e in epsilons)
        raise AuditInputError(
            "privacy.epsilons",
            f"must hold exactly one value, the model's claimed ε (inf = non-private), got [{shown}]",
        )
    return float(epsilons[0])


def _attack_names(config: AuditConfig, attack_names: list[str] | None, has_population: bool, label_only: bool,
                  can_train_references: bool, why_not: str) -> tuple[list[str], list[str]]:
    """(attacks to run, notes). Score models: `loss` always, population attacks with a population file and a way
    to train reference models. Label-only models: the label-only attack only."""
    explicit = attack_names is not None
    names = list(dict.fromkeys(attack_names if explicit else config.attacks.names))
    for name in names:
        get_attack(name)  # unknown name → AuditInputError naming attacks.names
    notes: list[str] = []
    if label_only:  # what the attack classes declare: attacks/registry.py
        label_attacks = attacks_needing(LABELS_ONLY)
        chosen = [n for n in names if n in label_attacks]
        score_based = [n for n in names if n not in label_attacks]
        if explicit and score_based:
            raise AuditInputError("--attacks", f"the model returns labels only: attack '{score_based[0]}' needs scores; "
                                  f"use {' or '.join(repr(n) for n in label_attacks)}")
        if score_based:
            notes.append(f"the model returns labels only: score-based attacks ({', '.join(score_based)}) cannot run; "
                         f"the label-only attack ran instead")
        return chosen or label_attacks[:1], notes
    names = ["loss"] + [n for n in names if n != "loss"]
    needing = [n for n in names if n in _population_attacks()]
    if needing and not has_population:
        if explicit:
            raise AuditInputError(
                "--population", f"attack '{needing[0]}' trains reference/shadow models on population data: give a population file"
            )
        notes.append(f"attacks {', '.join(needing)} skipped: they need population data (--population)")
        names = [n for n in names if n not in _population_attacks()]
    needing = [n for n in names if n in _population_attacks()]
    if needing and not can_train_references:
        if explicit:
            raise AuditInputError("--trainer", f"attack '{needing[0]}' trains reference/shadow models like the target: {why_not}")
        notes.append(f"attacks {', '.join(needing)} skipped: {why_not}")
        names = [n for n in names if n not in _population_attacks()]
    return names, notes


def _population_attacks() -> list[str]:
    """Attacks that draw population data or train shadow / reference models on it (their class says so)."""
    return sorted(set(attacks_needing(POPULATION)) | set(attacks_needing(TRAINS_MODELS)))


def _check_population(names: list[str], population: _Table, n_members: int, options: AttackOptions) -> None:
    where = _where("population file", population.path)
    n_pool = len(population.labels)
    if attacks_needing(IN_OUT_REFERENCES, names) and options.rmia_population > n_pool:
        raise AuditInputError(
            where,
            f"has {n_pool} rows but the reference-model attacks draw attacks.rmia_population = "
            f"{options.rmia_population} population samples from it: lower attacks.rmia_population or give more rows",
        )
    shadow_like = [n for n in names if any(k.name == "n_shadow_models" for k in knobs_of([n]))]  # their knobs say
    if shadow_like:
        needed = n_members + max(20, n_members // 10)
        if n_pool < needed:
            raise AuditInputError(
                where,
                f"has {n_pool} rows; each shadow model trains on as many rows as the target ({n_members} members) "
                f"and keeps some out, so the {shadow_like[0]} attack needs ≥ {needed}: give more rows or drop "
                f"'{shadow_like[0]}'",
            )


def _dpsgd_parameters(config: AuditConfig, n_members: int, claimed: float) -> tuple[float, float, int]:
    """(σ, q, T) as Opacus's make_private_with_epsilon would pick them for this training config."""
    n_batches = math.ceil(n_members / config.training.batch_size)
    sample_rate = 1.0 / n_batches
    steps = config.training.epochs * n_batches
    if math.isinf(claimed):
        return 0.0, sample_rate, steps
    import warnings

    from opacus.accountants.utils import get_noise_multiplier

    try:
        with warnings.catch_warnings():  # the accountants' warnings about their α grid / approximations
            warnings.simplefilter("ignore")
            sigma = get_noise_multiplier(
                target_epsilon=claimed, target_delta=config.privacy.delta, sample_rate=sample_rate,
                epochs=config.training.epochs, accountant=config.privacy.accountant,
            )
    except ValueError as exc:  # "The privacy budget is too low."
        raise AuditInputError("privacy.epsilons", f"no noise multiplier reaches ε = {claimed:g} ({exc})") from None
    return float(sigma), sample_rate, steps



@dataclass
class _Source:
    """The audited model, opened: how attacks query it and what the results record about it."""

    query: ModelQuery
    kind: str  # mlp | torch | skops | onnx | function | live
    record: dict[str, Any]
    notes: list[str]
    dpsgd: bool  # a torch model: the config's DP-SGD description (σ, q, T, C) may describe its training


def _model_settings(config: AuditConfig, overrides: dict[str, Any]) -> ModelSourceConfig:
    """The config's `model:` section with the explicit arguments (CLI flags, Python API) on top."""
    base = config.model.model_dump() if config.model is not None else {}
    given = {k: (str(v) if isinstance(v, Path) else v) for k, v in overrides.items() if v is not None}
    if any(given.get(k) for k in ("weights", "skops", "onnx", "function")):
        for key in ("weights", "skops", "onnx", "function", "factory"):  # the flag names the model
            if key not in given:
                base.pop(key, None)
    try:
        return ModelSourceConfig.model_validate({**base, **given})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise AuditInputError("model", first["msg"].removeprefix("Value error, ")) from None


def _open_source(settings: ModelSourceConfig, live_model: Any, config: AuditConfig, tables: list[_Table],
                 stack: ExitStack) -> _Source:
    output = settings.output
    if live_model is not None:
        query = live_query(live_model, output)
        return _Source(query, "live", {"kind": "live object", "type": type(live_model).__name__, "output": query.output},
                       [], isinstance(live_model, torch.nn.Module))
    if settings.weights and settings.factory:
        pool = stack.enter_context(WorkerPool(1, name=f"model.factory {settings.factory}", timeout=settings.timeout,
                                              what="model"))
        query, info = isolated_factory_model(pool, settings.factory, settings.weights)
        weights = Path(settings.weights)
        record = {"kind": "torch module", "factory": settings.factory, "path": str(weights), "format": info["format"],
                  "sha256": _file_sha256(weights), "architecture": info["architecture"],
                  "n_parameters": info["n_parameters"], "output": "logits"}
        return _Source(query, "torch", record, list(info["notes"]), True)
    if settings.weights:
        return _open_mlp(Path(settings.weights), config, tables)
    if settings.skops:
        path = Path(settings.skops)
        _check_model_file_statically(path, "skops")  # refusals in a second, before a worker starts
        pool = stack.enter_context(WorkerPool(1, name=f"skops model '{path}'", timeout=settings.timeout, what="model"))
        query, info = isolated_skops_model(pool, str(path), output)
        record = {"kind": "scikit-learn (skops)", "path": str(path), "sha256": _file_sha256(path),
                  "estimator": info["estimator"], "trusted_types": info["classes"], "output": query.output}
        return _Source(query, "skops", record, [], False)
    if settings.onnx:
        path = Path(settings.onnx)
        _check_model_file_statically(path, "onnx")
        pool = stack.enter_context(WorkerPool(1, name=f"ONNX model '{path}'", timeout=settings.timeout, what="model"))
        query = isolated_onnx_model(pool, str(path), output or "logits")
        record = {"kind": "ONNX", "path": str(path), "sha256": _file_sha256(path), "output": query.output}
        return _Source(query, "onnx", record, [], False)
    if settings.function:
        pool = stack.enter_context(WorkerPool(1, name=f"model.function {settings.function}", timeout=settings.timeout,
                                              what="prediction function"))
        query = isolated_function_model(pool, settings.function, output or "probabilities")
        return _Source(query, "function", {"kind": "prediction function", "function": settings.function,
                                           "output": query.output}, [], False)
    raise AuditInputError("--weights", "give the model to audit: --weights (optionally with --factory), --skops, "
                          "--onnx or --function (or the config's model section)")


def _check_model_file_statically(path: Path, kind: str) -> None:
    """What can be checked by reading a model file as data (nothing imported, built or run): a skops
    file's every object against the allow-list, an ONNX file's external-data references. The worker
    checks again before it loads (it is the only place the file is loaded)."""
    import zipfile

    from targets.model_sources import check_onnx_file
    from targets.skops_allowlist import check_skops_file

    where = f"{'skops' if kind == 'skops' else 'ONNX'} file '{path}'"
    if not path.is_file():
        raise AuditInputError(where, "does not exist or is not a file")
    if kind == "skops":
        if not zipfile.is_zipfile(path):
            raise AuditInputError(where, "is not a skops file (a zip archive); pickle and joblib files are refused "
                                  "because loading them runs arbitrary code: save the estimator with skops.io.dump")
        check_skops_file(path, where)
    else:
        check_onnx_file(path, where)


def _open_mlp(weights: Path, config: AuditConfig, tables: list[_Table]) -> _Source:
    """The harness's own MLP (training.hidden_sizes) from a state dict: the path reference models can copy."""
    features = tables[0].features
    if features.ndim != 2:
        raise AuditInputError("--factory", f"the features have shape {features.shape[1:]} per row; a model for them "
                              "needs --factory module:function building it (the default MLP takes flat rows)")
    state, weights_format, notes = load_state_dict_file(weights)
    hidden_sizes = list(config.training.hidden_sizes)
    n_classes = max(int(t.labels.max()) for t in tables) + 1
    head = state.get(f"{2 * len(hidden_sizes)}.weight")
    if isinstance(head, torch.Tensor) and head.dim() == 2 and head.shape[0] > n_classes:
        notes.append(f"the model has {head.shape[0]} output classes; the data files use labels below {n_classes}")
        n_classes = int(head.shape[0])
    if n_classes < 2:
        raise AuditInputError(f"{tables[0].role} '{tables[0].path}'",
                              "the model needs ≥ 2 output classes (labels 0..K-1 with K ≥ 2)")
    n_features = features.shape[1]
    model = _build_model(state, weights, n_features, hidden_sizes, n_classes)
    query = ModelQuery(lambda x: predict_logits(model, np.ascontiguousarray(x, dtype=np.float32)), "logits",
                       f"MLP {weights.name}")
    record = {"kind": "torch MLP", "path": str(weights), "format": weights_format, "sha256": _file_sha256(weights),
              "architecture": f"MLP({n_features}, hidden_sizes={hidden_sizes}, n_classes={n_classes})",
              "output": "logits"}
    return _Source(query, "mlp", record, notes, True)


def _n_classes(source: _Source, tables: list[_Table]) -> int:
    """Classes of the model's output, checked against the labels; a probe on a few member rows."""
    labels_max = max(int(t.labels.max()) for t in tables)
    if source.query.label_only:
        n_classes = labels_max + 1
    else:
        n_classes = int(source.query.raw(tables[0].features[:8]).shape[1])
        if labels_max >= n_classes:
            raise AuditInputError(f"{tables[0].role} '{tables[0].path}'",
                                  f"holds label {labels_max} but the model outputs {n_classes} classes (0..{n_classes - 1})")
    if n_classes < 2:
        raise AuditInputError(f"{tables[0].role} '{tables[0].path}'", "the model needs ≥ 2 classes")
    return n_classes


def audit_user_model(
    config: AuditConfig,
    *,
    model: Any = None,
    output: str | None = None,
    weights: Path | str | None = None,
    factory: str | None = None,
    skops: Path | str | None = None,
    onnx: Path | str | None = None,
    function: str | None = None,
    trainer: str | None = None,
    members: Path | str | tuple | None = None,
    nonmembers: Path | str | tuple | None = None,
    label: str | None = None,
    population: Path | str | tuple | None = None,
    attack_names: list[str] | None = None,
    device: str = "auto",
    workers: int | None = None,
    executor: str = "processes",
    ray_address: str | None = None,
    scores_path: Path | None = None,
) -> dict[str, Any]:
    """Membership-inference audit of the user's own trained model; a results dict (schema_version 3).

    The model is one of: `model`, a live object (an `nn.Module`, a fitted estimator, a prediction
    callable — for notebooks; it runs in this process); `weights` (+ `factory` "module:function"
    building the `nn.Module`; without it the harness's MLP with `training.hidden_sizes`); `skops`;
    `onnx`; `function` ("module:function", a black box). `output` says what it returns (logits |
    probabilities | labels; labels = label-only, only the `label_only` attack runs). Factories and
    functions run in an isolated worker process. Every argument left None is taken from the
    config's `model:` section.

    Data: `members` (the model's training set), `nonmembers` (never seen, same distribution),
    `population` (more such rows, for reference/shadow models): CSV/Parquet with the `label`
    column, or `.npz` with arrays `features` (n, ...) and `labels` (n,), or (features, labels)
    pairs from Python. Reference/shadow models (`lira`, `lira_offline`, `rmia`, `shadow`) are
    trained by the user's `trainer` ("module:function", train(features, labels, seed) -> model,
    one task per model on `executor` — local (one isolated child process) | processes (`workers`
    of them, default the cores) | ray (`ray_address`, or a local cluster of `workers` CPUs); the
    same numbers on each) or, for the harness's MLP, by the vectorized DP-SGD trainer.

    `config`: `privacy.epsilons` holds exactly one value (the claimed ε, inf = non-private),
    `privacy.delta`/`accountant`, `attacks`, `seed`, and `training` (how a torch model was
    trained). `scores_path`: every candidate's membership, label and scores written as CSV.
    All user mistakes raise AuditInputError (exit 2) before any reference model is trained.
    """
    check_executor_options(executor, workers, ray_address)
    torch_device = resolve_device(device if device != "auto" else config.device)
    # Small models: on a shared CPU a second spinning OpenMP thread makes training many times slower
    # (the same reason `run` uses `config.cpu_threads`, default 1). Restored on return.
    threads = int(getattr(config, "cpu_threads", 1)) if torch_device.type == "cpu" else None
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    settings = _model_settings(config, dict(
        weights=weights, factory=factory, skops=skops, onnx=onnx, function=function, output=output, trainer=trainer,
        members=None if isinstance(members, tuple) else members, label=label,
        nonmembers=None if isinstance(nonmembers, tuple) else nonmembers,
        population=None if isinstance(population, tuple) else population))
    if (settings.trainer is not None and model is None and settings.weights and not settings.factory
            and not (settings.skops or settings.onnx or settings.function)):
        # An option that cannot apply is refused, never silently ignored: the built-in MLP's reference
        # models are trained by the harness's own DP-SGD, like the target it stands for.
        raise AuditInputError("--trainer", "does not apply to the built-in MLP (--weights without --factory): its "
                              "reference models are trained by the harness; drop --trainer, or give --factory for "
                              "your own architecture")
    data_sources = {
        "members": members if isinstance(members, tuple) else settings.members,
        "nonmembers": nonmembers if isinstance(nonmembers, tuple) else settings.nonmembers,
        "population": population if isinstance(population, tuple) else settings.population,
    }
    try:
        with ExitStack() as stack:
            return _audit(config, settings, model, data_sources, attack_names=attack_names, torch_device=torch_device,
                          execution=dict(kind=executor, workers=workers, ray_address=ray_address),
                          scores_path=scores_path, stack=stack)
    finally:
        torch.set_num_threads(previous)


def _audit(
    config: AuditConfig,
    settings: ModelSourceConfig,
    live_model: Any,
    data_sources: dict[str, Any],
    *,
    attack_names: list[str] | None,
    torch_device: torch.device,
    execution: dict[str, Any],
    scores_path: Path | None,
    stack: ExitStack,
) -> dict[str, Any]:
    claimed = _claimed_epsilon(config)
    options = attack_options(config)
    for role in ("members", "nonmembers"):
        if data_sources[role] is None:
            raise AuditInputError(f"--{role}", f"give the {role} file (CSV, Parquet or .npz)")

    # Data: members first, its columns / row shape is the reference for the other files.
    label = settings.label
    member_table = _read_data(data_sources["members"], "members file", label, None)
    nonmember_table = _read_data(data_sources["nonmembers"], "non-members file", label, member_table)
    population_table = (_read_data(data_sources["population"], "population file", label, member_table)
                        if data_sources["population"] is not None else None)
    tables = [t for t in (member_table, nonmember_table, population_table) if t is not None]
    n_members, n_nonmembers = len(member_table.labels), len(nonmember_table.labels)

    # The specs' form is checked here; the user's modules are imported only in isolated workers.
    for flag, spec in (("--factory", settings.factory), ("--function", settings.function), ("--trainer", settings.trainer)):
        if spec is not None:
            check_spec(spec, flag)
    source = _open_source(settings, live_model, config, tables, stack)
    notes = list(source.notes)
    n_classes = _n_classes(source, tables)
    can_train = source.kind in ("mlp", "torch") or settings.trainer is not None
    why_not = ("give a trainer (--trainer module:function, train(features, labels, seed) -> model) that trains "
               "models like the audited one")
    names, attack_notes = _attack_names(config, attack_names, population_table is not None, source.query.label_only,
                                        can_train, why_not)
    notes += attack_notes
    if population_table is not None:
        _check_population(names, population_table, n_members, options)

    # Sanity notes on the inputs (not errors: duplicates happen in real data).
    member_hashes = set(member_table.hashes.tolist())
    shared = int(sum(h in member_hashes for h in nonmember_table.hashes.tolist()))
    if shared:
        notes.append(f"{shared} non-member row(s) are identical to a member row (features and label): an attack "
                     "cannot tell them apart, which makes the bounds conservative")
    if population_table is not None:
        candidate_hashes = member_hashes | set(nonmember_table.hashes.tolist())
        overlap = int(sum(h in candidate_hashes for h in population_table.hashes.tolist()))
        if overlap:
            notes.append(f"{overlap} population row(s) are identical to a candidate row; the population should be "
                         "disjoint from the members and non-members")
    if config.privacy.delta >= 1.0 / n_members:
        notes.append(f"δ = {config.privacy.delta:g} ≥ 1/n = {1 / n_members:.2g} (n = {n_members} members): "
                     "such a δ permits releasing a whole record; choose δ well below 1/n")

    # How the model was (claimed to be) trained: harness references are trained the same way.
    private = math.isfinite(claimed)
    sigma, sample_rate, steps = _dpsgd_parameters(config, n_members, claimed) if source.dpsgd else (0.0, 1.0, 0)
    spec = TrainingSpec(**config.training.model_dump())
    max_grad_norm = config.training.max_grad_norm if private and source.dpsgd else None
    seed = config.seed
    candidate_features = np.concatenate([member_table.features, nonmember_table.features])
    candidate_labels = np.concatenate([member_table.labels, nonmember_table.labels])
    membership = np.concatenate([np.ones(n_members, dtype=bool), np.zeros(n_nonmembers, dtype=bool)])
    if population_table is not None:
        pool_features, pool_labels = population_table.features, population_table.labels
    else:
        pool_features = np.empty((0, *member_table.features.shape[1:]), dtype=np.float32)
        pool_labels = np.empty(0, dtype=np.int64)
    train_models = None
    trainer_executors: list = []  # started on first use: no workers (or Ray cluster) unless a model trains

    def trainer_executor():
        if not trainer_executors:
            trainer_executors.append(stack.enter_context(make_user_code_executor(
                execution["kind"], workers=execution["workers"], ray_address=execution["ray_address"],
                timeout=settings.timeout, name=f"model.trainer {settings.trainer}", what="trainer")))
        return trainer_executors[0]

    if settings.trainer is not None and source.kind != "mlp":
        train_models = user_trainer(settings.trainer, pool=trainer_executor)
    elif source.kind == "torch":  # the factory's architecture, trained by the vectorized DP-SGD trainer
        dpsgd = DPSGDSpec(noise_multiplier=sigma if private else 0.0, max_grad_norm=max_grad_norm,
                          sample_rate=sample_rate, steps=steps, lr=config.training.lr, momentum=config.training.momentum)
        train_models = vectorized_factory_trainer(settings.factory, n_classes, dpsgd, timeout=settings.timeout)
    context = AttackContext(
        candidate_features=candidate_features, candidate_labels=candidate_labels, n_classes=n_classes,
        pool_features=pool_features, pool_labels=pool_labels,
        training=TargetTraining(spec=spec, noise_multiplier=sigma if private else 0.0, max_grad_norm=max_grad_norm,
                                sample_rate=sample_rate, steps=steps, train_size=n_members),
        epsilon=claimed, delta=config.privacy.delta, accountant=config.privacy.accountant, seed=seed,
        device=torch_device, options=options, train_models=train_models,
    )

    attack_records, score_columns = [], {}
    for name in names:
        scores = np.asarray(get_attack(name).scores(source.query, context), dtype=np.float64)
        score_columns[name] = scores
        attack_records.append(
            evaluate_attack(
                name, scores, membership, candidate_labels, delta=config.privacy.delta,
                confidence=config.attacks.confidence, threshold_seed=seed,
                accountant_epsilon=claimed if private else None, membership_randomized=False,
            )
        )

    epsilon: dict[str, float] = {}
    if private and source.dpsgd:
        epsilon = epsilons_for_event(DPSGDEvent(sigma, sample_rate, steps), config.privacy.delta, config.privacy.accountant)
        if epsilon["pld"] > epsilon["prv"] + PLD_PRV_TOLERANCE:
            notes.append(f"PRV ε {epsilon['prv']:.3f} is below the tight PLD ε {epsilon['pld']:.3f} by more than "
                         f"{PLD_PRV_TOLERANCE}")
    test_accuracy = float((source.query.predict_labels(nonmember_table.features) == nonmember_table.labels).mean())
    best, best_method = best_sound_lower_bound(attack_records)
    violation = False  # decided by audit.machinery.verdict (only bounds proven for the setting)
    dpsgd_known = private and source.dpsgd
    target_record = {
        "epsilon_target": claimed if private else None,
        "delta": config.privacy.delta,
        "noise_multiplier": sigma if dpsgd_known else None,
        "sample_rate": sample_rate if source.dpsgd else None,
        "steps": steps if source.dpsgd else None,
        "max_grad_norm": max_grad_norm,
        "poisson_sampling": True if dpsgd_known else None,
        "accountant": config.privacy.accountant if dpsgd_known else None,
        "epsilon": epsilon,
        "epsilon_accountant": epsilon.get(config.privacy.accountant) if dpsgd_known else None,
        "epsilon_engine": None,
        "test_accuracy": test_accuracy,
        "train_seconds": None,
        "attacks": attack_records,
        "epsilon_lb_best": best,
        "epsilon_lb_best_method": best_method,
        "epsilon_lb_ratio": best / claimed if private and best is not None else None,
        "violation": bool(violation),
        "seed": seed,
        # Das et al. 2024 (arXiv 2406.16201): the user's member / non-member files must not be
        # separable without the model, or the leakage figures above measure the split, not the model.
        "blind_baseline": blind_baseline(candidate_features, candidate_labels, membership,
                                         alpha=1 - config.attacks.confidence, seed=seed),
    }
    reasons: list[str] = []
    if target_record["blind_baseline"].get("separates"):
        shift = target_record["blind_baseline"]
        notes.append(f"distribution shift: a classifier on the records alone (no model) separates the members file "
                     f"from the non-members file (AUC {shift['auc']:.3f}, p = {shift['p_value']:.2g}); the leakage "
                     "figures are confounded: they need not come from the model (Das et al. 2024, arXiv 2406.16201)")

    notes += [
        "membership is given by the members / non-members files, not drawn by a fair coin per record: the one-run "
        "bound (Steinke et al. 2023) is not computed, and the Clopper-Pearson bound over one model's candidates "
        "assumes independent trials: it is shown but decides nothing, so a claimed ε is reported inconclusive. The "
        "bounds speak about membership only if the non-members come from the same distribution as the members "
        "(ideally a random hold-out of the same data); otherwise an attack may be telling the distributions apart",
        "test_accuracy is the model's accuracy on the non-members file",
        "the features are fed to the model exactly as given in the files: no standardisation, encoding or "
        "other transformation is applied",
    ]
    if source.query.label_only:
        notes.append("the model returns labels only: the label-only attack (noise robustness, Choquette-Choo et al. "
                     "2021) is a weaker adversary than score-based attacks, so its bound is a floor for a model whose "
                     "scores are also exposed")
    if private and source.dpsgd:
        notes.append(
            f"claimed ε {claimed:g}: the audit assumes DP-SGD with Poisson sampling as Opacus's "
            f"make_private_with_epsilon would run it with the config's training section: q = 1/⌈{n_members}/"
            f"{config.training.batch_size}⌉ = {sample_rate:.4g}, T = {steps}, C = {max_grad_norm:g}, σ = {sigma:.4f} "
            f"({config.privacy.accountant} accountant); the accountant ε is for these (σ, q, T), the violation "
            "check compares with the claimed ε"
        )
    elif private:
        notes.append(f"claimed ε {claimed:g}: the model is not a torch model trained by DP-SGD as the config describes, "
                     "so no accountant ε is computed; the violation check compares the bounds with the claimed ε")
    if any(n in _population_attacks() for n in names):
        how = (f"by the user's trainer {settings.trainer}" if settings.trainer is not None and source.kind != "mlp" else
               f"as {settings.factory}'s architecture by the vectorized DP-SGD trainer (the config's training section"
               + (", same σ, q, T, C)" if private else ", non-private)") if source.kind == "torch" else
               "like the target is assumed to have been trained (the config's training section"
               + (", same σ, q, T, C)" if private else ", non-private)"))
        notes.append(f"reference/shadow models are trained {how}; a reference model trained differently from the "
                     "target makes those attacks weaker, never the bounds unsound")
    if attacks_needing(IN_OUT_REFERENCES, names) and abs(n_members - n_nonmembers) > 0.1 * n_members:
        notes.append(
            f"reference models each train on half of the {n_members + n_nonmembers} candidates while the target "
            f"trained on {n_members} members: equal-sized member and non-member files mimic the target best"
        )

    if scores_path is not None:
        from audit.machinery.run_directory import write_text_atomic

        frame = pd.DataFrame({"member": membership.astype(int), "label": candidate_labels, **score_columns})
        write_text_atomic(Path(scores_path), frame.to_csv(index=False))

    files = {"members": member_table.path, "nonmembers": nonmember_table.path,
             "population": population_table.path if population_table is not None else None}
    model_description = source.record.get("path") or source.record.get("function") or source.record.get("type")
    data = {
        "description": f"user model {Path(str(model_description)).name} on {member_table.path.name} (members) / "
                       f"{nonmember_table.path.name} (non-members)"
                       + (f", population {population_table.path.name}" if population_table is not None else ""),
        "n_rows": int(sum(len(t.labels) for t in tables)),
        "n_features": int(np.prod(member_table.features.shape[1:])),
        "feature_shape": [int(d) for d in member_table.features.shape[1:]],
        "n_classes": int(n_classes),
        "n_train": int(n_members),
        "n_candidates": int(n_members + n_nonmembers),
        "n_members": int(n_members),
        "n_nonmembers": int(n_nonmembers),
        "n_pool": int(len(pool_labels)),
        "membership": "given by the user's files (members = the model's training set); not randomized",
        "label": label,
        "feature_columns": ([c for c in member_table.frame.columns if c != label]
                            if member_table.frame is not None else None),
        "files": {k: str(v) if v is not None else None for k, v in files.items()},
        "files_sha256": {k: _file_sha256(v) for k, v in files.items() if v is not None and v.is_file()},
        "model": source.record,
    }
    if source.kind in ("mlp", "torch"):
        data["weights"] = {k: source.record[k] for k in ("path", "format", "sha256", "architecture")}
    results = {
        "schema_version": SCHEMA_VERSION,
        "config": config.to_plain(),
        "environment": describe_environment(str(torch_device), seed),
        "data": data,
        "attacks_run": names,
        "targets": [target_record],
        "synthetic": [],
        "notes": notes,
        "verdict": {"status": "pass", "passed": not violation, "policy": None, "reasons": reasons},
    }
    if trainer_executors:  # where the user's trainer ran; the numbers do not depend on it
        results["execution"] = trainer_executors[0].describe()
    return verdict_for_results(results)[0]  # the one verdict model: proven bounds, Holm
