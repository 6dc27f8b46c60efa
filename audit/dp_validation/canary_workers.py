"""Running the user's trainer for the canary audits: isolated worker tasks (train once, return log
class probabilities at the scored points), the pool, seeds, and input checks made before any run."""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import numpy as np
from scipy import special

from audit.dp_validation.claims import declared_claim
from audit.errors import AuditInputError
from audit.machinery.workers import user_code

# Seconds one training run of the user's code may take in its worker before it counts as hung.
TRAIN_TIMEOUT_S = 900.0


def _trainer_name(trainer: str | Callable) -> str:
    if isinstance(trainer, str):
        return trainer
    return f"{getattr(trainer, '__module__', '?')}:{getattr(trainer, '__qualname__', repr(trainer))}"


def _load_trainer(trainer: str | Callable) -> Callable:
    """In a worker: the user's function (loaded from "module:function", or the callable itself)."""
    if isinstance(trainer, str):
        from audit.machinery.user_code import load_user_function

        with user_code("trainer", f"module of trainer {trainer}"):
            trainer = load_user_function(trainer, "trainer")
    return _check_trainer(trainer)


def train_and_score_task(
    trainer: str | Callable, X: np.ndarray, y: np.ndarray, seed: int, points: np.ndarray
) -> np.ndarray:
    """A worker task: train the user's model once on (X, y) with `seed`, return its (n_points, C)
    log class probabilities at `points` (plain float64: the model never leaves the worker)."""
    function = _load_trainer(trainer)
    with user_code("trainer", f"trainer {_trainer_name(trainer)}"):
        model = function(X.copy(), y.copy(), int(seed))
    log_probs = _log_probabilities(model, np.asarray(points, dtype=np.float32))
    _check_model_output(log_probs, int(np.max(y)) + 1)
    return log_probs


def _check_model_output(log_probs: np.ndarray, n_classes: int) -> None:
    """A returned model must answer with one finite distribution over the data's classes per point:
    NaN probabilities, infinite logits or extra classes would silently score as "no membership
    signal" and let a broken trainer pass (exit 2 instead, naming what was wrong)."""
    if log_probs.shape[1] != n_classes:
        raise AuditInputError(
            "trainer",
            f"the returned model outputs {log_probs.shape[1]} classes but its "
            f"training labels have {n_classes} (0..{n_classes - 1})",
        )
    bad = ~np.isfinite(log_probs) & ~np.isneginf(log_probs)  # p = 0 (log −inf) is a valid probability
    if bad.any() or np.isneginf(log_probs).all(axis=1).any():
        raise AuditInputError(
            "trainer",
            f"the returned model's outputs are not finite probabilities at "
            f"{int(bad.any(axis=1).sum() or 1)} of {log_probs.shape[0]} points (NaN or infinite logits)",
        )
    total = np.exp(log_probs).sum(axis=1)
    if not np.allclose(total, 1.0, atol=1e-3):
        raise AuditInputError(
            "trainer",
            "the returned model's predict_proba rows do not sum to 1 "
            f"(e.g. {float(total[np.argmax(np.abs(total - 1))]):.4g})",
        )


def declared_claim_task(trainer: str | Callable) -> tuple[Any, str]:
    """A worker task: the trainer's CLAIM as plain data (numbers and strings only), and where it was."""
    declared, where = declared_claim(_load_trainer(trainer))
    if isinstance(declared, dict):
        declared = {
            str(k): (v if isinstance(v, (bool, int, float, str, type(None))) else repr(v)) for k, v in declared.items()
        }
    elif declared is not None and not isinstance(declared, (bool, int, float, str)):
        declared = repr(declared)
    return declared, where


def _train_many(pool, trainer, jobs: list[tuple[np.ndarray, np.ndarray, int, np.ndarray]]) -> list[np.ndarray]:
    """Log-probabilities of each (X, y, seed, points) job, trained in `pool`'s isolated workers.

    `pool` is anything with WorkerPool's `map(function, tasks)` (an executor of issue 14 fits):
    results come back in job order, each depending only on its seed.
    """
    return pool.map(train_and_score_task, [(trainer, X, y, seed, points) for X, y, seed, points in jobs])


@contextmanager
def _pool_for(trainer, pool, workers: int | None, timeout: float | None):
    """`pool` when given, else a WorkerPool of `workers` (default: the cores) for this audit."""
    if pool is not None:
        yield pool
        return
    from audit.machinery.workers import WorkerPool, default_workers

    n = default_workers() if workers is None else workers
    with WorkerPool(n, name="trainer", timeout=timeout, what=f"trainer {_trainer_name(trainer)}") as own:
        yield own


def _log_probabilities(model, X: np.ndarray) -> np.ndarray:
    """(n, C) log class probabilities from any supported model type (float64)."""
    try:
        # A torch model means torch is loaded; a numpy trainer's worker never imports it (~1.5 s of CPU).
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(model, torch.nn.Module):
            model.eval()
            param = next(model.parameters(), None)
            device = param.device if param is not None else torch.device("cpu")
            dtype = param.dtype if param is not None and param.is_floating_point() else torch.float32
            with torch.no_grad():
                out = model(torch.as_tensor(X, dtype=dtype, device=device))
            logits = out.detach().double().cpu().numpy()
            return special.log_softmax(np.asarray(logits), axis=1)
    except AuditInputError:
        raise
    except Exception as exc:
        raise AuditInputError(
            "trainer", f"the returned torch model failed on the canary: {type(exc).__name__}: {exc}"
        ) from None
    if callable(getattr(model, "logits", None)):
        source, fn = "logits", model.logits
    elif callable(getattr(model, "predict_proba", None)):
        source, fn = "predict_proba", model.predict_proba
    else:
        raise AuditInputError(
            "trainer",
            f"returned a {type(model).__name__}, which is neither a torch nn.Module nor has "
            ".logits(features) or .predict_proba(features)",
        )
    try:
        out = np.asarray(fn(X), dtype=float)
    except Exception as exc:
        raise AuditInputError("trainer", f"model.{source}(features) raised {type(exc).__name__}: {exc}") from None
    if out.ndim != 2 or out.shape[0] != X.shape[0]:
        raise AuditInputError(
            "trainer", f"model.{source}(features) returned shape {out.shape}, expected ({X.shape[0]}, classes)"
        )
    if source == "logits":
        return special.log_softmax(out, axis=1)
    with np.errstate(divide="ignore"):
        return np.log(np.clip(out, 0.0, None))


def _distinct_seeds(seed: int, stream: int, n: int) -> list[int]:
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), stream]))
    seeds: list[int] = []
    seen: set[int] = set()
    while len(seeds) < n:
        for s in rng.integers(0, 2**31 - 1, size=n - len(seeds)):
            if int(s) not in seen:
                seen.add(int(s))
                seeds.append(int(s))
    return seeds


def _pilot_labels(pool, trainer, X_base, y_base, points, exclude, pilot_seeds, n_classes) -> np.ndarray:
    """For each point, the class that pilot models (trained without canaries) find least likely:
    the smallest median log-probability over the pilots (the median, because one noisy pilot
    can put a log-probability of −10⁴ on a class the others all predict)."""
    per_pilot = []
    points = np.asarray(points, dtype=np.float32)
    for log_probs in _train_many(pool, trainer, [(X_base, y_base, s, points) for s in pilot_seeds]):
        if log_probs.shape[1] < n_classes:
            raise AuditInputError(
                "trainer", f"the model outputs {log_probs.shape[1]} classes, the labels have {n_classes}"
            )
        per_pilot.append(np.nan_to_num(log_probs[:, :n_classes], nan=0.0, neginf=-1e300))
    median = np.median(np.stack(per_pilot), axis=0)
    if exclude is not None:
        median[np.arange(len(points)), exclude] = np.inf
    return np.argmin(median, axis=1)


def _check_count(option: str, value, minimum: int, parameter: str) -> int:
    """A count in the range table of audit.machinery.limits under `option` (its lower end raised to
    `minimum`); errors name the library `parameter` (the command shows its flag)."""
    from audit.machinery.limits import COUNT_LIMITS, check_count

    if option in COUNT_LIMITS:
        return check_count(option, value, low=minimum, where=parameter)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise AuditInputError(parameter, f"expected an integer ≥ {minimum}, got {value!r}")
    return int(value)


# Bytes one (run × canary) score costs across the arrays an audit keeps (scores, coins, masks,
# copies while sorting), and one cell of the generated table (float32 features, copied per task).
_BYTES_PER_SCORE = 64
_BYTES_PER_ROW = 4 * 64


def _check_canary_memory(mode: str, n_models: int, n_canaries: int, n_rows: int) -> None:
    from audit.machinery.limits import check_memory

    runs = n_models * (2 if mode == "multi" else 1) * (1.25 if mode == "profile" else 1)
    per_run = n_canaries if mode in ("multi-canary", "one-run") else 1
    needed = runs * max(per_run, 1) * _BYTES_PER_SCORE + n_rows * _BYTES_PER_ROW * 8
    if mode == "one-run":
        needed = n_canaries * _BYTES_PER_SCORE + (n_rows + n_canaries) * _BYTES_PER_ROW * 8
    check_memory(
        needed,
        "n_models" if mode != "one-run" else "n_canaries",
        f"canary-audit --mode {mode} with {n_models:,} runs, {n_canaries:,} canaries and {n_rows:,} rows",
    )


def _check_trainer(trainer):
    if isinstance(trainer, str):
        if ":" not in trainer:
            raise AuditInputError("trainer", f"expected module:function, got {trainer!r}")
        return trainer
    if not callable(trainer):
        raise AuditInputError("trainer", f"expected a callable train(features, labels, seed), got {trainer!r}")
    return trainer
