"""Finished pieces of a sweep, on disk, so an interrupted `run` can be resumed.

Everything lives in the run's staging folder under `checkpoints/`, one folder per target ε. Each
piece — the trained target's weights and metadata, the reference and shadow models' outputs, each
attack's scores, the finished target record — is written to a temporary name and renamed, so a
SIGKILL at any instant leaves either the whole piece or none of it. Weights are loaded back with
`torch.load(weights_only=True)`: nothing is unpickled.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from audit.machinery.run_directory import write_atomic as _atomic
from audit.machinery.run_directory import write_json_atomic


class TargetCheckpoints:
    """The checkpoints of one target (one ε of the sweep)."""

    def __init__(self, folder: Path):
        self.folder = folder

    def save_json(self, name: str, payload: Any) -> None:
        write_json_atomic(self.folder / f"{name}.json", payload)

    def load_json(self, name: str) -> Any | None:
        path = self.folder / f"{name}.json"
        return json.loads(path.read_text()) if path.is_file() else None

    def save_arrays(self, name: str, arrays: dict[str, np.ndarray]) -> None:
        def write(temp: str) -> None:
            with open(temp, "wb") as handle:
                np.savez(handle, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as allow_pickle

        _atomic(self.folder / f"{name}.npz", write)

    def load_arrays(self, name: str) -> dict[str, np.ndarray] | None:
        path = self.folder / f"{name}.npz"
        if not path.is_file():
            return None
        with np.load(path, allow_pickle=False) as stored:
            return {key: stored[key] for key in stored.files}

    def save_state_dict(self, name: str, state: dict[str, torch.Tensor]) -> None:
        _atomic(self.folder / f"{name}.pt", lambda temp: torch.save(state, temp))

    def load_state_dict(self, name: str) -> dict[str, torch.Tensor] | None:
        path = self.folder / f"{name}.pt"
        return torch.load(path, weights_only=True) if path.is_file() else None


class ArrayCache(MutableMapping):
    """A mapping of name → dict of arrays, kept in memory and mirrored to a target's checkpoints.

    Attacks store what they train (reference and shadow model outputs) through this mapping; a
    resumed run finds them here instead of training them again.
    """

    def __init__(self, checkpoints: TargetCheckpoints | None):
        self._memory: dict[str, Any] = {}
        self._checkpoints = checkpoints

    def __getitem__(self, key: str) -> Any:
        if key not in self._memory and self._checkpoints is not None:
            stored = self._checkpoints.load_arrays(key)
            if stored is not None:
                self._memory[key] = stored
        return self._memory[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if self._checkpoints is not None and isinstance(value, dict):
            self._checkpoints.save_arrays(key, value)
        self._memory[key] = value

    def __delitem__(self, key: str) -> None:
        del self._memory[key]

    def __contains__(self, key: object) -> bool:
        try:
            self[key]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self._memory)

    def __len__(self) -> int:
        return len(self._memory)
