"""The `synth-check` job's input side: a user's train, holdout and synthetic files, read strictly.

The evaluation itself is `audit.statistics.synthetic_evaluation.synthetic_privacy_checks` (shared
with the main run's synthesizer sweep).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from targets.table_checks import check_cells, check_unique_header
from targets.tabular_encoding import SyntheticDataError

__all__ = ["read_table"]

_READERS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def read_table(path: str | Path, role: str) -> pd.DataFrame:
    """Read a CSV (`.csv`, `.csv.gz`) or Parquet (`.parquet`, `.pq`) file; `role` names it in errors.

    A missing, unreadable or empty file, or an unknown suffix, raises `SyntheticDataError` naming
    the role and the path. The path is kept in `df.attrs["source"]` for later messages.
    """
    p = Path(path)
    where = f"{role} file '{p}'"
    suffixes = [s.lower() for s in p.suffixes]
    suffix = suffixes[-2] if len(suffixes) >= 2 and suffixes[-1] == ".gz" else (suffixes[-1] if suffixes else "")
    kind = _READERS.get(suffix)
    if kind is None:
        raise SyntheticDataError(where, f"unknown file type '{suffix or p.name}'; expected .csv, .csv.gz, .parquet or .pq")
    if not p.is_file():
        raise SyntheticDataError(where, "does not exist or is not a file")
    check_unique_header(p, kind, where)
    try:
        df = pd.read_csv(p) if kind == "csv" else pd.read_parquet(p)
    except pd.errors.EmptyDataError as exc:
        raise SyntheticDataError(where, "is empty") from exc
    except Exception as exc:  # pandas/pyarrow raise many types for a corrupt file; all mean "unreadable"
        raise SyntheticDataError(where, f"cannot be read as {kind.upper()}: {type(exc).__name__}: {str(exc)[:160]}") from None
    if df.shape[1] == 0:
        raise SyntheticDataError(where, "has no columns")
    if df.shape[0] == 0:
        raise SyntheticDataError(where, "has no rows")
    check_cells(df, where)
    df.attrs["source"] = str(p)
    return df
