"""Canary records of the black-box canary audits (`audit.dp_validation.canary_audit`): where each
design puts its canary, and the training sets built around it. No user code runs here."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from audit.errors import AuditInputError

CANARY_KINDS = ("mislabeled", "out_of_distribution")
AUDIT_KINDS = CANARY_KINDS + ("dirac",)
# How far out the out-of-distribution canaries sit, in units of the largest distance of any real
# record from the data mean.
OOD_SCALE = 100.0
# Scales (× data radius) of the column canaries the pilot runs compare (`multi_canary_audit`).
COLUMN_CANARY_SCALES = (1.0, 10.0, 100.0)
# Scales (× data radius) of the profile audit's column canary the pilot runs compare (`profile_canary_audit`).
PROFILE_CANARY_SCALES = (0.1, 0.3, 1.0)
# Values (absolute) of the profile audit's one-class canary the pilot runs compare: 1 puts as much
# of the canary's gradient on its weights as on the bias (`one_class_canary`).
PROFILE_ONE_CLASS_VALUES = (1.0,)

# Independent seed streams derived from the one user seed.
_STREAM_CANARY, _STREAM_MODELS, _STREAM_COINS, _STREAM_DIRAC = range(4)


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
        return (
            np.vstack([X, self.features[None, :].astype(X.dtype)]),
            np.append(y, np.asarray(self.label, dtype=y.dtype)),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "features": [float(v) for v in self.features],
            "label": int(self.label),
            "adds_feature": self.adds_feature,
            "source_row": self.source_row,
        }


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


def make_canary(
    kind: str, features, labels, seed: int, *, label: int | None = None, scale: float = OOD_SCALE
) -> Canary:
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
        raise AuditInputError("kind", f"expected one of {', '.join(CANARY_KINDS)}, got {kind!r}")
    if label is not None and not (0 <= int(label) < n_classes):
        raise AuditInputError("label", f"expected a class index in 0..{n_classes - 1}, got {label!r}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), _STREAM_CANARY]))
    if kind == "mislabeled":
        row = int(rng.integers(X.shape[0]))
        if label is not None and int(label) == int(y[row]):
            raise AuditInputError(
                "label", f"a mislabeled canary needs a label other than the record's own ({int(y[row])})"
            )
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
            raise AuditInputError(
                "n_canaries", f"mislabeled canaries copy distinct records: at most {X.shape[0]}, got {m}"
            )
        rows = rng.choice(X.shape[0], size=m, replace=False)
        shift = rng.integers(1, n_classes, size=m)  # a different class, uniformly
        return X[rows].copy(), (y[rows] + shift) % n_classes, rows
    if kind == "out_of_distribution":
        centre, radius = _data_radius(X)
        directions = rng.normal(size=(m, X.shape[1]))
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        points = (centre + scale * radius * directions).astype(np.float32)
        return points, rng.integers(0, n_classes, size=m), None
    raise AuditInputError("kind", f"expected one of {', '.join(CANARY_KINDS)}, got {kind!r}")


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
    all labelled one class (but for one record of each class), and the canary, `value` in its own
    column and 0 elsewhere, carries another label. The model learns the bias toward the real
    records' class within a few steps, after which their residuals (and gradients) vanish while
    the canary's stays near its largest:
    its clipped gradient is the full C at every step it is sampled, as a Dirac canary's would be.
    Its score (`_centred_logit`) reads its own column's weights AND the bias, so an error that
    gives the bias more than its share of the clipping budget (per-tensor clipping) shows, which
    the column design's gain over the base point (bias cancelled) cannot see.
    """
    base = np.zeros(int(n_features) + 1, dtype=np.float32)
    point = base.copy()
    point[-1] = float(value)
    return point, base


def one_class_labels(labels: np.ndarray, canary_label: int, n_classes: int) -> np.ndarray:
    """The one-class design's labels for the real records: the class after the canary's, but for the
    first record of each class, which keeps its own, so that a trainer sizing its output layer from
    the labels still sees every class."""
    y = np.asarray(labels)
    out = np.full_like(y, (int(canary_label) + 1) % int(n_classes))
    for c in np.unique(y):
        out[int(np.flatnonzero(y == c)[0])] = c
    return out
