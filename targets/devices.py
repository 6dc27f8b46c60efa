"""Choosing where tensors live. `auto` takes CUDA when PyTorch sees a GPU, else the CPU."""
from __future__ import annotations

import torch

from audit.errors import AuditInputError


def resolve_device(requested: str) -> torch.device:
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        raise AuditInputError("--device", "cuda was requested but PyTorch sees no CUDA GPU (use auto or cpu)")
    if requested not in ("cpu", "cuda"):
        raise AuditInputError("--device", f"expected auto, cpu or cuda, got {requested!r}")
    return torch.device(requested)
