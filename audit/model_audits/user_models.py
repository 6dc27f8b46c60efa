"""The user's model and trainer, run in isolated child processes (audit/machinery/workers.py).

Two kinds of user code reach an audit here:

* the model itself when it is code — a `module:factory` building an `nn.Module` (weights loaded
  with `weights_only=True` / safetensors and checked tensor by tensor), or a black-box
  `module:function` (a model behind an API). One persistent worker process holds it; every query
  is a task in that worker, so a crash, `sys.exit` or hang of the user's code ends in exit 2
  naming it, and nothing of the user's classes reaches the audit process (only arrays return);
* the user's `train(features, labels, seed) -> model` (the `canary-audit` contract: a module,
  a fitted estimator with `predict_proba`, or a callable returning probabilities) that trains the
  reference and shadow models, each in a parallel worker with a timeout; the child returns the
  trained model's logits on the query sets, never the model.

Model files (skops estimators, ONNX graphs) are loaded by the safe loaders of
`targets.model_sources` — and, like user code, in that persistent worker with the same timeout:
a skops estimator's predict is code, an ONNX graph can loop forever, and a Ctrl-C or SIGTERM of
the audit kills the worker's whole process group (audit/machinery/workers.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from audit.errors import AuditInputError
from audit.machinery.workers import WorkerPool, run_isolated, user_code
from targets.model_sources import (
    ModelQuery,
    estimator_method,
    load_skops_estimator,
    load_state_dict_file,
    load_weights_into,
    module_logits,
    onnx_run,
    onnx_session,
    trained_model_logits,
)

# In the child: the user's model built once per (spec, weights) and kept for later queries.
_CHILD_MODELS: dict[tuple, Any] = {}


def _factory_module(factory: str, weights: str):
    key = ("factory", factory, weights)
    if key not in _CHILD_MODELS:
        from torch import nn

        from audit.machinery.user_code import load_user_function

        flag = f"model.factory {factory}"
        with user_code(flag, "module"):
            build = load_user_function(factory, "model.factory")
        with user_code(flag):
            module = build()
        if not isinstance(module, nn.Module):
            raise AuditInputError(flag, f"must return a torch.nn.Module, returned {type(module).__name__}")
        state, _, _ = load_state_dict_file(weights)
        load_weights_into(module.float(), state, f"weights file '{weights}' for {factory}")
        _CHILD_MODELS[key] = module
    return _CHILD_MODELS[key]


def factory_outputs(factory: str, weights: str, features: np.ndarray) -> np.ndarray:
    """Task: the factory's module, with the weights, on `features` (logits)."""
    import torch

    torch.set_num_threads(1)
    module = _factory_module(factory, weights)
    with user_code(f"model.factory {factory}", "model's forward"):
        return module_logits(module, features)


def factory_weights_notes(factory: str, weights: str) -> dict:
    """Task: build and load once, return what the audit records about the weights."""
    _, file_format, notes = load_state_dict_file(weights)
    module = _factory_module(factory, weights)
    return {
        "format": file_format,
        "notes": notes,
        "architecture": type(module).__name__,
        "n_parameters": int(sum(p.numel() for p in module.parameters())),
    }


def function_outputs(function: str, features: np.ndarray) -> np.ndarray:
    """Task: the user's prediction function on `features` (whatever it returns, as an array)."""
    from audit.machinery.user_code import load_user_function

    flag = f"model.function {function}"
    key = ("function", function)
    if key not in _CHILD_MODELS:
        with user_code(flag, "module"):
            _CHILD_MODELS[key] = load_user_function(function, "model.function")
    with user_code(flag):
        out = _CHILD_MODELS[key](features)
    try:
        return np.asarray(out.detach().cpu().numpy() if hasattr(out, "detach") else out, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise AuditInputError(flag, f"returned something that is not an array of numbers ({exc})") from None


def _skops_model(path: str, output: str | None):
    key = ("skops", path, output)
    if key not in _CHILD_MODELS:
        estimator, classes = load_skops_estimator(path)
        method, kind = estimator_method(estimator, output)
        _CHILD_MODELS[key] = (estimator, method, kind, classes)
    return _CHILD_MODELS[key]


def skops_model_info(path: str, output: str | None) -> dict:
    """Task: load the skops file (allow-listed classes only) and say what the audit records."""
    estimator, method, kind, classes = _skops_model(path, output)
    return {"estimator": type(estimator).__name__, "method": method, "output": kind, "classes": classes}


def skops_outputs(path: str, output: str | None, features: np.ndarray) -> np.ndarray:
    """Task: the estimator's predict_proba / decision_function / predict on `features`."""
    estimator, method, _, _ = _skops_model(path, output)
    with user_code(f"skops model {path}", f"estimator's {method}"):
        out = getattr(estimator, method)(features)
    try:
        return np.asarray(out, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise AuditInputError(
            f"skops model {path}", f"{method} returned something that is not numbers ({exc})"
        ) from None


def _onnx_model(path: str, output_index: int):
    key = ("onnx", path, output_index)
    if key not in _CHILD_MODELS:
        _CHILD_MODELS[key] = onnx_session(path, output_index)
    return _CHILD_MODELS[key]


def onnx_model_info(path: str, output_index: int) -> dict:
    """Task: open the graph once (refusing external data) so a broken file is exit 2 before the audit."""
    _onnx_model(path, output_index)
    return {}


def onnx_outputs(path: str, output_index: int, features: np.ndarray) -> np.ndarray:
    session, input_name, output_name = _onnx_model(path, output_index)
    return np.asarray(onnx_run(session, input_name, output_name, features, f"ONNX file '{path}'"))


def isolated_skops_model(pool: WorkerPool, path: str, output: str | None) -> tuple[ModelQuery, dict]:
    info = pool.map(skops_model_info, [(path, output)])[0]
    return ModelQuery(
        IsolatedModel(pool, skops_outputs, (path, output)), info["output"], f"skops model {Path(path).name}"
    ), info


def isolated_onnx_model(pool: WorkerPool, path: str, output: str, output_index: int = 0) -> ModelQuery:
    pool.map(onnx_model_info, [(path, output_index)])
    return ModelQuery(IsolatedModel(pool, onnx_outputs, (path, output_index)), output, f"ONNX model {Path(path).name}")


@dataclass
class IsolatedModel:
    """A `ModelQuery` whose predictions are computed by a task in one persistent worker."""

    pool: WorkerPool
    task: Callable
    args: tuple

    def __call__(self, features: np.ndarray) -> np.ndarray:
        return self.pool.map(self.task, [(*self.args, np.ascontiguousarray(features, dtype=np.float32))])[0]


def isolated_factory_model(pool: WorkerPool, factory: str, weights: str) -> tuple[ModelQuery, dict]:
    info = pool.map(factory_weights_notes, [(factory, weights)])[0]
    return ModelQuery(
        IsolatedModel(pool, factory_outputs, (factory, weights)), "logits", f"model {factory} with weights {weights}"
    ), info


def isolated_function_model(pool: WorkerPool, function: str, output: str) -> ModelQuery:
    return ModelQuery(IsolatedModel(pool, function_outputs, (function,)), output, f"prediction function {function}")


# --------------------------------------------------------------------------------------------
# reference / shadow models from the user's trainer


def train_and_query(
    trainer: str, features: np.ndarray, labels: np.ndarray, seed: int, queries: list[np.ndarray]
) -> list[np.ndarray]:
    """Task: `train(features, labels, seed)` in this child, then the model's logits on each query set."""
    import torch

    from audit.machinery.user_code import load_user_function

    torch.set_num_threads(1)
    flag = f"model.trainer {trainer}"
    with user_code(flag, "module"):
        train = load_user_function(trainer, "model.trainer")
    with user_code(flag):
        model = train(features.copy(), labels.copy(), int(seed))
    with user_code(flag, "trained model"):
        return [trained_model_logits(model, q, flag) for q in queries]


def user_trainer(trainer: str, *, pool: Callable[[], Any]) -> Callable:
    """`train_models(features, labels, in_masks, queries, seed)` for `AttackContext.train_models`:
    model k trains on the rows of `in_masks[k]` with seed derived from (seed, k), as one task of
    the executor `pool()` returns (`executors.make_user_code_executor`: isolated workers on every
    executor, created on first use); returns, per query set, a (K, n, C) array of logits. Each
    model depends on (seed, k) only, so every executor and worker count gives the same numbers."""

    def train_models(features, labels, in_masks, queries, seed):
        seeds = [int(np.random.SeedSequence([seed, k]).generate_state(1)[0]) for k in range(len(in_masks))]
        tasks = [(trainer, features[mask], labels[mask], s, list(queries)) for mask, s in zip(in_masks, seeds)]
        per_model = pool().map(train_and_query, tasks)
        shapes = {tuple(out.shape) for outs in per_model for out in outs[:1]}
        if len(shapes) != 1:
            raise AuditInputError(
                f"model.trainer {trainer}", f"the trained models disagree on the output shape: {shapes}"
            )
        return [np.stack([outs[i] for outs in per_model]) for i in range(len(queries))]

    return train_models


# --------------------------------------------------------------------------------------------
# reference / shadow models of the factory's architecture, by the vectorized DP-SGD trainer


def _flat_input_builder(factory: str, shape: tuple[int, ...]):
    """seed -> the factory's module behind an Unflatten, so the vectorized trainer sees flat rows."""
    from torch import nn

    from audit.machinery.user_code import load_user_function

    flag = f"model.factory {factory}"
    with user_code(flag, "module"):
        build = load_user_function(factory, "model.factory")

    def builder(seed: int) -> nn.Module:
        with user_code(flag):
            module = build()
        return nn.Sequential(nn.Unflatten(1, shape), module.float()) if len(shape) > 1 else module.float()

    return builder


def vectorized_factory_train_and_query(
    factory: str,
    features: np.ndarray,
    labels: np.ndarray,
    in_masks: np.ndarray,
    n_classes: int,
    spec,
    seed: int,
    queries: list[np.ndarray],
) -> list[np.ndarray]:
    """Task: K models of the factory's architecture trained together by `targets.vectorized_dpsgd.train_many`
    (Opacus's DP-SGD semantics, per-sample gradients by vmap), their logits on each query set."""
    import torch

    from targets.vectorized_dpsgd import check_vectorizable, train_many

    torch.set_num_threads(1)
    shape = tuple(features.shape[1:])
    builder = _flat_input_builder(factory, shape)
    reason = check_vectorizable(builder(0))
    if reason is not None:
        raise AuditInputError(
            f"model.factory {factory}",
            f"cannot be trained by the vectorized DP-SGD trainer: "
            f"{reason}; give --trainer module:function to train reference models",
        )
    flat = features.reshape(len(features), -1)
    with user_code(f"model.factory {factory}", "model's forward"):
        models = train_many(
            flat.shape[1], (), n_classes, flat, labels, in_masks, spec, seed=seed, device="cpu", build=builder
        )
        return [models.logits(q.reshape(len(q), -1), device="cpu").numpy() for q in queries]


def vectorized_factory_trainer(factory: str, n_classes: int, spec, *, timeout: float | None) -> Callable:
    """`train_models` for `AttackContext`: the factory's architecture trained like the target is assumed to
    have been (DP-SGD `spec`), in one isolated worker process."""

    def train_models(features, labels, in_masks, queries, seed):
        return run_isolated(
            vectorized_factory_train_and_query,
            factory,
            np.ascontiguousarray(features, dtype=np.float32),
            labels,
            np.asarray(in_masks),
            n_classes,
            spec,
            int(seed),
            [np.ascontiguousarray(q, dtype=np.float32) for q in queries],
            name=f"model.factory {factory}",
            timeout=timeout,
            what="model",
        )

    return train_models
