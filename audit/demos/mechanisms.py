"""Example mechanisms for `audit.dp_validation.mechanism_audit.audit_mechanism` (one correct, one broken).

Each is `mechanism(data, rng) -> float` with three attributes the audit reads:
`mechanism.batched(data, rng, n)` returning n independent outputs at once (the vectorised
protocol), `mechanism.CLAIM = {"epsilon": ε, "delta": δ}` (what it claims), and
`mechanism.DATASETS()` returning a pair of neighbouring datasets to audit it on:

    privacy-audit mechanism-audit --mechanism audit.demos.mechanisms:laplace_count_wrong_scale

Datasets are 1-D arrays of records in {0, 1}; `neighbouring_datasets` builds a pair differing in
one record.

- `laplace_count`: ε-DP count, Laplace noise of scale Δ/ε with Δ = 1 (Dwork et al. 2006).
- `laplace_count_wrong_scale`: the same with scale 1/(4ε), i.e. really 4ε-DP: a bug the audit
  must catch.
- `gaussian_mean`: (ε, δ)-DP mean of n records in [0, 1] under replace-one neighbours
  (Δ = 1/n), classic calibration σ = Δ·√(2 ln(1.25/δ))/ε, valid for ε < 1 (Dwork & Roth 2014,
  Thm A.1).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["gaussian_mean", "laplace_count", "laplace_count_wrong_scale", "neighbouring_datasets"]


def _count(data) -> float:
    return float(np.count_nonzero(np.asarray(data)))


def laplace_count(data, rng: np.random.Generator, epsilon: float = 1.0) -> float:
    """Number of non-zero records + Laplace(1/ε): ε-DP under adding/removing one record."""
    return _count(data) + rng.laplace(0.0, 1.0 / epsilon)


def _laplace_count_batched(data, rng: np.random.Generator, n: int, epsilon: float = 1.0) -> np.ndarray:
    return _count(data) + rng.laplace(0.0, 1.0 / epsilon, size=n)


def _declare(mechanism: Callable[..., float], **attributes: Any) -> None:
    """The attributes the audit reads (`batched`, `CLAIM`, `DATASETS`), set on the function object."""
    vars(mechanism).update(attributes)


_declare(laplace_count, batched=_laplace_count_batched, CLAIM={"epsilon": 1.0, "delta": 0.0})


def laplace_count_wrong_scale(data, rng: np.random.Generator, epsilon: float = 1.0) -> float:
    """BROKEN: claims ε but draws Laplace(1/(4ε)), a quarter of the noise (it is 4ε-DP)."""
    return _count(data) + rng.laplace(0.0, 1.0 / (4 * epsilon))


def _wrong_scale_batched(data, rng: np.random.Generator, n: int, epsilon: float = 1.0) -> np.ndarray:
    return _count(data) + rng.laplace(0.0, 1.0 / (4 * epsilon), size=n)


_declare(laplace_count_wrong_scale, batched=_wrong_scale_batched, CLAIM={"epsilon": 1.0, "delta": 0.0})


def _gaussian_sigma(n_records: int, epsilon: float, delta: float) -> float:
    if not (0 < epsilon < 1):
        raise ValueError(f"epsilon: the classic Gaussian calibration needs 0 < ε < 1, got {epsilon!r}")
    if not (0 < delta < 1):
        raise ValueError(f"delta: must be in (0, 1), got {delta!r}")
    return (1.0 / n_records) * math.sqrt(2 * math.log(1.25 / delta)) / epsilon


def gaussian_mean(data, rng: np.random.Generator, epsilon: float = 0.5, delta: float = 1e-5) -> float:
    """Mean of records clipped to [0, 1] + N(0, σ²), σ = (1/n)·√(2 ln(1.25/δ))/ε: (ε, δ)-DP for
    replace-one neighbours of size n (Dwork & Roth 2014, Thm A.1; needs ε < 1)."""
    x = np.clip(np.asarray(data, dtype=float), 0.0, 1.0)
    return float(x.mean()) + rng.normal(0.0, _gaussian_sigma(x.size, epsilon, delta))


def _gaussian_mean_batched(data, rng, n: int, epsilon: float = 0.5, delta: float = 1e-5) -> np.ndarray:
    x = np.clip(np.asarray(data, dtype=float), 0.0, 1.0)
    return x.mean() + rng.normal(0.0, _gaussian_sigma(x.size, epsilon, delta), size=n)


_declare(gaussian_mean, batched=_gaussian_mean_batched, CLAIM={"epsilon": 0.5, "delta": 1e-5})


def neighbouring_datasets(n_records: int = 100, *, relation: str = "add_remove", seed: int = 0):
    """(dataset_a, dataset_b): n random 0/1 records, and the same with one record of value 1
    added (`relation="add_remove"`, the count's neighbours) or one 0 record replaced by a 1
    (`"replace"`, the mean's neighbours). The changed record is the one that moves the output."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, size=n_records).astype(float)
    if relation == "add_remove":
        return a, np.append(a, 1.0)
    if relation == "replace":
        zeros = np.flatnonzero(a == 0)
        if zeros.size == 0:
            a[0] = 0.0
            zeros = np.array([0])
        b = a.copy()
        b[zeros[0]] = 1.0
        return a, b
    raise ValueError(f"relation: expected 'add_remove' or 'replace', got {relation!r}")


def _count_neighbours():
    return neighbouring_datasets(100, relation="add_remove", seed=0)


def _mean_neighbours():
    return neighbouring_datasets(100, relation="replace", seed=0)


_declare(laplace_count, DATASETS=_count_neighbours)
_declare(laplace_count_wrong_scale, DATASETS=_count_neighbours)
_declare(gaussian_mean, DATASETS=_mean_neighbours)
