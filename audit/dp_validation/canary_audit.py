"""Canary audits of DP training code: does the trainer leak more about one record than it claims?

The user's training function is treated as a black-box mechanism `M(dataset) -> model`. We
insert a *canary* record that is easy to recognise if memorised, train many models with it and
many without, score the canary on each model (by its scaled logit ln(p_y/(1 − p_y)), which
orders models exactly as −loss does without saturating, see `canary_scores`), and bound ε from
how well a threshold on that score tells the two groups apart (Jagielski, Ullman, Oprea 2020,
"Auditing Differentially Private Machine Learning: How Private is Private SGD?", arXiv
2006.07709; Nasr et al. 2021, "Adversary Instantiation", arXiv 2101.04535). A lower bound
strictly above the claimed ε is a *violation*: with the stated confidence, the code is not as
private as it says. A bound of 0 proves nothing: this canary and this many models found no
evidence against the claim.

The audits:

* `profile_canary_audit` (the default): independent runs with one column canary each; one
  threshold rule's Clopper-Pearson error rates tested against the claim's whole trade-off curve
  (`audit.statistics.tradeoff_curves`), which has power at moderate FPR where a test of the single
  (ε, δ) point has none.
* `multi_canary_audit`: many runs × column canaries, Steinke et al.'s one-run bound over all slots.
* `multi_run_canary_audit`: K models with one canary, K without; threshold and direction chosen
  on half of the models, Clopper-Pearson bound on the other half (`threshold_audit`).
* `one_run_canary_audit`: m canaries, each inserted by an independent fair coin, ONE training
  run; the one-run bound of Steinke, Nasr, Jagielski 2023 (arXiv 2305.08846). Cheap but loose.
* The white-box (Dirac gradient canary) audit lives in `audit.dp_validation.whitebox_audit`:
  a black-box `train(features, labels, seed)` cannot be given a gradient canary.

User trainer protocol (what `--trainer module:function` names):
`train(features: np.ndarray (n, d) float32, labels: np.ndarray (n,) int64, seed: int) -> model`,
where model is a torch `nn.Module` returning logits, or has `.logits(features) -> (n, C)`, or
`.predict_proba(features) -> (n, C)`. The trainer's module (or the function itself) may define
`CLAIM = {"epsilon": ε, "delta": δ}` or `CLAIM = {"noise_multiplier": σ, "sample_rate": q,
"steps": T, "delta": δ}` (ε then from the PLD accountant); `--claimed-epsilon/--delta` override.
The trainer must handle any number of feature columns: the out-of-distribution canary adds one.

Canary labels come from *pilot* models trained without any canary, on seeds none of the audited
runs uses (5 for a multi-run audit, 1 for a one-run audit): the canary gets the class the pilots
find least likely there, so that models which did not see it mispredict it consistently. The
label is fixed before any audited model is trained, so the threshold test stays valid.
"""
from __future__ import annotations

import math
import sys
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from audit.statistics.epsilon_bounds import epsilon_lower_bound_one_run
from audit.errors import AuditInputError
from audit.dp_validation.claims import (
    PrivacyClaim,
    claim_from_declaration,
    declared_claim,
    resolve_claim,
    validate_claim,
)
from audit.dp_validation.mode_power import canary_mode_power
from audit.dp_validation.scope import apply_power, claim_verdict, profile_verdict
from audit.machinery.workers import user_code
from audit.statistics.audit_ceilings import (
    canaries_needed_one_run,
    ceiling_one_run,
    runs_needed_threshold_audit,
)
from audit.statistics.threshold_audit import threshold_audit

__all__ = [
    "CANARY_KINDS",
    "Canary",
    "PrivacyClaim",
    "canary_scores",
    "make_canary",
    "make_canaries",
    "multi_canary_audit",
    "multi_run_canary_audit",
    "one_run_canary_audit",
    "profile_canary_audit",
    "resolve_claim",
    "run_canary_audit",
]

CANARY_KINDS = ("mislabeled", "out_of_distribution")
AUDIT_KINDS = CANARY_KINDS + ("dirac",)
AUDIT_MODES = ("profile", "multi-canary", "multi", "one-run")
# Per-mode defaults of --models and --canaries (None where the mode does not use it).
MODE_DEFAULTS = {"profile": (48000, None), "multi-canary": (200, 32), "multi": (200, None), "one-run": (None, 200)}
STATISTICS = ("scaled_logit", "loss")
# Multi-run statistics: the two above, and the gain of the scaled logit from the canary's base point
# to the canary (out-of-distribution canaries only; the default for them, see `multi_run_canary_audit`).
MULTI_RUN_STATISTICS = STATISTICS + ("scaled_logit_gain",)
# How far out the out-of-distribution canaries sit, in units of the largest distance of any real
# record from the data mean.
OOD_SCALE = 100.0
# Pilot models that pick the canary's label in a multi-run audit (one in a one-run audit).
PILOT_MODELS = 5
# Scales (× data radius) of the column canaries the pilot runs compare (`multi_canary_audit`).
COLUMN_CANARY_SCALES = (1.0, 10.0, 100.0)
# Scales (× data radius) of the profile audit's column canary the pilot runs compare (`profile_canary_audit`).
PROFILE_CANARY_SCALES = (0.1, 0.3, 1.0)
# Values (absolute) of the profile audit's one-class canary the pilot runs compare: 1 puts as much
# of the canary's gradient on its weights as on the bias (`one_class_canary`).
PROFILE_ONE_CLASS_VALUES = (1.0,)
# Seconds one training run of the user's code may take in its worker before it counts as hung.
TRAIN_TIMEOUT_S = 900.0

# Independent seed streams derived from the one user seed.
_STREAM_CANARY, _STREAM_MODELS, _STREAM_COINS, _STREAM_DIRAC = range(4)


# --------------------------------------------------------------------------------------------------
# Canaries
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Canary:
    """One canary record and how the audit's training sets are built around it.

    `features` lives in the audit's feature space: the data's d columns, or d + 1 when
    `adds_feature` (the out-of-distribution canary: every real record gets an extra column of
    zeros, the canary a large value there).
    """

    kind: str
    features: np.ndarray
    label: int
    adds_feature: bool
    source_row: int | None = None

    def base_dataset(self, features: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The real records in the canary's feature space (without the canary)."""
        if self.adds_feature:
            features = np.hstack([features, np.zeros((features.shape[0], 1), dtype=features.dtype)])
        return features, labels

    def dataset(self, features: np.ndarray, labels: np.ndarray, include: bool) -> tuple[np.ndarray, np.ndarray]:
        """The training set of one audited run: the real records, plus the canary if `include`."""
        X, y = self.base_dataset(features, labels)
        if not include:
            return X, y
        return (np.vstack([X, self.features[None, :].astype(X.dtype)]),
                np.append(y, np.asarray(self.label, dtype=y.dtype)))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "features": [float(v) for v in self.features], "label": int(self.label),
                "adds_feature": self.adds_feature, "source_row": self.source_row}


def _validate_data(features, labels) -> tuple[np.ndarray, np.ndarray, int]:
    try:
        X = np.ascontiguousarray(np.asarray(features, dtype=np.float32))
    except (TypeError, ValueError):
        raise AuditInputError("features", "expected a numeric (n, d) array") from None
    y_raw = np.asarray(labels)
    if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 1:
        raise AuditInputError("features", f"expected an (n, d) array with n ≥ 2 and d ≥ 1, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise AuditInputError("features", f"{int((~np.isfinite(X)).sum())} value(s) are NaN or infinite")
    if y_raw.shape != (X.shape[0],):
        raise AuditInputError("labels", f"expected shape ({X.shape[0]},) to match the features, got {y_raw.shape}")
    if y_raw.dtype.kind not in "iub" and not (y_raw.dtype.kind == "f" and np.all(y_raw == np.round(y_raw))):
        raise AuditInputError("labels", f"expected integer class indices 0..C-1, got dtype {y_raw.dtype}")
    y = y_raw.astype(np.int64)
    if y.min() < 0:
        raise AuditInputError("labels", f"expected class indices ≥ 0, got {int(y.min())}")
    n_classes = int(y.max()) + 1
    if np.unique(y).size < 2:
        raise AuditInputError("labels", "need at least two classes")
    return X, y, n_classes


def _data_radius(X: np.ndarray) -> tuple[np.ndarray, float]:
    centre = X.mean(axis=0)
    radius = float(np.linalg.norm(X - centre, axis=1).max())
    return centre, (radius if radius > 0 else 1.0)


def _pick_label(rng: np.random.Generator, n_classes: int, exclude: int | None) -> int:
    choices = [c for c in range(n_classes) if c != exclude]
    return int(rng.choice(choices))


def make_canary(kind: str, features, labels, seed: int, *, label: int | None = None,
                scale: float = OOD_SCALE) -> Canary:
    """One canary record of `kind` for the dataset (features, labels).

    * "mislabeled": a copy of a random real record with a different label (the given `label`,
      else a random other class): in-distribution, fitted only by memorisation.
    * "out_of_distribution": a record off the data's support: the audit appends a feature column
      that is 0 for every real record; the canary is the data mean with `scale` × (largest
      distance of a real record from the mean) in that column, labelled `label` (else a random
      class). Its first-layer weights on that column are touched by no other record, so only the
      canary and the DP noise move them: a black-box stand-in for Nasr et al.'s (2023, arXiv
      2302.07956) gradient canary. (A point far out along a random direction of the existing
      columns, the textbook choice, shares those weights with every record; under per-sample
      clipping the record's own influence then drowns in the run-to-run variation caused by
      the others, and a trainer with a tenth of the claimed noise is not detected.)
    """
    X, y, n_classes = _validate_data(features, labels)
    if kind not in CANARY_KINDS:
        raise AuditInputError("--kind", f"expected one of {', '.join(CANARY_KINDS)}, got {kind!r}")
    if label is not None and not (0 <= int(label) < n_classes):
        raise AuditInputError("label", f"expected a class index in 0..{n_classes - 1}, got {label!r}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), _STREAM_CANARY]))
    if kind == "mislabeled":
        row = int(rng.integers(X.shape[0]))
        if label is not None and int(label) == int(y[row]):
            raise AuditInputError("label", f"a mislabeled canary needs a label other than the record's own ({int(y[row])})")
        lab = int(label) if label is not None else _pick_label(rng, n_classes, int(y[row]))
        return Canary(kind, X[row].copy(), lab, adds_feature=False, source_row=row)
    if not (math.isfinite(scale) and scale > 0):
        raise AuditInputError("scale", f"must be > 0, got {scale!r}")
    centre, radius = _data_radius(X)
    point = np.append(centre, scale * radius).astype(np.float32)
    lab = int(label) if label is not None else _pick_label(rng, n_classes, None)
    return Canary(kind, point, lab, adds_feature=True)


def make_canaries(kind: str, features, labels, m: int, seed: int, *, scale: float = OOD_SCALE):
    """m canaries for a one-run audit: (points (m, d), default labels (m,), source rows or None).

    "mislabeled": copies of m distinct real records, each with a random other label.
    "out_of_distribution": m points at `scale` × the data radius from the mean along independent
    random directions, random labels (one run cannot give each its own extra column).
    """
    X, y, n_classes = _validate_data(features, labels)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), _STREAM_CANARY]))
    if kind == "mislabeled":
        if m > X.shape[0]:
            raise AuditInputError("--canaries", f"mislabeled canaries copy distinct records: at most {X.shape[0]}, got {m}")
        rows = rng.choice(X.shape[0], size=m, replace=False)
        shift = rng.integers(1, n_classes, size=m)  # a different class, uniformly
        return X[rows].copy(), (y[rows] + shift) % n_classes, rows
    if kind == "out_of_distribution":
        centre, radius = _data_radius(X)
        directions = rng.normal(size=(m, X.shape[1]))
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        points = (centre + scale * radius * directions).astype(np.float32)
        return points, rng.integers(0, n_classes, size=m), None
    raise AuditInputError("--kind", f"expected one of {', '.join(CANARY_KINDS)}, got {kind!r}")


# --------------------------------------------------------------------------------------------------
# Running the user's trainer and scoring its models
# --------------------------------------------------------------------------------------------------


def _trainer_name(trainer: str | Callable) -> str:
    if isinstance(trainer, str):
        return trainer
    return f"{getattr(trainer, '__module__', '?')}:{getattr(trainer, '__qualname__', repr(trainer))}"


def _load_trainer(trainer: str | Callable) -> Callable:
    """In a worker: the user's function (loaded from "module:function", or the callable itself)."""
    if isinstance(trainer, str):
        from audit.machinery.user_code import load_user_function

        with user_code("--trainer", f"module of trainer {trainer}"):
            trainer = load_user_function(trainer, "--trainer")
    return _check_trainer(trainer)


def train_and_score_task(trainer: str | Callable, X: np.ndarray, y: np.ndarray, seed: int,
                         points: np.ndarray) -> np.ndarray:
    """A worker task: train the user's model once on (X, y) with `seed`, return its (n_points, C)
    log class probabilities at `points` (plain float64: the model never leaves the worker)."""
    function = _load_trainer(trainer)
    with user_code("--trainer", f"trainer {_trainer_name(trainer)}"):
        model = function(X.copy(), y.copy(), int(seed))
    log_probs = _log_probabilities(model, np.asarray(points, dtype=np.float32))
    _check_model_output(log_probs, int(np.max(y)) + 1)
    return log_probs


def _check_model_output(log_probs: np.ndarray, n_classes: int) -> None:
    """A returned model must answer with one finite distribution over the data's classes per point:
    NaN probabilities, infinite logits or extra classes would silently score as "no membership
    signal" and let a broken trainer pass (exit 2 instead, naming what was wrong)."""
    if log_probs.shape[1] != n_classes:
        raise AuditInputError("--trainer", f"the returned model outputs {log_probs.shape[1]} classes but its "
                              f"training labels have {n_classes} (0..{n_classes - 1})")
    bad = ~np.isfinite(log_probs) & ~np.isneginf(log_probs)  # p = 0 (log −inf) is a valid probability
    if bad.any() or np.isneginf(log_probs).all(axis=1).any():
        raise AuditInputError("--trainer", f"the returned model's outputs are not finite probabilities at "
                              f"{int(bad.any(axis=1).sum() or 1)} of {log_probs.shape[0]} points (NaN or infinite logits)")
    total = np.exp(log_probs).sum(axis=1)
    if not np.allclose(total, 1.0, atol=1e-3):
        raise AuditInputError("--trainer", "the returned model's predict_proba rows do not sum to 1 "
                              f"(e.g. {float(total[np.argmax(np.abs(total - 1))]):.4g})")


def declared_claim_task(trainer: str | Callable) -> tuple[Any, str]:
    """A worker task: the trainer's CLAIM as plain data (numbers and strings only), and where it was."""
    declared, where = declared_claim(_load_trainer(trainer))
    if isinstance(declared, dict):
        declared = {str(k): (v if isinstance(v, (bool, int, float, str, type(None))) else repr(v))
                    for k, v in declared.items()}
    elif declared is not None and not isinstance(declared, (bool, int, float, str)):
        declared = repr(declared)
    return declared, where


def planned_training_runs(mode: str, n_models: int | None = None) -> int | None:
    """Training runs an audit will ask for, pilot included (for progress: "runs finished of runs
    planned"); None where the count depends on what the pilot finds (multi, one-run)."""
    runs = MODE_DEFAULTS[mode][0] if n_models is None else int(n_models)
    if mode == "profile":
        designs = len(PROFILE_CANARY_SCALES) + len(PROFILE_ONE_CLASS_VALUES)
        return runs + max(4 * designs, runs // 4)
    if mode == "multi-canary":
        return runs + max(4, math.ceil(runs / 4))
    return None


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
    with WorkerPool(n, name="--trainer", timeout=timeout, what=f"trainer {_trainer_name(trainer)}") as own:
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
        raise AuditInputError("--trainer", f"the returned torch model failed on the canary: {type(exc).__name__}: {exc}") from None
    if callable(getattr(model, "logits", None)):
        source, fn = "logits", model.logits
    elif callable(getattr(model, "predict_proba", None)):
        source, fn = "predict_proba", model.predict_proba
    else:
        raise AuditInputError(
            "--trainer",
            f"returned a {type(model).__name__}, which is neither a torch nn.Module nor has "
            ".logits(features) or .predict_proba(features)",
        )
    try:
        out = np.asarray(fn(X), dtype=float)
    except Exception as exc:
        raise AuditInputError("--trainer", f"model.{source}(features) raised {type(exc).__name__}: {exc}") from None
    if out.ndim != 2 or out.shape[0] != X.shape[0]:
        raise AuditInputError("--trainer", f"model.{source}(features) returned shape {out.shape}, expected ({X.shape[0]}, classes)")
    if source == "logits":
        return special.log_softmax(out, axis=1)
    with np.errstate(divide="ignore"):
        return np.log(np.clip(out, 0.0, None))


def canary_scores(model, points: np.ndarray, labels: np.ndarray, statistic: str = "scaled_logit") -> np.ndarray:
    """Membership score of each canary under `model`; higher = more likely trained on.

    "loss": −(cross-entropy) = ln p_y. "scaled_logit": ln(p_y / (1 − p_y)) = z_y − logsumexp of
    the other logits (the logit scaling of Carlini et al. 2022, "Membership Inference Attacks From
    First Principles", arXiv 2112.03570). Both increase with p_y, so they order the models the
    same way and define the same threshold tests; the scaled logit just does not saturate: a
    model that fits the canary with margin 50 and one that fits it with margin 5000 both have
    loss 0 in floating point, but scaled logits 50 and 5000 — and that difference is exactly what
    an unclipped canary gradient produces.

    A model whose output at a canary is not finite (NaN logits) gets −inf there: a fixed rule, so
    the test stays valid.
    """
    if statistic not in STATISTICS:
        raise AuditInputError("statistic", f"expected one of {', '.join(STATISTICS)}, got {statistic!r}")
    return scores_from_log_probabilities(_log_probabilities(model, np.asarray(points, dtype=np.float32)),
                                         labels, statistic)


def scores_from_log_probabilities(log_probs: np.ndarray, labels, statistic: str = "scaled_logit") -> np.ndarray:
    """`canary_scores` from (n, C) log class probabilities already computed (in a worker)."""
    log_probs = np.asarray(log_probs, dtype=float)
    labels = np.asarray(labels, dtype=np.int64)
    if log_probs.shape[1] <= int(labels.max()):
        raise AuditInputError(
            "--trainer",
            f"the model outputs {log_probs.shape[1]} classes but the canary's label is {int(labels.max())}",
        )
    rows = np.arange(labels.size)
    scores = log_probs[rows, labels]
    if statistic == "scaled_logit":
        others = log_probs.copy()
        others[rows, labels] = -np.inf
        with np.errstate(invalid="ignore"):
            scores = scores - special.logsumexp(others, axis=1)
    return np.where(np.isnan(scores), -np.inf, scores)


def _finite_for_json(values) -> list[float | None]:
    return [float(v) if math.isfinite(v) else None for v in np.asarray(values, dtype=float)]


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
            raise AuditInputError("--trainer", f"the model outputs {log_probs.shape[1]} classes, the labels have {n_classes}")
        per_pilot.append(np.nan_to_num(log_probs[:, :n_classes], nan=0.0, neginf=-1e300))
    median = np.median(np.stack(per_pilot), axis=0)
    if exclude is not None:
        median[np.arange(len(points)), exclude] = np.inf
    return np.argmin(median, axis=1)


def _check_count(name: str, value, minimum: int) -> int:
    """A count in the range table of audit.machinery.limits (its lower end raised to `minimum`)."""
    from audit.machinery.limits import COUNT_LIMITS, check_count

    if name in COUNT_LIMITS:
        return check_count(name, value, low=minimum)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise AuditInputError(name, f"expected an integer ≥ {minimum}, got {value!r}")
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
    check_memory(needed, "--models" if mode != "one-run" else "--canaries",
                 f"canary-audit --mode {mode} with {n_models:,} runs, {n_canaries:,} canaries and {n_rows:,} rows")


def _check_trainer(trainer):
    if isinstance(trainer, str):
        if ":" not in trainer:
            raise AuditInputError("--trainer", f"expected module:function, got {trainer!r}")
        return trainer
    if not callable(trainer):
        raise AuditInputError("--trainer", f"expected a callable train(features, labels, seed), got {trainer!r}")
    return trainer


# --------------------------------------------------------------------------------------------------
# Multi-run audit
# --------------------------------------------------------------------------------------------------


def multi_run_canary_audit(
    trainer: Callable[[np.ndarray, np.ndarray, int], Any],
    features,
    labels,
    *,
    canary_kind: str = "out_of_distribution",
    n_models: int,
    claimed_epsilon: float,
    delta: float,
    confidence: float = 0.95,
    seed: int = 0,
    statistic: str | None = None,
    insert_canary: bool = True,
    pool=None,
    workers: int | None = None,
    timeout: float | None = TRAIN_TIMEOUT_S,
) -> dict[str, Any]:
    """ε lower bound for `trainer` from K = `n_models` runs with one canary and K runs without.

    Jagielski, Ullman, Oprea 2020 (arXiv 2006.07709); Nasr et al. 2021 (arXiv 2101.04535).
    The canary (`make_canary(canary_kind, ...)`, labelled by the pilot models, see the module
    docstring) is appended to the training set of the K "in" runs. Every run gets its own seed
    from `seed` (2K distinct seeds). Score (`statistic`): "scaled_logit" (`canary_scores` of the
    canary on each model; the default for a mislabeled canary), "loss" = −cross-entropy, or
    "scaled_logit_gain" (the default for an out-of-distribution canary): the scaled logit at the
    canary minus the scaled logit at its *base point*, the same record with the canary column at
    0. Everything the model learnt from the real records moves both terms alike and cancels; what
    remains is what the weights of the canary's own column carry — the canary's clipped gradient
    plus the DP noise, the quantity the ε claim is about (for a linear model exactly: logits are
    linear, so the gain is 100·R times the canary column's weight difference). Without it, the
    run-to-run variation of everything else, multiplied by nothing, still sits in the score and
    hides a tenfold noise error (measured on `audit.demos.planted_bugs`). Threshold and
    direction are chosen on the first ⌊K/2⌋ models of each side; the remaining models give the
    error counts and the Clopper-Pearson (ε, δ) bound at `confidence`
    (`epsilon_lower_bound_from_counts`). With 25 evaluation models per side a perfect attack
    reaches 1.84 at 95 %: claims above that cannot be contradicted with so few models.

    `insert_canary=False` is the null run: both sides train without the canary, the bound must
    be 0 in ≥ 95 % of repeats. Returns a JSON-serialisable dict (`violation`: bound > claim;
    `ceiling`, `verdict`: see `audit.dp_validation.scope.claim_verdict`).

    `trainer` ("module:function" or a picklable callable) runs only in isolated workers: `pool`
    (anything with WorkerPool's `map(function, tasks)`), else a WorkerPool of `workers` processes
    (default: the cores) with `timeout` seconds per training run.
    """
    trainer = _check_trainer(trainer)
    X, y, n_classes = _validate_data(features, labels)
    k = _check_count("--models", n_models, 2)
    eps, d = validate_claim(claimed_epsilon, delta, epsilon_flag="--claimed-epsilon", delta_flag="--delta")
    if statistic is None:
        statistic = "scaled_logit_gain" if canary_kind == "out_of_distribution" else "scaled_logit"
    if statistic not in MULTI_RUN_STATISTICS:
        raise AuditInputError("statistic", f"expected one of {', '.join(MULTI_RUN_STATISTICS)}, got {statistic!r}")
    if statistic == "scaled_logit_gain" and canary_kind != "out_of_distribution":
        raise AuditInputError("statistic", "scaled_logit_gain needs an out-of-distribution canary (its own column)")
    provisional = make_canary(canary_kind, X, y, seed)
    X_base, y_base = provisional.base_dataset(X, y)
    exclude = None if provisional.source_row is None else np.array([y[provisional.source_row]])
    # One pool of distinct seeds: a pilot's is never reused by an audited run.
    seed_pool = _distinct_seeds(seed, _STREAM_MODELS, PILOT_MODELS + 2 * k)
    pilot_seeds, seeds = seed_pool[:PILOT_MODELS], seed_pool[PILOT_MODELS:]
    seeds_in, seeds_out = seeds[:k], seeds[k:]
    with _pool_for(trainer, pool, workers, timeout) as runner:
        pilot_label = _pilot_labels(runner, trainer, X_base, y_base, provisional.features[None, :], exclude,
                                    pilot_seeds, n_classes)
        canary = make_canary(canary_kind, X, y, seed, label=int(pilot_label[0]))
        X_in, y_in = canary.dataset(X, y, include=insert_canary)
        X_out, y_out = canary.dataset(X, y, include=False)
        points = canary.features[None, :]
        if statistic == "scaled_logit_gain":
            base_point = canary.features.copy()
            base_point[-1] = 0.0
            points = np.vstack([points, base_point[None, :]])
        labs = np.full(len(points), canary.label)
        log_probs = _train_many(runner, trainer, [(X_in, y_in, s, points) for s in seeds_in]
                                + [(X_out, y_out, s, points) for s in seeds_out])
    per_point = np.array([scores_from_log_probabilities(lp, labs, "loss" if statistic == "loss" else "scaled_logit")
                          for lp in log_probs])
    with np.errstate(invalid="ignore"):
        scores = per_point[:, 0] - per_point[:, 1] if statistic == "scaled_logit_gain" else per_point[:, 0]
    scores = np.where(np.isnan(scores), -np.inf, scores)  # inf − inf: a fixed rule, like NaN logits
    scores_in, scores_out = scores[:k], scores[k:]

    audit = threshold_audit(scores_in, scores_out, delta=d, confidence=confidence)
    bound = audit.pop("epsilon_lower_bound")
    return {
        "audit": "canary, multi-run",
        "trainer": _trainer_name(trainer),
        "canary": canary.to_dict(),
        "canary_inserted": bool(insert_canary),
        "statistic": statistic,
        "n_models_per_side": k,
        "n_training_records": int(X.shape[0]),
        "seed": int(seed),
        "pilot_seeds": pilot_seeds,
        "seeds": {"with_canary": seeds_in, "without_canary": seeds_out},
        "scores": {"with_canary": _finite_for_json(scores_in), "without_canary": _finite_for_json(scores_out)},
        **{key: (value if key != "threshold" else (value if math.isfinite(value) else None)) for key, value in audit.items()},
        "claimed_epsilon": eps,
        "epsilon_lower_bound": bound,
        "violation": bool(bound > eps),
        "verdict": claim_verdict(bound=bound, ceiling=audit["ceiling"], claimed_epsilon=eps, delta=d,
                                 needed=runs_needed_threshold_audit(eps, d, audit["confidence"]),
                                 unit="models per side (--models)", confidence=audit["confidence"]),
    }


# --------------------------------------------------------------------------------------------------
# Many runs × many column canaries (the default)
# --------------------------------------------------------------------------------------------------


def column_canaries(features, n_canaries: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(points (J, d + J), base point (d + J,)): J canaries, each in a column of its own.

    The audit appends J feature columns that are 0 for every real record; canary j is the data
    mean with `scale` × (data radius) in column j. Its gradient lives on weights no real record
    and no other canary touches — orthogonal to the data's gradients, the extreme case of
    ClipBKD's lowest-variance direction (Jagielski, Ullman, Oprea 2020, arXiv 2006.07709) — so the
    canaries neither compete for the model's capacity nor interfere (unlike one-run canaries
    sharing the real columns, which 20 steps cannot memorise). The base point is the data mean
    with every canary column at 0.
    """
    X = np.asarray(features, dtype=np.float32)
    centre, radius = _data_radius(X)
    base = np.append(centre, np.zeros(n_canaries)).astype(np.float32)
    points = np.tile(base, (n_canaries, 1))
    points[np.arange(n_canaries), X.shape[1] + np.arange(n_canaries)] = scale * radius
    return points, base


def _column_jobs(X, y, points, canary_labels, coins, seeds, insert_canary):
    X_wide = np.hstack([X, np.zeros((X.shape[0], points.shape[0]), dtype=X.dtype)])
    scored = np.vstack([points, _base_of(points)[None, :]])
    jobs = []
    for run_coins, run_seed in zip(coins, seeds):
        take = run_coins & bool(insert_canary)
        jobs.append((np.vstack([X_wide, points[take]]), np.concatenate([y, canary_labels[take]]), run_seed, scored))
    return jobs


def _base_of(points: np.ndarray) -> np.ndarray:
    base = points[0].copy()
    base[-points.shape[0]:] = 0.0
    return base


def _gains(log_probs: np.ndarray, canary_labels: np.ndarray) -> np.ndarray:
    """Per canary: scaled logit of its label at the canary minus the same at the base point."""
    J = canary_labels.size
    at_canary = scores_from_log_probabilities(log_probs[:J], canary_labels)
    at_base = scores_from_log_probabilities(np.repeat(log_probs[J:J + 1], J, axis=0), canary_labels)
    with np.errstate(invalid="ignore"):
        gain = at_canary - at_base
    return np.where(np.isnan(gain), -np.inf, gain)


def _per_canary_standardised(scores: np.ndarray) -> np.ndarray:
    """(runs, J) scores → each canary's column minus its median over all runs, over its MAD.

    A canary's score has an offset of its own (its label, its base point's prediction) that is the
    same in every run; ranking slots of different canaries against each other without removing it
    mixes those offsets into the guesses. The median and MAD are functions of every run's output
    and none of the coins, so the one-run analysis stays valid (any coin-free function of the
    mechanism's output may score the slots).
    """
    finite = _below_every_finite(scores.ravel()).reshape(scores.shape)
    centre = np.median(finite, axis=0)
    spread = np.median(np.abs(finite - centre), axis=0)
    return (finite - centre) / np.where(spread > 0, spread, 1.0)


def _below_every_finite(scores: np.ndarray) -> np.ndarray:
    finite = scores[np.isfinite(scores)]
    floor = (finite.min() - 1.0) if finite.size else 0.0
    ceiling = (finite.max() + 1.0) if finite.size else 0.0
    return np.where(np.isposinf(scores), ceiling, np.where(np.isfinite(scores), scores, floor))


def _auc(scores: np.ndarray, members: np.ndarray) -> float:
    from scipy.stats import rankdata

    n1, n0 = int(members.sum()), int((~members).sum())
    if n1 == 0 or n0 == 0:
        return 0.5
    ranks = rankdata(_below_every_finite(scores))
    return float((ranks[members].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def multi_canary_audit(
    trainer,
    features,
    labels,
    *,
    n_runs: int = 200,
    n_canaries: int = 32,
    claimed_epsilon: float,
    delta: float,
    confidence: float = 0.95,
    seed: int = 0,
    scales: tuple[float, ...] = COLUMN_CANARY_SCALES,
    insert_canary: bool = True,
    dpsgd: tuple[float, float, int] | None = None,
    pool=None,
    workers: int | None = None,
    timeout: float | None = TRAIN_TIMEOUT_S,
) -> dict[str, Any]:
    """ε lower bound from R = `n_runs` training runs, each with J = `n_canaries` column canaries
    (`column_canaries`), every (run, canary) slot included by an independent fair coin.

    Bound: the one-run audit of Steinke, Nasr, Jagielski 2023 (arXiv 2305.08846) over all m = R·J
    slots. It is valid here because each slot changes one run's training set by one record and
    the runs are independent: the R runs together are one mechanism on m coin-flipped records,
    exactly the theorem's setting. Score of a slot: the gain of its label's scaled logit from the
    base point to the canary (`_gains`): what the model learnt from the real records cancels, so
    the score is the canary's own weights — its clipped gradient plus the DP noise; then each
    canary's scores are centred and scaled over the runs (`_per_canary_standardised`).

    Screening: the canaries' scale (× data radius) decides what the audit can see — a huge scale
    exposes missing clipping, a small one keeps the canary's loss from saturating so every step's
    gradient adds up. ⌈R/4⌉ (≥ 4) *pilot* runs try `scales` side by side (canary j at scale
    j mod len(scales)); the scale with the highest pilot AUC is used for the R audited runs. The
    bound uses the audited runs only, so choosing on the pilots costs nothing in validity.

    Also reported (`fdp_one_run`): the one-run f-DP test of Mahloujifar, Melis, Chaudhuri 2024
    (arXiv 2410.22235) of the claim's whole curve (the PLD profile of `dpsgd` = (σ, q, T) when
    known, else the (ε, δ) pair) over the same slots, sound for the same reason.

    `insert_canary=False` is the null: coins are drawn but no canary is ever inserted.
    """
    trainer = _check_trainer(trainer)
    X, y, n_classes = _validate_data(features, labels)
    R = _check_count("--models", n_runs, 4)
    J = _check_count("--canaries", n_canaries, 1)
    eps, d = validate_claim(claimed_epsilon, delta, epsilon_flag="--claimed-epsilon", delta_flag="--delta")
    scales = tuple(float(v) for v in scales)
    if not scales or not all(math.isfinite(v) and v > 0 for v in scales):
        raise AuditInputError("scales", f"expected positive numbers, got {scales!r}")
    n_pilot = max(4, math.ceil(R / 4))
    seeds = _distinct_seeds(seed, _STREAM_MODELS, n_pilot + R)
    coins = np.random.default_rng(np.random.SeedSequence([int(seed), _STREAM_COINS])).random((n_pilot + R, J)) < 0.5
    canary_labels = np.random.default_rng(np.random.SeedSequence([int(seed), _STREAM_CANARY])).integers(0, n_classes, J)

    pilot_points = np.concatenate([column_canaries(X, J, scales[j % len(scales)])[0][j:j + 1] for j in range(J)])
    with _pool_for(trainer, pool, workers, timeout) as runner:
        pilot_lp = _train_many(runner, trainer, _column_jobs(X, y, pilot_points, canary_labels, coins[:n_pilot],
                                                             seeds[:n_pilot], insert_canary))
        pilot_scores = _per_canary_standardised(np.stack([_gains(lp, canary_labels) for lp in pilot_lp]))
        scale_of = np.array([j % len(scales) for j in range(J)])
        pilot_auc = {}
        for i, v in enumerate(scales):
            cols = scale_of == i
            pilot_auc[v] = _auc(pilot_scores[:, cols].ravel(), coins[:n_pilot][:, cols].ravel()) if cols.any() else 0.5
        chosen = max(scales, key=lambda v: (pilot_auc[v], -scales.index(v)))
        points, _ = column_canaries(X, J, chosen)
        audit_lp = _train_many(runner, trainer, _column_jobs(X, y, points, canary_labels, coins[n_pilot:],
                                                             seeds[n_pilot:], insert_canary))
    scores = _per_canary_standardised(np.stack([_gains(lp, canary_labels) for lp in audit_lp]))
    members = coins[n_pilot:]
    try:
        result = epsilon_lower_bound_one_run(_below_every_finite(scores.ravel()), members.ravel(), d, confidence)
    except ValueError as exc:
        raise AuditInputError("--canaries", str(exc)) from None
    from audit.statistics.tradeoff_curves import claim_profile

    profile = claim_profile(eps, d, dpsgd)
    fdp = _fdp_one_run(scores, members, profile, d, result.confidence)
    m = R * J
    ceiling = ceiling_one_run(m, d, result.confidence)
    needed = canaries_needed_one_run(eps, d, result.confidence)
    bound = float(result.epsilon)
    return {
        "audit": "canary, many runs × column canaries (one-run bound over all slots)",
        "trainer": _trainer_name(trainer),
        "canary_kind": "out_of_distribution",
        "canary_design": "one column per canary (zero for real records); score = scaled-logit gain over the base point",
        "canary_inserted": bool(insert_canary),
        "n_runs": R,
        "n_canaries_per_run": J,
        "n_slots": m,
        "n_inserted": int(members.sum()),
        "n_pilot_runs": n_pilot,
        "pilot_auc_by_scale": {f"{v:g}": a for v, a in pilot_auc.items()},
        "canary_scale": chosen,
        "auc": _auc(scores.ravel(), members.ravel()),
        "canary_labels": [int(v) for v in canary_labels],
        "n_training_records": int(X.shape[0]),
        "seed": int(seed),
        "confidence": result.confidence,
        "delta": d,
        "details": result.details,
        "fdp_one_run": fdp,
        "profile_ceiling": _fdp_ceiling(profile, fdp, result.confidence),
        "claimed_epsilon": eps,
        "epsilon_lower_bound": bound,
        "ceiling": ceiling,
        "violation": bool(bound > eps),
        "verdict": claim_verdict(bound=bound, ceiling=ceiling, claimed_epsilon=eps, delta=d,
                                 needed=None if needed is None else math.ceil(needed / J),
                                 unit=f"runs (--models) with {J} canaries each", confidence=result.confidence),
    }


# --------------------------------------------------------------------------------------------------
# Profile audit: independent runs, one column canary each, tested against the claim's trade-off curve
# --------------------------------------------------------------------------------------------------


def profile_canary(features, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(canary point (d + 1,), base point (d + 1,)) of the profile audit.

    The audit appends one feature column that is 0 for every real record; the canary is 0 in the
    real columns and `scale` × (data radius) in its own column, the base point is all zeros. Its
    gradient then lies on weights no real record touches (ClipBKD's lowest-variance direction at
    its extreme, Jagielski, Ullman, Oprea 2020, arXiv 2006.07709), and with the real columns at 0
    the whole clipping budget of the canary's weight gradient goes to that column.
    """
    X = np.asarray(features, dtype=np.float32)
    _, radius = _data_radius(X)
    base = np.zeros(X.shape[1] + 1, dtype=np.float32)
    point = base.copy()
    point[-1] = scale * radius
    return point, base


def one_class_canary(n_features: int, value: float) -> tuple[np.ndarray, np.ndarray]:
    """(canary point (d + 1,), base point (d + 1,)) of the profile audit's one-class design.

    The auditor picks the whole dataset (DP holds for every pair of neighbours; Nasr et al. 2021,
    arXiv 2101.04535, audit with crafted datasets): the real records keep their features but are
    all labelled one class (but for one record of each class), and the canary, `value` in its own column and 0 elsewhere, carries
    another label. The model learns the bias toward the real records' class within a few steps,
    after which their residuals (and gradients) vanish while the canary's stays near its largest:
    its clipped gradient is the full C at every step it is sampled, as a Dirac canary's would be.
    Its score (`_centred_logit`) reads its own column's weights AND the bias, so an error that
    gives the bias more than its share of the clipping budget (per-tensor clipping) shows, which
    the column design's gain over the base point (bias cancelled) cannot see.
    """
    base = np.zeros(int(n_features) + 1, dtype=np.float32)
    point = base.copy()
    point[-1] = float(value)
    return point, base


_PROFILE_DESIGN_TEXT = {
    "column": "one column of its own (0 for real records), real columns 0, real records as given; "
              "score = centred logit gain over the all-zero base point",
    "one_class": "one column of its own (0 for real records), real columns 0, real records relabelled to one "
                 "other class; score = centred logit at the canary (its weights and the bias)",
}


def one_class_labels(labels: np.ndarray, canary_label: int, n_classes: int) -> np.ndarray:
    """The one-class design's labels for the real records: the class after the canary's, but for the
    first record of each class, which keeps its own, so that a trainer sizing its output layer from
    the labels still sees every class."""
    y = np.asarray(labels)
    out = np.full_like(y, (int(canary_label) + 1) % int(n_classes))
    for c in np.unique(y):
        out[int(np.flatnonzero(y == c)[0])] = c
    return out


def _centred_logit(log_probs: np.ndarray, label: int) -> float:
    """(z_label − mean_c z_c) at the canary (row 0): its own column's weight contrast plus the bias
    contrast, both of which the canary's clipped gradient moves (see `one_class_canary`)."""
    with np.errstate(invalid="ignore"):
        centred = float(log_probs[0, label] - log_probs[0].mean())
    return centred if not math.isnan(centred) else -math.inf


def _centred_logit_gain(log_probs: np.ndarray, label: int) -> float:
    """(z_label − mean_c z_c) at the canary minus the same at the base point.

    Log-probabilities are the logits up to one constant per point, which the centring removes, so
    this is a difference of logits: for a linear model exactly `scale`·R times the canary column's
    weight contrast — the canary's clipped gradient plus the DP noise, not swamped by the canary's
    scale the way a probability or loss would be (they saturate)."""
    with np.errstate(invalid="ignore"):
        centred = log_probs[:, label] - log_probs.mean(axis=1)
        gain = float(centred[0] - centred[1])
    return gain if not math.isnan(gain) else -math.inf


def _fdp_one_run(scores: np.ndarray, coins: np.ndarray, profile, delta: float, confidence: float) -> dict[str, Any]:
    """The one-run f-DP test of the claim's curve over coin-flipped canary slots (reported, not the
    decision of the profile mode): Mahloujifar, Melis, Chaudhuri 2024, arXiv 2410.22235."""
    from audit.statistics.fdp_one_run import fdp_one_run_audit

    try:
        return fdp_one_run_audit(_below_every_finite(np.ravel(scores)), np.ravel(coins), profile, delta=delta,
                                 confidence=confidence)
    except ValueError as exc:
        return {"error": str(exc)}


def _fdp_ceiling(profile, fdp: dict[str, Any], confidence: float) -> dict[str, Any] | None:
    """Could an attack that guesses every evaluation canary right refute the claim's curve in the f-DP
    one-run test (`one_run_power.fdp_perfect_p_value`)? What the console's profile ceiling line reads."""
    from audit.statistics.one_run_power import fdp_perfect_p_value

    m = fdp.get("m_eval")
    if profile is None or not isinstance(m, int) or m < 2:
        return None
    p = fdp_perfect_p_value(profile, m)
    return {"refutable": bool(p <= 1.0 - confidence), "perfect_attack_p_value": p}


# How much stronger (in pilot standard errors) a column design's pilot evidence must be before it
# replaces the one-class design. The one-class canary is the Dirac-like worst case of DP-SGD (its
# clipped gradient stays the full C), and on a correct recipe it sits on the claim's curve; a column
# canary wins only where a bug is large enough that either design would flag it. With a few
# thousand pilot runs per design their margins differ by noise of ~0.02, so "highest pilot number
# wins" let a column canary that cannot see a small bug displace the one design that could.
DESIGN_PREFERENCE_Z = 2.0


def choose_profile_design(margins: dict, sizes: dict, preferred=None):
    """The design to audit, from pilot evidence only (so the choice costs the test nothing).

    `margins[design]`: the anticipated margin of its best pilot rule below the claim's curve
    (`best_profile_rule`; −inf when it has none); `sizes[design]`: its pilot runs on the smaller
    side. Without a `preferred` design the largest margin wins (ties: the first design). With one,
    it is kept unless another design's margin exceeds it by more than `DESIGN_PREFERENCE_Z`
    standard errors of the difference of two pilot rates (√(¼/n₁ + ¼/n₂), the largest a rate's
    variance can be).
    """
    if not margins:
        raise ValueError("no design to choose from")
    order = list(margins)
    best = max(order, key=lambda v: (margins[v], -order.index(v)))
    if preferred is None or preferred not in margins or best == preferred:
        return best
    if not math.isfinite(margins[preferred]):
        return best
    se = math.sqrt(0.25 / max(1, sizes[best]) + 0.25 / max(1, sizes[preferred]))
    return best if margins[best] - margins[preferred] > DESIGN_PREFERENCE_Z * se else preferred


def pilot_design_plan(designs: list, preferred, n_pilot: int) -> list:
    """The design of each pilot run: every other run the `preferred` design (None: plain cycling),
    the runs between cycling through the rest."""
    others = [d for d in designs if d != preferred]
    if preferred is None or not others:
        return [designs[i % len(designs)] for i in range(n_pilot)]
    return [preferred if i % 2 == 0 else others[(i // 2) % len(others)] for i in range(n_pilot)]


def profile_canary_audit(
    trainer,
    features,
    labels,
    *,
    n_runs: int = 48000,
    n_pilot_runs: int | None = None,
    claimed_epsilon: float,
    delta: float,
    dpsgd: tuple[float, float, int] | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    scales: tuple[float, ...] = PROFILE_CANARY_SCALES,
    one_class_values: tuple[float, ...] = PROFILE_ONE_CLASS_VALUES,
    insert_canary: bool = True,
    pool=None,
    workers: int | None = None,
    timeout: float | None = TRAIN_TIMEOUT_S,
) -> dict[str, Any]:
    """Does the trainer's output stay within the WHOLE privacy profile its accountant states?

    `n_runs` independent training runs, each on the audit's dataset plus (by its own fair coin) one
    canary of the design the pilot chose: a column canary (`profile_canary`, the real records as
    given; score = its centred logit gain over the base point, `_centred_logit_gain`) or the
    one-class design (`one_class_canary`: the real records relabelled to one class, the canary
    another, but for one record of each class; score = its centred logit, `_centred_logit`). The claim's trade-off curve f_claim (`audit.statistics.tradeoff_curves`:
    from the PLD profile of (σ, q, T) = `dpsgd` when the accountant's configuration is known, else
    from the bare (ε, δ) pair) is the null hypothesis: `profile_test` refutes it when one
    threshold rule's errors lie below f_claim by more than chance allows (an exact test of the
    weighted error FNR + s·FPR, s the curve's slope there) — Dong, Roth, Su 2019 (arXiv
    1905.02383) for the curve, Jagielski, Ullman, Oprea 2020 (arXiv 2006.07709) for the canaries
    and the counts. At moderate FPR this has power against errors of ε 1.5–3 that no test
    of the single (ε, δ = 1e-5) point can see with thousands of runs.

    Pilot: `n_pilot_runs` further runs (default n_runs / 4) try the designs side by side (column
    canaries at `scales` × the data radius, one-class canaries at `one_class_values`): half the
    pilot runs go to the first one-class design, the design audited unless another is clearly
    better, so that its rule is chosen on as many runs as possible (violations that live in the
    tail need it), and the other half cycle through the other designs (`pilot_design_plan`).
    Each design's best threshold rule on its pilot runs
    (`best_profile_rule`) comes with an anticipated margin below the claim's curve; the one-class
    design is audited unless a column design's margin is clearly larger (`choose_profile_design`),
    with that design's rule. Only the audited runs decide, so the choice costs nothing in
    validity. The runs are independent (each its own seed, coin and training), which is what
    the exact binomial test needs.

    Also reported: the (ε, δ) Clopper-Pearson bound of the same rule and counts at the claim's δ
    (`epsilon_lower_bound`), and the one-run bound of Steinke, Nasr, Jagielski 2023 (arXiv
    2305.08846) over the audited runs' coin-flipped canaries. `insert_canary=False` is the null.
    """
    from audit.statistics.audit_ceilings import ceiling_threshold_audit
    from audit.statistics.epsilon_bounds import epsilon_lower_bound_from_counts
    from audit.statistics.tradeoff_curves import best_profile_rule, claim_profile, profile_test, tangent_test_ceiling

    trainer = _check_trainer(trainer)
    X, y, n_classes = _validate_data(features, labels)
    R = _check_count("--models", n_runs, 4)
    eps, d = validate_claim(claimed_epsilon, delta, epsilon_flag="--claimed-epsilon", delta_flag="--delta")
    scales = tuple(float(v) for v in scales)
    one_class_values = tuple(float(v) for v in one_class_values)
    for name, values in (("scales", scales), ("one_class_values", one_class_values)):
        if not all(math.isfinite(v) and v > 0 for v in values):
            raise AuditInputError(name, f"expected positive numbers, got {values!r}")
    designs = [("column", v) for v in scales] + [("one_class", v) for v in one_class_values]
    if not designs:
        raise AuditInputError("scales", "no canary design to audit: give a scale or a one-class value")
    n_pilot = (max(4 * len(designs), R // 4) if n_pilot_runs is None
               else _check_count("pilot runs", n_pilot_runs, 2 * len(designs)))
    profile = claim_profile(eps, d, dpsgd)
    seeds = _distinct_seeds(seed, _STREAM_MODELS, n_pilot + R)
    coins = np.random.default_rng(np.random.SeedSequence([int(seed), _STREAM_COINS])).random(n_pilot + R) < 0.5
    label = int(np.random.default_rng(np.random.SeedSequence([int(seed), _STREAM_CANARY])).integers(0, n_classes))
    X_wide = np.hstack([X, np.zeros((X.shape[0], 1), dtype=X.dtype)])
    y_one_class = one_class_labels(y, label, n_classes)

    # (canary point, base point) of each design, made once: every run of a design uses the same.
    canaries = {(kind, v): profile_canary(X, v) if kind == "column" else one_class_canary(X.shape[1], v)
                for kind, v in designs}

    def score(design, log_probs):
        return _centred_logit_gain(log_probs, label) if design[0] == "column" else _centred_logit(log_probs, label)

    def jobs(run_designs, run_coins, run_seeds):
        out = []
        for design, coin, s in zip(run_designs, run_coins, run_seeds):
            point, base = canaries[design]
            y_real = y if design[0] == "column" else y_one_class
            take = bool(coin) and bool(insert_canary)
            X_run = np.vstack([X_wide, point[None, :]]) if take else X_wide
            y_run = np.append(y_real, np.asarray(label, dtype=y.dtype)) if take else y_real
            out.append((X_run, y_run, s, np.vstack([point, base])))
        return out

    preferred = next((v for v in designs if v[0] == "one_class"), None)
    pilot_designs = pilot_design_plan(designs, preferred, n_pilot)
    audited_coins = coins[n_pilot:]
    n_in, n_out = int(audited_coins.sum()), int((~audited_coins).sum())
    if n_in == 0 or n_out == 0:
        raise AuditInputError("--models", "every coin came up the same; use more runs")
    with _pool_for(trainer, pool, workers, timeout) as runner:
        pilot = np.array([score(design, lp) for design, lp in zip(pilot_designs, _train_many(
            runner, trainer, jobs(pilot_designs, coins[:n_pilot], seeds[:n_pilot])))])
        pilot_coins = coins[:n_pilot]
        pilot_auc, pilot_rule, pilot_margin, pilot_size = {}, {}, {}, {}
        for design in designs:
            on = np.array([p == design for p in pilot_designs])
            d_in, d_out = pilot[on][pilot_coins[on]], pilot[on][~pilot_coins[on]]
            pilot_auc[design] = _auc(pilot[on], pilot_coins[on])
            pilot_size[design] = min(d_in.size, d_out.size)
            if pilot_size[design] == 0:
                pilot_rule[design], pilot_margin[design] = None, -math.inf
                continue
            pilot_rule[design], pilot_margin[design] = best_profile_rule(
                _below_every_finite(d_in), _below_every_finite(d_out), profile, n_in, n_out, confidence)
        chosen = choose_profile_design(pilot_margin, pilot_size, preferred=preferred)
        rule = pilot_rule[chosen]
        if rule is None:
            raise AuditInputError("--models", "every pilot coin came up the same; use more runs")
        scores = np.array([score(chosen, lp) for lp in
                           _train_many(runner, trainer, jobs([chosen] * R, audited_coins, seeds[n_pilot:]))])
    test = profile_test(scores[audited_coins], scores[~audited_coins], rule, profile, confidence)
    ceiling_point = tangent_test_ceiling(profile, n_in, n_out, confidence)
    bound = epsilon_lower_bound_from_counts(test["false_positives"], n_out, test["false_negatives"], n_in, d, confidence)
    try:
        one_run = epsilon_lower_bound_one_run(_below_every_finite(scores), audited_coins, d, confidence)
        one_run_bound, one_run_details = float(one_run.epsilon), one_run.details
    except ValueError as exc:
        one_run_bound, one_run_details = None, {"error": str(exc)}
    fdp = _fdp_one_run(scores, audited_coins, profile, d, confidence)
    point, _ = canaries[chosen]
    return {
        "audit": "canary, independent runs tested against the claim's privacy profile (trade-off curve)",
        "trainer": _trainer_name(trainer),
        "canary_kind": "out_of_distribution",
        "canary_design": _PROFILE_DESIGN_TEXT[chosen[0]],
        "canary": {"label": label, "design": chosen[0], "setting": chosen[1],
                   "value": float(point[-1])},
        "canary_inserted": bool(insert_canary),
        "n_runs": R,
        "n_with_canary": n_in,
        "n_without_canary": n_out,
        "n_pilot_runs": n_pilot,
        "pilot_auc_by_design": {f"{kind} {v:g}": a for (kind, v), a in pilot_auc.items()},
        "pilot_margin_by_design": {f"{kind} {v:g}": (m if math.isfinite(m) else None)
                                   for (kind, v), m in pilot_margin.items()},
        "auc": _auc(scores, audited_coins),
        "n_training_records": int(X.shape[0]),
        "seed": int(seed),
        "confidence": float(confidence),
        "delta": d,
        "profile_test": test,
        "profile_ceiling": ceiling_point,
        "claimed_epsilon": eps,
        "epsilon_lower_bound": float(bound),
        "epsilon_lower_bound_label": "(ε, δ) Clopper-Pearson bound at the claim's δ, same rule and counts",
        "one_run_epsilon_lower_bound": one_run_bound,
        "one_run_details": one_run_details,
        "fdp_one_run": fdp,
        "ceiling": float(ceiling_threshold_audit(n_in, n_out, d, confidence)),
        "violation": bool(test["refuted"]),
        "verdict": profile_verdict(test, ceiling_point, claimed_epsilon=eps, delta=d, n_runs=R),
    }


# --------------------------------------------------------------------------------------------------
# One-run audit
# --------------------------------------------------------------------------------------------------


def one_run_canary_audit(
    trainer: Callable[[np.ndarray, np.ndarray, int], Any],
    features,
    labels,
    *,
    n_canaries: int,
    canary_kind: str = "mislabeled",
    claimed_epsilon: float,
    delta: float,
    confidence: float = 0.95,
    seed: int = 0,
    statistic: str = "scaled_logit",
    pool=None,
    workers: int | None = None,
    timeout: float | None = TRAIN_TIMEOUT_S,
) -> dict[str, Any]:
    """ε lower bound for `trainer` from ONE training run with m = `n_canaries` canaries.

    Steinke, Nasr, Jagielski 2023, "Privacy Auditing with One (1) Training Run", arXiv
    2305.08846. The canaries (`make_canaries`, labels from the pilot model) each join the
    training set by an independent fair coin (seeded by `seed`); the model is trained once; each
    canary is scored with `canary_scores`; `epsilon_lower_bound_one_run` guesses "in" for the top and "out"
    for the bottom scores (Bonferroni over the guess counts tried). Non-finite scores are placed
    below every finite one. The bound is far from tight with hundreds of canaries (100 correct
    guesses out of 100 give 3.49 at m = 1000), but costs one training run.
    """
    trainer = _check_trainer(trainer)
    X, y, n_classes = _validate_data(features, labels)
    m = _check_count("--canaries", n_canaries, 2)
    eps, d = validate_claim(claimed_epsilon, delta, epsilon_flag="--claimed-epsilon", delta_flag="--delta")
    points, _, rows = make_canaries(canary_kind, X, y, m, seed)
    exclude = None if rows is None else y[rows]
    pilot_seed, run_seed = _distinct_seeds(seed, _STREAM_MODELS, 2)
    coins = np.random.default_rng(np.random.SeedSequence([int(seed), _STREAM_COINS])).random(m) < 0.5
    with _pool_for(trainer, pool, workers, timeout) as runner:
        canary_labels = _pilot_labels(runner, trainer, X, y, points, exclude, [pilot_seed], n_classes)
        X_train = np.vstack([X, points[coins]])
        y_train = np.concatenate([y, canary_labels[coins]])
        (log_probs,) = _train_many(runner, trainer, [(X_train, y_train, run_seed, points)])
    scores = scores_from_log_probabilities(log_probs, canary_labels, statistic)
    finite = scores[np.isfinite(scores)]
    floor = (finite.min() - 1.0) if finite.size else 0.0
    ranked = np.where(np.isfinite(scores), scores, floor)
    if coins.all() or not coins.any():
        raise AuditInputError("--canaries", f"all {m} coins came up the same; use more canaries")
    try:
        result = epsilon_lower_bound_one_run(ranked, coins, d, confidence)
    except ValueError as exc:
        raise AuditInputError("--canaries", str(exc)) from None
    ceiling = ceiling_one_run(m, d, result.confidence)
    return {
        "audit": "canary, one run",
        "trainer": _trainer_name(trainer),
        "canary_kind": canary_kind,
        "n_canaries": m,
        "n_inserted": int(coins.sum()),
        "n_training_records": int(X.shape[0]),
        "seed": int(seed),
        "run_seed": run_seed,
        "pilot_seed": pilot_seed,
        "statistic": statistic,
        "scores": _finite_for_json(scores),
        "inserted": [bool(c) for c in coins],
        "confidence": result.confidence,
        "delta": d,
        "details": result.details,
        "claimed_epsilon": eps,
        "epsilon_lower_bound": float(result.epsilon),
        "ceiling": ceiling,
        "violation": bool(result.epsilon > eps),
        "verdict": claim_verdict(bound=float(result.epsilon), ceiling=ceiling, claimed_epsilon=eps, delta=d,
                                 needed=canaries_needed_one_run(eps, d, result.confidence),
                                 unit="canaries (--canaries)", confidence=result.confidence),
    }


# --------------------------------------------------------------------------------------------------
# One entry point for the CLI
# --------------------------------------------------------------------------------------------------


def default_audit_data(n_rows: int = 256, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The harness's default synthetic table (`targets.datasets.make_default_tabular`), small."""
    from targets.datasets import make_default_tabular

    n = _check_count("--rows", n_rows, 20)
    data = make_default_tabular(n, seed)
    return data.features.astype(np.float32), data.labels.astype(np.int64)


def run_canary_audit(
    trainer: str | Callable,
    *,
    kind: str = "out_of_distribution",
    mode: str = "profile",
    n_models: int | None = None,
    n_canaries: int | None = None,
    claimed_epsilon: float | None = None,
    delta: float | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    features=None,
    labels=None,
    n_rows: int = 256,
    pool=None,
    workers: int | None = None,
    timeout: float | None = TRAIN_TIMEOUT_S,
) -> dict[str, Any]:
    """`privacy-audit canary-audit`: resolve the trainer's claim, run the chosen black-box audit.

    `trainer` is a "module:function" string or a picklable callable; it is loaded and called only
    in isolated worker processes (`pool`, else a WorkerPool of `workers`, default the cores), and
    its CLAIM is read there too: the parent never imports the user's module.
    `mode`: "profile" (the default, `profile_canary_audit`: `n_models` independent runs, default
    48000, plus a quarter as many pilot runs, tested against the claim's whole trade-off curve),
    "multi-canary" (`multi_canary_audit`: `n_models` runs × `n_canaries`
    column canaries, default 200 × 32), "multi" (`multi_run_canary_audit`: K = `n_models` runs
    per side with one canary of `kind`, default 200) or "one-run" (`n_canaries` canaries of
    `kind` in one run, default 200). `kind="dirac"` is refused (exit 2): the Dirac canary is a
    white-box gradient canary that a black-box `train(features, labels, seed)` cannot receive,
    and auditing some other DP-SGD under this trainer's name would say nothing about it.
    Data: (`features`, `labels`) or, when None, the harness's default synthetic table with
    `n_rows` rows. Adds "claim" (where ε came from) and "mode" to the result.
    """
    trainer = _check_trainer(trainer)
    if kind == "dirac":
        raise AuditInputError(
            "--kind", "dirac inserts a gradient canary inside DP-SGD, which a black-box train(features, labels, "
            "seed) cannot receive; use --kind out_of_distribution or mislabeled to audit this trainer, or "
            "`privacy-audit whitebox-audit --factory module:function` to audit an Opacus training setup with it",
        )
    if kind not in CANARY_KINDS:
        raise AuditInputError("--kind", f"expected one of {', '.join(CANARY_KINDS)}, got {kind!r}")
    if mode not in AUDIT_MODES:
        raise AuditInputError("--mode", f"expected one of {', '.join(AUDIT_MODES)}, got {mode!r}")
    if mode in ("profile", "multi-canary") and kind != "out_of_distribution":
        raise AuditInputError("--kind", f"the {mode} mode uses out-of-distribution column canaries; "
                              "use --mode multi or one-run for mislabeled canaries")
    default_models, default_canaries = MODE_DEFAULTS[mode]
    n_models = default_models if n_models is None else n_models
    n_canaries = default_canaries if n_canaries is None else n_canaries
    # Everything checkable without running user code is checked before a worker starts.
    if mode != "one-run":
        _check_count("--models", n_models, 4 if mode in ("profile", "multi-canary") else 2)
    if mode not in ("multi", "profile"):
        _check_count("--canaries", n_canaries, 1 if mode == "multi-canary" else 2)
    if claimed_epsilon is not None:
        validate_claim(claimed_epsilon, 0.0 if delta is None else delta, epsilon_flag="--claimed-epsilon",
                       delta_flag="--delta")
    if features is None:
        _check_count("--rows", n_rows, 20)
    _check_canary_memory(mode, int(n_models or 0), int(n_canaries or 0),
                         int(n_rows if features is None else len(features)))
    if features is None:
        features, labels = default_audit_data(n_rows, seed)
    with _pool_for(trainer, pool, workers, timeout) as runner:
        (declared,) = runner.map(declared_claim_task, [(trainer,)])
        claim = claim_from_declaration(*declared, claimed_epsilon=claimed_epsilon, delta=delta)
        common = dict(claimed_epsilon=claim.epsilon, delta=claim.delta, confidence=confidence, seed=seed, pool=runner)
        # The accountant's whole profile when it was told (σ, q, T) and ε was not overridden.
        dpsgd = ((claim.noise_multiplier, claim.sample_rate, claim.steps)
                 if claim.is_dpsgd and claimed_epsilon is None else None)
        if mode == "profile":
            result = profile_canary_audit(trainer, features, labels, n_runs=n_models, dpsgd=dpsgd, **common)
        elif mode == "multi-canary":
            result = multi_canary_audit(trainer, features, labels, n_runs=n_models, n_canaries=n_canaries,
                                        dpsgd=dpsgd, **common)
        elif mode == "multi":
            result = multi_run_canary_audit(trainer, features, labels, canary_kind=kind, n_models=n_models, **common)
        else:
            result = one_run_canary_audit(trainer, features, labels, n_canaries=n_canaries, canary_kind=kind,
                                          **common)
    result["mode"] = mode
    result["trainer"] = _trainer_name(trainer)
    result["claim"] = claim.to_dict()
    # Black-box canaries read from the final model: the ceiling is not their power (mode_power).
    result["power"] = canary_mode_power(mode, n_canaries if mode == "one-run" else n_models)
    result["verdict"] = apply_power(result["verdict"], result["power"])
    return result
