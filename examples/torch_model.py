"""The architecture of the PyTorch example: `audit-model --factory examples.torch_model:build`.

A factory is a function with no arguments that returns the `nn.Module` your weights file fits;
audit-model calls it in an isolated child process and loads `--weights` into it (every tensor's
name and shape checked).
"""

from torch import nn

N_FEATURES = 8


def build() -> nn.Module:
    return nn.Sequential(nn.Linear(N_FEATURES, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
