"""Model architectures that the harness trains as audit targets, shadows and references.

Only layers whose per-sample gradients Opacus supports and that keep samples independent:
no BatchNorm (it mixes examples in a batch, which breaks the DP-SGD per-sample argument).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class MLP(nn.Sequential):
    """Fully connected classifier: Linear → ReLU blocks, then a Linear head emitting logits."""

    def __init__(self, in_features: int, hidden_sizes: Sequence[int], n_classes: int):
        layers: list[nn.Module] = []
        width = in_features
        for hidden in hidden_sizes:
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        layers.append(nn.Linear(width, n_classes))
        super().__init__(*layers)
        self.in_features = in_features
        self.hidden_sizes = tuple(hidden_sizes)
        self.n_classes = n_classes


def build_mlp(in_features: int, hidden_sizes: Sequence[int], n_classes: int, seed: int) -> MLP:
    """An MLP whose initial weights depend only on `seed` (not on global RNG state)."""
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        return MLP(in_features, hidden_sizes, n_classes)
    finally:
        torch.random.set_rng_state(generator_state)
