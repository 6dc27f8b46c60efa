"""The data files of `audit-model`: members, non-members and population as CSV / Parquet tables or `.npz`
arrays, read strictly (no transformation, no imputation, no re-encoding of labels), hashed per row to find
records shared between files, and the files' SHA-256 for the results.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from audit.errors import AuditInputError
from targets.datasets import read_table
from targets.table_checks import MAX_CLASSES


@dataclass(frozen=True)
class _Table:
    path: Path
    role: str
    features: np.ndarray  # (n, ...) float32, as given: (n, d) from tables, any shape from .npz
    labels: np.ndarray  # (n,) int64 class indices
    frame: pd.DataFrame | None  # tables: the feature columns + label, in the members file's column order
    hashes: np.ndarray  # (n,) one hash per row (features and label): duplicates between files


def _array_hashes(features: np.ndarray, labels: np.ndarray) -> np.ndarray:
    rows = np.ascontiguousarray(features.reshape(len(features), -1))
    return np.array([hash((row.tobytes(), int(label))) for row, label in zip(rows, labels)], dtype=np.int64)


def _from_arrays(features, labels, path: Path, role: str, shape: tuple | None) -> _Table:
    where = _where(role, path)
    features = np.asarray(features)
    labels = np.asarray(labels)
    if features.ndim < 2 or len(features) == 0:
        raise AuditInputError(
            f"{where}: features", f"must be an array (n, ...) with n ≥ 1 rows, got shape {features.shape}"
        )
    if not np.issubdtype(features.dtype, np.number) or np.issubdtype(features.dtype, np.complexfloating):
        raise AuditInputError(f"{where}: features", f"must hold real numbers, got dtype {features.dtype}")
    if not np.all(np.isfinite(features)):
        raise AuditInputError(f"{where}: features", "contains NaN or infinite values")
    if labels.shape != (len(features),):
        raise AuditInputError(
            f"{where}: labels", f"must have shape ({len(features)},), one per row; got {labels.shape}"
        )
    if shape is not None and tuple(features.shape[1:]) != shape:
        raise AuditInputError(
            f"{where}: features", f"rows have shape {tuple(features.shape[1:])}, the members' have {shape}"
        )
    labels = _class_indices(pd.Series(labels), f"{where}: labels")
    features = np.ascontiguousarray(features, dtype=np.float32)
    return _Table(
        path=path, role=role, features=features, labels=labels, frame=None, hashes=_array_hashes(features, labels)
    )


def _read_npz(path: Path, role: str, shape: tuple | None) -> _Table:
    """A `.npz` with arrays `features` (n, ...) — any shape, e.g. images n×C×H×W — and `labels` (n,)."""
    where = _where(role, path)
    if not path.is_file():
        raise AuditInputError(where, "does not exist or is not a file")
    try:
        with np.load(path, allow_pickle=False) as archive:  # object arrays would need unpickling: refused
            missing = [k for k in ("features", "labels") if k not in archive.files]
            if missing:
                raise AuditInputError(
                    where,
                    f"has no array '{missing[0]}' (arrays: {', '.join(archive.files) or 'none'}); "
                    "expected 'features' (n, ...) and 'labels' (n,)",
                )
            features, labels = archive["features"], archive["labels"]
    except AuditInputError:
        raise
    except ValueError as exc:
        raise AuditInputError(where, f"could not be read without unpickling ({exc})") from None
    except Exception as exc:  # zipfile.BadZipFile, OSError, ...
        raise AuditInputError(where, f"could not be read as .npz ({type(exc).__name__})") from None
    return _from_arrays(features, labels, path, role, shape)


def _read_data(source, role: str, label: str | None, reference: _Table | None) -> _Table:
    """A data file (CSV / Parquet with `label`, or .npz) or, from the Python API, a (features, labels) pair."""
    shape = tuple(reference.features.shape[1:]) if reference is not None else None
    if isinstance(source, tuple):
        return _from_arrays(source[0], source[1], Path(f"<{role} arrays>"), role, shape)
    path = Path(source)
    if path.suffix.lower() == ".npz":
        if reference is not None and reference.frame is not None:
            raise AuditInputError(_where(role, path), "is .npz while the members file is a table: use one format")
        return _read_npz(path, role, shape)
    if reference is not None and reference.frame is None:
        raise AuditInputError(_where(role, path), "is a table while the members file is .npz: use one format")
    if not label:
        raise AuditInputError("--label", f"the {role} '{path}' is a table: name its label column")
    columns = list(reference.frame.columns) if reference is not None and reference.frame is not None else None
    return _read_table(path, role, label, columns)


def _where(role: str, path: Path) -> str:
    return f"{role} '{path}'"


def _read_table(path: Path, role: str, label: str, columns: list[str] | None) -> _Table:
    frame = read_table(path, role=role)
    where = _where(role, path)
    frame.columns = [str(c) for c in frame.columns]
    if len(set(frame.columns)) != len(frame.columns):
        duplicate = next(c for c in frame.columns if list(frame.columns).count(c) > 1)
        raise AuditInputError(f"{where}: column '{duplicate}'", "appears more than once")
    if label not in frame.columns:
        shown = ", ".join(frame.columns[:10])
        raise AuditInputError(where, f"has no label column '{label}' (columns: {shown})")
    if columns is not None:  # every file must hold the members file's columns, no more, no fewer
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise AuditInputError(
                f"{where}: column '{missing[0]}'",
                f"is missing: every file must hold the members file's columns ({len(missing)} missing)",
            )
        extra = [c for c in frame.columns if c not in columns]
        if extra:
            raise AuditInputError(
                f"{where}: column '{extra[0]}'",
                "is not in the members file: every file must hold the same columns (no transformation is applied, "
                "so the model sees exactly these columns)",
            )
        frame = frame[columns]
    feature_columns = [c for c in frame.columns if c != label]
    if not feature_columns:
        raise AuditInputError(where, f"has no feature columns besides the label '{label}'")
    for column in feature_columns:
        values = frame[column]
        if values.isna().any():
            rows = np.flatnonzero(values.isna().to_numpy())
            raise AuditInputError(
                f"{where}: column '{column}'",
                f"contains missing values (NaN) in {rows.size} row(s), first at row {int(rows[0]) + 2}; "
                "no imputation is applied: give the values the model was trained on",
            )
        if not pd.api.types.is_numeric_dtype(values):
            raise AuditInputError(
                f"{where}: column '{column}'",
                f"must be numeric, already preprocessed as the model expects (no encoding is applied), "
                f"got values such as {values.iloc[0]!r}",
            )
        numeric = values.to_numpy(dtype=np.float64)
        if not np.isfinite(numeric).all():
            raise AuditInputError(f"{where}: column '{column}'", "contains infinite values")
        # Checked in the dtype the model is queried in: 1e39 is finite in float64 and inf in float32.
        too_big = np.abs(numeric) > float(np.finfo(np.float32).max)
        if too_big.any():
            row = int(np.flatnonzero(too_big)[0])
            raise AuditInputError(
                f"{where}: column '{column}'",
                f"row {row + 2} holds {numeric[row]:g}, beyond float32 "
                f"(|x| ≤ {float(np.finfo(np.float32).max):.3g}), the type the model is queried in",
            )
    labels = _class_indices(frame[label], f"{where}: label column '{label}'")
    features = frame[feature_columns].to_numpy(dtype=np.float32)
    return _Table(path=path, role=role, features=features, labels=labels, frame=frame, hashes=_row_hashes(frame))


def integer_label_values(values: pd.Series, where: str, noun: str) -> np.ndarray:
    """A label column's values as float64 integers: no missing, boolean, non-numeric, fractional or infinite
    value. `noun` says what the labels are ("class indices of the model's output", "class labels").
    Shared by `audit-model`'s data files and `audit-scores`' optional label column."""
    if values.isna().any():
        raise AuditInputError(where, f"has {int(values.isna().sum())} missing label(s)")
    if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values):
        raise AuditInputError(where, f"must hold integer {noun}, got values such as {str(values.iloc[0])[:40]!r}")
    numeric = values.to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(numeric)) or not np.all(numeric == np.round(numeric)):
        raise AuditInputError(where, f"must hold integer {noun.split(' of ')[0]} (found fractional or infinite values)")
    return numeric


def _class_indices(values: pd.Series, where: str) -> np.ndarray:
    """Labels as the model's output class indices: integers ≥ 0, used as they are (no re-encoding)."""
    numeric = integer_label_values(values, where, "class indices of the model's output")
    if numeric.min() < 0:
        raise AuditInputError(where, f"must hold class indices 0..K-1 of the model's output, found {numeric.min():g}")
    if numeric.max() >= MAX_CLASSES:  # checked before a K-class head is allocated
        raise AuditInputError(where, f"must hold class indices below {MAX_CLASSES}, found {numeric.max():g}")
    return numeric.astype(np.int64)


def _row_hashes(frame: pd.DataFrame) -> np.ndarray:
    return pd.util.hash_pandas_object(frame, index=False).to_numpy()


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as handle:  # read in blocks by hashlib (Python ≥ 3.11)
        return hashlib.file_digest(handle, "sha256").hexdigest()
