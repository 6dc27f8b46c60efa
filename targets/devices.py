"""Choosing where tensors live. `auto` takes CUDA when PyTorch sees a GPU, else the CPU."""

from __future__ import annotations

from contextlib import contextmanager

import torch

from audit.errors import AuditInputError


def resolve_device(requested: str | torch.device = "auto") -> torch.device:
    """ "auto" → CUDA when PyTorch sees a GPU, else the CPU; "cpu", "cuda" or "cuda:N" as asked.

    The one device resolver of the harness (CLI, runner and the vectorized trainer). Asking for
    CUDA without a GPU, or for anything else, is an `AuditInputError` (a ValueError) on --device.
    """
    if isinstance(requested, torch.device):
        requested = str(requested)
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cpu":
        return torch.device("cpu")
    if isinstance(requested, str) and requested.startswith("cuda"):
        if not torch.cuda.is_available():
            raise AuditInputError(
                "--device", f"{requested} was requested but PyTorch sees no CUDA GPU (use auto or cpu)"
            )
        try:
            return torch.device(requested)
        except RuntimeError:
            pass
    raise AuditInputError("--device", f"expected auto, cpu or cuda, got {requested!r}")


@contextmanager
def torch_threads(n_threads: int | None):
    """Run a block with `n_threads` intra-op threads (None: unchanged), restoring the setting after.

    Small models make many tiny kernels: on a shared 2-core machine a second OpenMP thread costs
    more in barriers than it gains (measured 10x slower for single-model Opacus training, 6x for the
    DP VAE), so single-model training runs with one.
    """
    if n_threads is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(n_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
