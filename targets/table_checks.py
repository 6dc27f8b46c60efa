"""Checks every reader of a user's table applies before the data is used.

pandas is forgiving where an audit must not be: it renames a repeated header `a,a,y` to `a, a.1,
y` (and the audit then blames a missing `a.1`), it keeps lists and dicts in object columns of a
Parquet file, and ±1e308 values turn distances and standardisation into inf/NaN. These checks
refuse such tables with one message naming the file and the column.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from audit.errors import AuditInputError

__all__ = ["MAX_ABS_VALUE", "MAX_CLASSES", "check_cells", "check_class_count", "check_unique_header"]

# |x| above this squares to beyond float64's range in distance and variance computations.
MAX_ABS_VALUE = 1e100
# A membership audit trains a softmax head per class and needs rows per class; beyond this the
# "labels" are almost certainly identifiers or a wrong column.
MAX_CLASSES = 1000


def _name(value: object) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:59] + "…"


def check_unique_header(path: str | Path, kind: str, where: str) -> None:
    """Refuse a file whose header repeats a column name (read before pandas renames the repeat)."""
    try:
        if kind == "csv":
            header = pd.read_csv(path, header=None, nrows=1, dtype=str).iloc[0].tolist()
        else:
            import pyarrow.parquet as pq

            header = pq.read_schema(path).names
    except Exception:  # unreadable: the reader that follows reports it
        return
    repeated = [name for name, count in Counter(map(str, header)).items() if count > 1]
    if repeated:
        raise AuditInputError(
            f"{where}: column '{_name(repeated[0])}'",
            "appears more than once in the header; column names must be unique",
        )


def check_cells(frame: pd.DataFrame, where: str) -> None:
    """Scalars only (no lists, dicts or bytes in a cell); numbers finite-or-NaN and |x| ≤ MAX_ABS_VALUE.

    NaN is left to the caller's missing-value policy; ±inf and huge magnitudes are refused here.
    """
    for column in frame.columns:
        values = frame[column]
        if pd.api.types.is_bool_dtype(values):
            continue
        if pd.api.types.is_numeric_dtype(values):
            numeric = values.to_numpy(dtype=np.float64, na_value=np.nan)
            bad = np.isinf(numeric) | (np.abs(np.nan_to_num(numeric)) > MAX_ABS_VALUE)
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise AuditInputError(
                    f"{where}: column '{_name(column)}'",
                    f"row {row + 2} holds {numeric[row]:g}; values must be finite with magnitude ≤ {MAX_ABS_VALUE:g}",
                )
        elif values.dtype == object:
            for row, cell in enumerate(values.to_numpy()):
                if isinstance(cell, (list, tuple, dict, set, bytes, bytearray, np.ndarray)):
                    raise AuditInputError(
                        f"{where}: column '{_name(column)}'",
                        f"row {row + 2} holds a {type(cell).__name__}; every cell must be a single number or text",
                    )


def check_class_count(n_classes: int, where: str) -> None:
    if n_classes > MAX_CLASSES:
        raise AuditInputError(
            where, f"has {n_classes} distinct classes (more than {MAX_CLASSES}); is this really the label column?"
        )
