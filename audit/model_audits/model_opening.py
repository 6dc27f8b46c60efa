"""Opening the user's model for `audit-model`: whichever kind it is (factory + weights, the harness's MLP,
skops, ONNX, a black-box function, a live Python object), one `ModelQuery`, with user code isolated in a
worker process and model files checked before anything loads them.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import ValidationError

from audit.errors import AuditInputError
from audit.machinery.config import AuditConfig, ModelSourceConfig
from audit.machinery.workers import WorkerPool
from audit.model_audits.data_files import _file_sha256, _Table
from audit.model_audits.mlp_weights import _build_model
from audit.model_audits.user_models import (
    isolated_factory_model,
    isolated_function_model,
    isolated_onnx_model,
    isolated_skops_model,
)
from targets.model_sources import ModelQuery, live_query, load_state_dict_file
from targets.training import predict_logits


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


def _open_source(
    settings: ModelSourceConfig, live_model: Any, config: AuditConfig, tables: list[_Table], stack: ExitStack
) -> _Source:
    output = settings.output
    if live_model is not None:
        query = live_query(live_model, output)
        return _Source(
            query,
            "live",
            {"kind": "live object", "type": type(live_model).__name__, "output": query.output},
            [],
            isinstance(live_model, torch.nn.Module),
        )
    if settings.weights and settings.factory:
        pool = stack.enter_context(
            WorkerPool(1, name=f"model.factory {settings.factory}", timeout=settings.timeout, what="model")
        )
        query, info = isolated_factory_model(pool, settings.factory, settings.weights)
        weights = Path(settings.weights)
        record = {
            "kind": "torch module",
            "factory": settings.factory,
            "path": str(weights),
            "format": info["format"],
            "sha256": _file_sha256(weights),
            "architecture": info["architecture"],
            "n_parameters": info["n_parameters"],
            "output": "logits",
        }
        return _Source(query, "torch", record, list(info["notes"]), True)
    if settings.weights:
        return _open_mlp(Path(settings.weights), config, tables)
    if settings.skops:
        path = Path(settings.skops)
        _check_model_file_statically(path, "skops")  # refusals in a second, before a worker starts
        pool = stack.enter_context(WorkerPool(1, name=f"skops model '{path}'", timeout=settings.timeout, what="model"))
        query, info = isolated_skops_model(pool, str(path), output)
        record = {
            "kind": "scikit-learn (skops)",
            "path": str(path),
            "sha256": _file_sha256(path),
            "estimator": info["estimator"],
            "trusted_types": info["classes"],
            "output": query.output,
        }
        return _Source(query, "skops", record, [], False)
    if settings.onnx:
        path = Path(settings.onnx)
        _check_model_file_statically(path, "onnx")
        pool = stack.enter_context(WorkerPool(1, name=f"ONNX model '{path}'", timeout=settings.timeout, what="model"))
        query = isolated_onnx_model(pool, str(path), output or "logits")
        record = {"kind": "ONNX", "path": str(path), "sha256": _file_sha256(path), "output": query.output}
        return _Source(query, "onnx", record, [], False)
    if settings.function:
        pool = stack.enter_context(
            WorkerPool(
                1, name=f"model.function {settings.function}", timeout=settings.timeout, what="prediction function"
            )
        )
        query = isolated_function_model(pool, settings.function, output or "probabilities")
        return _Source(
            query,
            "function",
            {"kind": "prediction function", "function": settings.function, "output": query.output},
            [],
            False,
        )
    raise AuditInputError(
        "--weights",
        "give the model to audit: --weights (optionally with --factory), --skops, "
        "--onnx or --function (or the config's model section)",
    )


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
            raise AuditInputError(
                where,
                "is not a skops file (a zip archive); pickle and joblib files are refused "
                "because loading them runs arbitrary code: save the estimator with skops.io.dump",
            )
        check_skops_file(path, where)
    else:
        check_onnx_file(path, where)


def _open_mlp(weights: Path, config: AuditConfig, tables: list[_Table]) -> _Source:
    """The harness's own MLP (training.hidden_sizes) from a state dict: the path reference models can copy."""
    features = tables[0].features
    if features.ndim != 2:
        raise AuditInputError(
            "--factory",
            f"the features have shape {features.shape[1:]} per row; a model for them "
            "needs --factory module:function building it (the default MLP takes flat rows)",
        )
    state, weights_format, notes = load_state_dict_file(weights)
    hidden_sizes = list(config.training.hidden_sizes)
    n_classes = max(int(t.labels.max()) for t in tables) + 1
    head = state.get(f"{2 * len(hidden_sizes)}.weight")
    if isinstance(head, torch.Tensor) and head.dim() == 2 and head.shape[0] > n_classes:
        notes.append(f"the model has {head.shape[0]} output classes; the data files use labels below {n_classes}")
        n_classes = int(head.shape[0])
    if n_classes < 2:
        raise AuditInputError(
            f"{tables[0].role} '{tables[0].path}'", "the model needs ≥ 2 output classes (labels 0..K-1 with K ≥ 2)"
        )
    n_features = features.shape[1]
    model = _build_model(state, weights, n_features, hidden_sizes, n_classes)
    query = ModelQuery(
        lambda x: predict_logits(model, np.ascontiguousarray(x, dtype=np.float32)), "logits", f"MLP {weights.name}"
    )
    record = {
        "kind": "torch MLP",
        "path": str(weights),
        "format": weights_format,
        "sha256": _file_sha256(weights),
        "architecture": f"MLP({n_features}, hidden_sizes={hidden_sizes}, n_classes={n_classes})",
        "output": "logits",
    }
    return _Source(query, "mlp", record, notes, True)


def _n_classes(source: _Source, tables: list[_Table]) -> int:
    """Classes of the model's output, checked against the labels; a probe on a few member rows."""
    labels_max = max(int(t.labels.max()) for t in tables)
    if source.query.label_only:
        n_classes = labels_max + 1
    else:
        n_classes = int(source.query.raw(tables[0].features[:8]).shape[1])
        if labels_max >= n_classes:
            raise AuditInputError(
                f"{tables[0].role} '{tables[0].path}'",
                f"holds label {labels_max} but the model outputs {n_classes} classes (0..{n_classes - 1})",
            )
    if n_classes < 2:
        raise AuditInputError(f"{tables[0].role} '{tables[0].path}'", "the model needs ≥ 2 classes")
    return n_classes
