"""Model sources: whatever the user's model is, attacks query it through one small interface.

A source is a prediction function plus what it returns (`output`):

* ``"logits"`` — a (n, C) array of unnormalised scores (a PyTorch module, an ONNX graph);
* ``"probabilities"`` — a (n, C) array of class probabilities (`predict_proba` of a scikit-learn
  estimator, most prediction APIs);
* ``"labels"`` — a (n,) array of predicted classes only (a label-only API).

`ModelQuery` turns any of them into what attacks read: `logits(features)` (for probabilities,
log p — softmax(log p) = p, so every attack statistic is unchanged) and `predict_labels(features)`.
The attacks never learn which kind of model answered. A label-only source refuses `logits`, so a
score-based attack cannot silently run on hard labels.

Loading is safe by construction — nothing the user ships is unpickled:

* PyTorch weights with `torch.load(weights_only=True)` or safetensors (`load_state_dict_file`),
  loaded into the module with every tensor's name and shape checked (`load_weights_into`);
* scikit-learn estimators with skops and a reviewed allow-list of plain estimator classes and
  array types (`targets.skops_allowlist`): a file naming a function, a method, a reduce-call or any
  other class is refused before anything in it is imported or constructed; pickle/joblib refused;
* ONNX graphs with onnxruntime (a graph of tensor operators; no Python runs), refused when they
  point at external data files.

The audit commands load and query skops and ONNX models in an isolated worker with a timeout
(audit/model_audits/user_models.py), like user code: a graph that loops forever is killed.

User code (a model factory, a prediction function, the module's own `forward`) is run by the
audit jobs in isolated child processes; this module only defines the pieces they run there.
"""

from __future__ import annotations

import re
import sys
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from audit.errors import AuditInputError

if TYPE_CHECKING:
    import torch
    from torch import nn

# PyTorch is imported by the functions that build or run a module, not with this module: the
# isolated worker that loads a skops estimator or an ONNX graph never needs it (~1.5 s of CPU).

OUTPUT_KINDS = ("logits", "probabilities", "labels")
# Common wrappers of a state dict: Opacus's GradSampleModule and DataParallel/DDP prefixes.
_KEY_PREFIXES = ("_module.", "module.")
_CHECKPOINT_KEYS = ("state_dict", "model_state_dict", "model")
# log(0) would make −inf logits; a probability this small is "impossible" for every statistic used.
_MIN_PROBABILITY = 1e-30
_PROBABILITY_TOLERANCE = 1e-3


# --------------------------------------------------------------------------------------------
# the interface attacks see


@dataclass
class ModelQuery:
    """The user's model as attacks see it. `predict(features)` returns `output` (see module doc)."""

    predict: Callable[[np.ndarray], np.ndarray]
    output: str
    description: str

    def __post_init__(self) -> None:
        if self.output not in OUTPUT_KINDS:
            raise AuditInputError("model.output", f"expected one of {', '.join(OUTPUT_KINDS)}, got {self.output!r}")

    @property
    def label_only(self) -> bool:
        return self.output == "labels"

    def raw(self, features: np.ndarray) -> np.ndarray:
        features = np.ascontiguousarray(features, dtype=np.float32)
        return check_outputs(self.predict(features), self.output, len(features), self.description)

    def logits(self, features: np.ndarray) -> np.ndarray:
        if self.label_only:
            raise AuditInputError(
                "attacks.names",
                f"{self.description} returns predicted labels only: score-based attacks (loss, shadow, lira, "
                "rmia) cannot run on it; use the label-only attack 'label_only'",
            )
        return outputs_as_logits(self.raw(features), self.output)

    def predict_labels(self, features: np.ndarray) -> np.ndarray:
        out = self.raw(features)
        return out.astype(np.int64) if self.label_only else out.argmax(axis=1).astype(np.int64)


def check_outputs(out: Any, output: str, n_rows: int, description: str) -> np.ndarray:
    """The prediction as a float64 (n, C) or int (n,) array, or an error naming the model."""
    where = f"{description} (output '{output}')"
    try:
        torch = sys.modules.get("torch")  # a tensor implies torch is loaded
        is_tensor = torch is not None and isinstance(out, torch.Tensor)
        out = np.asarray(out.detach().cpu().numpy() if is_tensor else out, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise AuditInputError(where, f"returned something that is not an array of numbers ({exc})") from None
    if output == "labels":
        out = out.reshape(-1) if out.ndim == 2 and out.shape[1] == 1 else out
        if out.shape != (n_rows,):
            raise AuditInputError(where, f"returned shape {out.shape}, expected ({n_rows},): one class per row")
        if not np.all(np.isfinite(out)) or not np.all(out == np.round(out)) or out.min() < 0:
            raise AuditInputError(where, "must return integer class indices ≥ 0")
        return out
    if out.ndim != 2 or out.shape[0] != n_rows or out.shape[1] < 2:
        raise AuditInputError(where, f"returned shape {out.shape}, expected ({n_rows}, classes ≥ 2)")
    if not np.all(np.isfinite(out)):
        raise AuditInputError(where, "returned NaN or infinite values")
    if output == "probabilities":
        if out.min() < -_PROBABILITY_TOLERANCE or np.abs(out.sum(axis=1) - 1).max() > _PROBABILITY_TOLERANCE:
            raise AuditInputError(
                where,
                "must return probabilities (each row ≥ 0, summing to 1); "
                "if the model returns logits set output: logits",
            )
    return out


def outputs_as_logits(out: np.ndarray, output: str) -> np.ndarray:
    """Logits for attacks: logits as they are, probabilities as log p (softmax(log p) = p)."""
    if output == "logits":
        return out
    return np.log(np.clip(out, _MIN_PROBABILITY, None))


# --------------------------------------------------------------------------------------------
# PyTorch


def load_state_dict_file(path: Path | str) -> tuple[dict[str, torch.Tensor], str, list[str]]:
    """(state dict, format, notes). Never unpickles anything but tensors and plain containers."""
    import torch

    path = Path(path)
    where = f"weights file '{path}'"
    if not path.is_file():
        raise AuditInputError(where, "does not exist or is not a file")
    notes: list[str] = []
    if path.suffix.lower() == ".safetensors":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            state: Any = load_file(str(path), device="cpu")
        except (SafetensorError, OSError, ValueError) as exc:
            raise AuditInputError(where, f"could not be read as safetensors ({exc})") from None
        file_format = "safetensors"
    else:
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # UnpicklingError, RuntimeError (not a torch file), EOFError, ...
            text = str(exc)
            found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
            if found:
                reason = f"it holds a pickled {found.group(1)} object"
            else:  # torch's own text suggests weights_only=False, which this tool never does
                detail = re.search(r"WeightsUnpickler error:\s*(.+)", text)
                reason = "it is not a PyTorch file of tensors" + (
                    f" ({detail.group(1).strip()[:120]})" if detail else f" ({type(exc).__name__})"
                )
            raise AuditInputError(
                where,
                f"could not be loaded as a state_dict with torch.load(weights_only=True): {reason}. Save the "
                "weights with torch.save(model.state_dict(), path) (or safetensors); a pickled model object is "
                "refused because unpickling it could run arbitrary code",
            ) from None
        file_format = "torch state_dict (weights_only)"
    if isinstance(state, Mapping):
        for key in _CHECKPOINT_KEYS:  # a training checkpoint {'state_dict': {...}, 'epoch': ...}
            inner = state.get(key)
            if isinstance(inner, Mapping) and inner and all(isinstance(v, torch.Tensor) for v in inner.values()):
                notes.append(f"weights taken from the checkpoint entry '{key}' of {path.name}")
                state = inner
                break
    if not isinstance(state, Mapping) or not state:
        raise AuditInputError(
            where, f"is not a state dict (a mapping of parameter names to tensors); found {type(state).__name__}"
        )
    for key, value in state.items():
        if not isinstance(key, str) or not isinstance(value, torch.Tensor):
            raise AuditInputError(
                where,
                f"is not a state dict: entry {key!r} holds {type(value).__name__}, expected parameter names → tensors",
            )
    state = dict(state)
    for prefix in _KEY_PREFIXES:
        if all(k.startswith(prefix) for k in state):
            state = {k[len(prefix) :]: v for k, v in state.items()}
            notes.append(
                f"the prefix '{prefix}' of every key in {path.name} was removed (a wrapped module's state dict)"
            )
            break
    return state, file_format, notes


def tensor_shape(shape) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + ")"


def load_weights_into(module: nn.Module, state: Mapping[str, torch.Tensor], where: str, hint: str = "") -> nn.Module:
    """Load `state` into `module` strictly: every missing, unexpected or mis-shaped tensor is named."""
    import torch

    expected = module.state_dict()
    for key, tensor in expected.items():
        if key not in state:
            raise AuditInputError(where, f"tensor '{key}' of the model is missing in the file{hint}")
        found = state[key]
        if tuple(found.shape) != tuple(tensor.shape):
            raise AuditInputError(
                where,
                f"tensor '{key}' has shape {tensor_shape(found.shape)} in the file but the model's is "
                f"{tensor_shape(tensor.shape)}{hint}",
            )
        if tensor.is_floating_point() and not found.is_floating_point():
            raise AuditInputError(where, f"tensor '{key}' holds {found.dtype} values, expected floating point")
        if found.is_floating_point() and not torch.isfinite(found).all():
            raise AuditInputError(where, f"tensor '{key}' holds NaN or infinite values")
    unexpected = [k for k in state if k not in expected]
    if unexpected:
        raise AuditInputError(where, f"the file holds tensor '{unexpected[0]}' that the model does not have{hint}")
    module.load_state_dict({k: v.to(expected[k].dtype) if v.is_floating_point() else v for k, v in state.items()})
    return module.eval()


def module_logits(module: nn.Module, features: np.ndarray, batch_size: int = 4096) -> np.ndarray:
    """The module's outputs on `features` (any shape (n, ...)), in batches, on the module's device."""
    import torch

    module.eval()
    parameter = next(module.parameters(), None)
    device = parameter.device if parameter is not None else torch.device("cpu")
    dtype = parameter.dtype if parameter is not None and parameter.is_floating_point() else torch.float32
    with torch.no_grad():
        outputs = [
            module(torch.as_tensor(np.ascontiguousarray(features[i : i + batch_size]), device=device).to(dtype))
            .float()
            .cpu()
            for i in range(0, len(features), batch_size)
        ]
    return torch.cat(outputs).numpy() if outputs else np.empty((0, 0), dtype=np.float32)


# --------------------------------------------------------------------------------------------
# scikit-learn via skops


def load_skops_estimator(path: Path | str) -> tuple[Any, list[str]]:
    """(fitted estimator, the classes it is made of). Every object the file names is checked against
    the reviewed allow-list of `targets.skops_allowlist` before skops imports or builds anything;
    pickle/joblib files are refused. Call it in an isolated worker (audit/model_audits/user_models.py):
    the estimator's own code runs on the features there."""
    from targets.skops_allowlist import ALLOWED_CLASSES, check_skops_file

    path = Path(path)
    where = f"skops file '{path}'"
    if not path.is_file():
        raise AuditInputError(where, "does not exist or is not a file")
    if not zipfile.is_zipfile(path):  # a pickle / joblib file: never loaded
        raise AuditInputError(
            where,
            "is not a skops file (a zip archive); pickle and joblib files are refused because loading them "
            "runs arbitrary code: save the estimator with skops.io.dump(model, path)",
        )
    classes = check_skops_file(path, where)
    import skops.io as sio

    try:
        untrusted = sio.get_untrusted_types(file=path)
    except Exception as exc:  # a corrupt archive or schema
        raise AuditInputError(
            where, f"could not be read as a skops file ({type(exc).__name__}: {str(exc)[:160]})"
        ) from None
    refused = [t for t in untrusted if t not in ALLOWED_CLASSES]
    if refused:  # skops's view disagrees with the allow-list check: refuse rather than guess
        raise AuditInputError(
            where, f"names type(s) outside the allow-list ({', '.join(refused[:5])}); nothing from the file was loaded"
        )
    try:
        estimator = sio.load(path, trusted=list(untrusted))
    except Exception as exc:
        raise AuditInputError(where, f"could not be loaded ({type(exc).__name__}: {str(exc)[:160]})") from None
    return estimator, classes


def estimator_method(estimator: Any, output: str | None = None) -> tuple[str, str]:
    """(method name, output kind) `estimator_query` would use for a fitted estimator."""
    if output == "labels" and hasattr(estimator, "predict"):
        return "predict", "labels"
    if output == "logits" and hasattr(estimator, "decision_function"):
        return "decision_function", "logits"
    if hasattr(estimator, "predict_proba"):
        return "predict_proba", "probabilities"
    if hasattr(estimator, "predict"):
        return "predict", "labels"
    raise AuditInputError(type(estimator).__name__, "has neither predict_proba nor predict")


def estimator_query(estimator: Any, description: str, output: str | None = None) -> ModelQuery:
    """A fitted scikit-learn-style estimator: `predict_proba` when it has one (and `output` is not
    "labels"), else `predict` (labels only)."""
    if output == "labels" and hasattr(estimator, "predict"):
        return ModelQuery(estimator.predict, "labels", description)
    if output == "logits" and hasattr(estimator, "decision_function"):
        return ModelQuery(estimator.decision_function, "logits", description)
    if hasattr(estimator, "predict_proba"):
        return ModelQuery(estimator.predict_proba, "probabilities", description)
    if hasattr(estimator, "predict"):
        return ModelQuery(estimator.predict, "labels", description)
    raise AuditInputError(description, "has neither predict_proba nor predict")


# --------------------------------------------------------------------------------------------
# ONNX


MAX_ONNX_FILE_BYTES = 2 * 2**30


def check_onnx_file(path: Path, where: str) -> None:
    """Refuse an ONNX graph that reads files besides itself (external tensor data: a path the file
    chooses) before onnxruntime opens it."""
    import onnx
    from onnx.external_data_helper import _get_all_tensors

    if path.stat().st_size > MAX_ONNX_FILE_BYTES:
        raise AuditInputError(where, f"is larger than {MAX_ONNX_FILE_BYTES // 2**30} GiB")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:
        raise AuditInputError(where, f"is not an ONNX model ({type(exc).__name__})") from None
    for tensor in _get_all_tensors(model):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            raise AuditInputError(
                where,
                f"tensor {clip_name(tensor.name)!r} refers to external data (a separate file); "
                "save the model with its weights inside the .onnx file",
            )


def clip_name(name: str, limit: int = 60) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def onnx_session(path: Path | str, output_index: int = 0):
    """(session, input name, output name) of an ONNX graph, on the CPU, one thread. Call it in an
    isolated worker: a graph may loop forever, and only the worker's timeout stops it."""
    path = Path(path)
    where = f"ONNX file '{path}'"
    if not path.is_file():
        raise AuditInputError(where, "does not exist or is not a file")
    check_onnx_file(path, where)
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    try:
        session = onnxruntime.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise AuditInputError(
            where, f"could not be loaded by onnxruntime ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None
    inputs, outputs = session.get_inputs(), session.get_outputs()
    if len(inputs) != 1:
        raise AuditInputError(where, f"has {len(inputs)} inputs; expected one (the features)")
    if not 0 <= output_index < len(outputs):
        raise AuditInputError(where, f"has {len(outputs)} output(s); output index {output_index} does not exist")
    return session, inputs[0].name, outputs[output_index].name


def onnx_run(session, input_name: str, output_name: str, features: np.ndarray, where: str) -> np.ndarray:
    try:
        return session.run([output_name], {input_name: np.ascontiguousarray(features, dtype=np.float32)})[0]
    except Exception as exc:
        raise AuditInputError(where, f"failed on the features ({type(exc).__name__}: {str(exc)[:200]})") from None


def onnx_query(path: Path, output: str = "logits", output_index: int = 0) -> ModelQuery:
    """An ONNX graph run by onnxruntime in *this* process (the Python API; the CLI runs it in a
    worker: audit/model_audits/user_models.py)."""
    session, input_name, output_name = onnx_session(path, output_index)
    where = f"ONNX file '{path}'"
    return ModelQuery(
        lambda x: onnx_run(session, input_name, output_name, x, where), output, f"ONNX model {Path(path).name}"
    )


# --------------------------------------------------------------------------------------------
# live objects (the Python API) and trained reference models


def live_query(model: Any, output: str | None = None, description: str | None = None) -> ModelQuery:
    """A live object from a notebook: an `nn.Module`, a fitted estimator, or a prediction callable.

    A module gives logits; an estimator `predict_proba` (or `predict` = labels); a callable
    returns `output` (default "probabilities").
    """
    torch = sys.modules.get("torch")  # an nn.Module implies torch is loaded
    if torch is not None and isinstance(model, torch.nn.Module):
        return ModelQuery(lambda x: module_logits(model, x), output or "logits", description or type(model).__name__)
    if hasattr(model, "predict_proba") or hasattr(model, "predict"):
        return estimator_query(model, description or type(model).__name__, output)
    if callable(model):
        return ModelQuery(model, output or "probabilities", description or str(getattr(model, "__name__", "function")))
    raise AuditInputError(
        "model", f"expected an nn.Module, a fitted estimator or a callable, got {type(model).__name__}"
    )


def trained_model_logits(model: Any, features: np.ndarray, where: str) -> np.ndarray:
    """Logits (or log-probabilities) of what a user's `train(features, labels, seed)` returned."""
    query = live_query(model, description=where)
    if query.label_only:
        raise AuditInputError(where, "the trained model has no predict_proba: reference models must give scores")
    return query.logits(features).astype(np.float32)
