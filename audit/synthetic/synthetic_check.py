"""The `synth-check` job's input side: a user's train, holdout and synthetic files, read strictly.

The evaluation itself is `audit.statistics.synthetic_evaluation.synthetic_privacy_checks` (shared
with the main run's synthesizer sweep).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from targets.table_checks import check_cells, check_unique_header
from targets.tabular_encoding import NanPolicy, SyntheticDataError

__all__ = ["read_table", "synthetic_check_results"]

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
        raise SyntheticDataError(
            where, f"unknown file type '{suffix or p.name}'; expected .csv, .csv.gz, .parquet or .pq"
        )
    if not p.is_file():
        raise SyntheticDataError(where, "does not exist or is not a file")
    check_unique_header(p, kind, where)
    try:
        df = pd.read_csv(p) if kind == "csv" else pd.read_parquet(p)
    except pd.errors.EmptyDataError as exc:
        raise SyntheticDataError(where, "is empty") from exc
    except Exception as exc:  # pandas/pyarrow raise many types for a corrupt file; all mean "unreadable"
        raise SyntheticDataError(
            where, f"cannot be read as {kind.upper()}: {type(exc).__name__}: {str(exc)[:160]}"
        ) from None
    if df.shape[1] == 0:
        raise SyntheticDataError(where, "has no columns")
    if df.shape[0] == 0:
        raise SyntheticDataError(where, "has no rows")
    check_cells(df, where)
    df.attrs["source"] = str(p)
    return df


def synthetic_check_results(
    train: pd.DataFrame,
    holdout: pd.DataFrame,
    synthetic: pd.DataFrame,
    *,
    sources: tuple[str, str, str] = ("train", "holdout", "synthetic"),
    generator: str = "user-supplied",
    nan_policy: NanPolicy = "error",
    target_column: str | None = None,
    claimed_epsilon: float | None = None,
    delta: float = 1e-5,
    membership_randomized: bool = False,
    subsample_train: bool = False,
    seed: int = 0,
    fail_on_leak: bool = True,
    environment: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The synth-check results dict (schema_version 3, verdict not yet decided) for three tables.

    The checks are `synthetic_privacy_checks`; `sources` are the three tables' paths (or names) as
    recorded in `config`; `fail_on_leak` is recorded for `audit.machinery.verdict.verdict_for_results`,
    which decides the verdict (a LEAKS statement on the user's own release fails unless False).
    """
    from audit.machinery.environment import describe_environment
    from audit.statistics.synthetic_evaluation import synthetic_privacy_checks

    entry = synthetic_privacy_checks(
        train,
        holdout,
        synthetic,
        nan_policy=nan_policy,
        target_column=target_column,
        seed=seed,
        delta=delta,
        membership_randomized=membership_randomized,
        subsample_train=subsample_train,
        accountant_epsilon=claimed_epsilon,
    )
    entry = {"generator": generator, "epsilon_target": claimed_epsilon, **entry}
    return {
        "schema_version": 3,
        "config": {
            "name": "synth-check",
            "train": sources[0],
            "holdout": sources[1],
            "synthetic": sources[2],
            "nan_policy": nan_policy,
            "target_column": target_column,
            "delta": delta,
            "seed": seed,
            "claimed_epsilon": claimed_epsilon,
            "membership_randomized": membership_randomized,
        },
        "environment": environment if environment is not None else describe_environment("cpu", seed),
        "data": {"description": "user-supplied train / holdout / synthetic tables"},
        "attacks_run": ["distance"],
        "targets": [],
        "synthetic": [entry],
        "notes": list(entry.get("warnings", [])),
        "verdict": {"fail_on_leak": bool(fail_on_leak)},  # decided by audit.machinery.verdict when written
    }
