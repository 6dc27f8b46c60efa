"""The memory a command's counts imply, estimated before any work starts (limits.check_memory refuses it).

Each estimate counts only the largest arrays the command will hold at once (the data, the models
trained at the same time with their optimizer state and Opacus's per-sample gradients, the score
matrices, the logits of a language model), so it is a *lower* estimate: a refusal is certain to be
justified (the command could not have finished here), an acceptance does not promise that it fits.
Bytes are float32 for models (what torch trains in) and float64 for tables and scores (numpy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from audit.machinery.limits import check_memory

__all__ = [
    "mlp_parameters",
    "tabular_run_bytes",
    "federated_run_bytes",
    "text_run_bytes",
    "language_model_bytes",
    "synth_check_bytes",
    "bench_bytes",
    "trained_models_per_target",
    "check_run_memory",
    "check_text_run_memory",
]

F32, F64 = 4, 8
# A tabular run holds its table several times over: the frame, the encoded features, the splits.
TABLE_COPIES = 4
# Per model trained at once: weights, gradients, optimizer state (momentum / Adam's two moments).
MODEL_COPIES = 4
# One of the built-in datasets when the config does not generate its own.
BUILTIN_SHAPES = {"breast_cancer": (569, 30), "digits": (1797, 64)}
# The default synthetic table: 10 numeric + 4 one-hot categorical columns (3–6 levels each).
SYNTHETIC_FEATURES = 30


def mlp_parameters(in_features: int, hidden_sizes: Sequence[int], n_classes: int) -> int:
    """Weights and biases of the MLP targets/models.py builds."""
    widths = [int(in_features), *map(int, hidden_sizes), int(n_classes)]
    return sum(a * b + b for a, b in zip(widths, widths[1:]))


def _training_bytes(parameters: int, batch: int, activations_per_row: int) -> int:
    """One model in training: its copies, Opacus's per-sample gradients (batch × parameters), activations."""
    return parameters * F32 * MODEL_COPIES + batch * parameters * F32 + batch * activations_per_row * F32 * 2


def tabular_run_bytes(config, n_rows: int, n_features: int, n_classes: int = 2, workers: int = 1) -> int:
    """`run` on a table: data, the models trained at once, the attacks' score matrices."""
    training, attacks = config.training, config.attacks
    parameters = mlp_parameters(n_features, training.hidden_sizes, n_classes)
    batch = min(int(training.batch_size), n_rows)
    per_model = _training_bytes(parameters, batch, sum(training.hidden_sizes) + n_features)
    at_once = max(1, workers) * max(1, int(attacks.models_per_task or 1))
    n_targets = len(config.privacy.epsilons)
    models_per_target = 1 + trained_models_per_target(attacks)
    scores = models_per_target * n_rows * F64 * 2 * n_targets  # per-model scores of every candidate, kept
    # population samples scored by every reference model (RMIA's knob, when an attack of the run reads it)
    population = int(getattr(attacks, "rmia_population", 0)) * _knob_value(attacks, "n_reference_models")
    return n_rows * n_features * F64 * TABLE_COPIES + at_once * per_model + scores + population * F64


def _knob_value(attacks, name: str) -> int:
    """A model-count knob's value when one of the chosen attacks reads it (attacks/registry.py), else 0."""
    from attacks.registry import knobs_of

    return int(getattr(attacks, name)) if any(k.name == name for k in knobs_of(attacks.names)) else 0


def trained_models_per_target(attacks) -> int:
    """Shadow / reference models the chosen attacks train per target: each knob the attack classes declare
    with `counts_models` (attacks/registry.py), counted once however many attacks share it."""
    from attacks.registry import knobs_of

    return sum(int(getattr(attacks, k.name)) for k in knobs_of(attacks.names) if k.counts_models)


def federated_run_bytes(config, n_rows: int, n_features: int, n_classes: int = 2) -> int:
    """A federated run: data, every client's model and update in a round, the per-round history."""
    federated, training = config.federated, config.training
    parameters = mlp_parameters(n_features, training.hidden_sizes, n_classes)
    clients = int(federated.n_clients)
    batch = min(int(training.batch_size), max(1, n_rows // clients))
    per_client = parameters * F32 * MODEL_COPIES
    history = int(federated.rounds) * clients * F64 * 4  # per-round, per-client norms and scores
    return (
        n_rows * n_features * F64 * TABLE_COPIES
        + clients * per_client
        + _training_bytes(parameters, batch, sum(training.hidden_sizes) + n_features)
        + history
    )


def _transformer_parameters(vocab: int, d_model: int, n_layers: int, max_length: int) -> int:
    """TinyCausalLM (targets/text_models.py): token and position embeddings, 12·d² + 13·d per block, a head."""
    return vocab * d_model * 2 + vocab + max_length * d_model + n_layers * (12 * d_model * d_model + 13 * d_model)


def text_run_bytes(text) -> int:
    """`run --preset text`: one causal LM in DP training with its logits, per-sample gradients and corpus."""
    vocab, width, layers, length = int(text.vocab_size), int(text.d_model), int(text.n_layers), int(text.max_length)
    parameters = _transformer_parameters(vocab, width, layers, length)
    batch = min(
        int(text.batch_size), int(text.n_candidates) + sum(text.repetitions) * int(text.canaries_per_repetition)
    )
    logits = batch * length * vocab * F32 * 3  # logits, their softmax, the gradient
    attention = batch * int(text.n_heads) * length * length * F32 * 2 * layers
    hidden = batch * length * width * F32 * 10 * layers
    documents = (int(text.n_candidates) + int(text.n_pool) + int(text.n_test)) * length * F64 * 2
    return parameters * F32 * MODEL_COPIES + batch * parameters * F32 + logits + attention + hidden + documents


def language_model_bytes(parameters: int, vocab: int, max_length: int, batch_size: int) -> int:
    """`audit-model --hf-model`: the model in float32 and one batch's logits (with their log-softmax)."""
    return int(parameters) * F32 + int(batch_size) * int(max_length) * int(vocab) * F32 * 3


def synth_check_bytes(n_train: int, n_holdout: int, n_synthetic: int, n_columns: int, table_bytes: int) -> int:
    """synth-check: the three tables (as read, and encoded), and the blocks of the distance search:
    256 query rows × every synthetic row (Gower distances), 1024 × 1024 float32 tiles."""
    encoded = (n_train + n_holdout + n_synthetic) * max(1, n_columns) * F64 * TABLE_COPIES
    return table_bytes + encoded + 256 * n_synthetic * F64 * 3 + 1024 * 1024 * F32 * 4


def bench_bytes(
    n_models: int, n_rows: int = 1000, in_features: int = 30, hidden_sizes: Sequence[int] = (256, 256), batch: int = 64
) -> int:
    """bench: `n_models` MLPs trained at once by the vectorized trainer, each with per-sample gradients."""
    parameters = mlp_parameters(in_features, hidden_sizes, 2)
    return n_models * _training_bytes(parameters, batch, sum(hidden_sizes) + in_features) + n_rows * in_features * F64


def _data_shape(config) -> tuple[int, int] | None:
    data = config.data
    if data.source == "synthetic":
        return int(data.n_rows), SYNTHETIC_FEATURES
    return BUILTIN_SHAPES.get(data.source)


def check_run_memory(config, workers: int | None = None) -> None:
    """`run` (tabular or federated): refuse, before anything starts, counts that cannot fit in memory.
    A data file's shape is known only once it is read: its run is checked by its config's counts at
    the file's own size (every cell at least one byte on disk)."""
    shape = _data_shape(config)
    if shape is None:  # a file: bound its shape from below by its size
        import os

        try:
            size = os.stat(config.data.path).st_size
        except (OSError, TypeError):
            return  # the data reader names a missing file
        shape = (max(1, size // 64), 8)
    n_rows, n_features = shape
    if config.federated is not None:
        needed = federated_run_bytes(config, n_rows, n_features)
        what = (
            f"federated run: {config.federated.n_clients:,} clients × {n_rows:,} rows, "
            f"{config.federated.rounds:,} rounds"
        )
    else:
        needed = tabular_run_bytes(config, n_rows, n_features, workers=workers or 1)
        what = (
            f"run: {n_rows:,} rows × {n_features} features, batch {config.training.batch_size:,}, "
            f"{len(config.privacy.epsilons)} targets × {1 + trained_models_per_target(config.attacks):,} models"
        )
    check_memory(needed, "--config", what)


def check_text_run_memory(config) -> None:
    """`run --preset text`: refuse a language-model config whose training cannot fit in memory."""
    text = config.text
    check_memory(
        text_run_bytes(text),
        "--config",
        f"text run: vocabulary {text.vocab_size:,} × {text.max_length:,} tokens × batch {text.batch_size:,}, "
        f"{text.n_layers} layers of width {text.d_model:,}",
    )


def human(n: float) -> str:
    """Bytes in words (for messages and the docs)."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n / 1024:,.1f} KiB" if math.isfinite(n) else str(n)
