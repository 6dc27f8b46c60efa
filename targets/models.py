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


class ImageCNN(nn.Module):
    """A small convolutional classifier for square images given as flat rows (n, C·H·W).

    Two 3×3 convolutions (8 and 16 channels, ReLU), a 2×2 average pool, then the dense head of
    an MLP with `hidden_sizes`. It reshapes each row to (C, H, W) itself, so the harness's 2-D
    feature arrays, splits and trainers need no image-specific path. Layers are ones Opacus
    computes per-sample gradients for; no BatchNorm (it would mix samples).
    """

    def __init__(self, in_features: int, hidden_sizes: Sequence[int], n_classes: int, channels: int = 1):
        super().__init__()
        side = int(round((in_features / channels) ** 0.5))
        if channels * side * side != in_features or side < 2:
            raise ValueError(f"ImageCNN needs {channels}·H·W features with H = W ≥ 2, got {in_features}")
        self.image_shape = (channels, side, side)
        self.features = nn.Sequential(
            nn.Conv2d(channels, 8, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.ReLU(),
            nn.AvgPool2d(2),
        )
        self.head = MLP(16 * (side // 2) ** 2, hidden_sizes, n_classes)
        self.in_features = in_features
        self.hidden_sizes = tuple(hidden_sizes)
        self.n_classes = n_classes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x.reshape(x.shape[0], *self.image_shape)).flatten(1))


ARCHITECTURES = {"mlp": MLP, "cnn": ImageCNN}


def build_model(
    architecture: str, in_features: int, hidden_sizes: Sequence[int], n_classes: int, seed: int
) -> nn.Module:
    """A model of `architecture` ("mlp" | "cnn") whose initial weights depend only on `seed`."""
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        return ARCHITECTURES[architecture](in_features, hidden_sizes, n_classes)
    finally:
        torch.random.set_rng_state(generator_state)
