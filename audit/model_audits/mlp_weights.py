"""The harness's own `MLP` built from a user's weights file when no factory is given: its hidden sizes read
off the state dict's shapes and every tensor checked before loading.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import torch

from targets.model_sources import load_weights_into
from targets.models import MLP


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
    guess = _guess_hidden_sizes(state)
    # The strict check every torch weights file gets (targets.model_sources), told which MLP was expected.
    hint = (
        f" (expected hidden_sizes {list(hidden_sizes)}: the MLP for {in_features} feature column(s) and "
        f"{n_classes} class(es))"
    )
    if guess is not None and guess != list(hidden_sizes):
        hint += f"; the file looks like hidden_sizes {guess}: set training.hidden_sizes to match"
    load_weights_into(model, state, where, hint)
    return model
