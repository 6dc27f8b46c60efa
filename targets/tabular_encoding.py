"""One mixed-type encoding for every synthetic-data distance: fitted on train + holdout only.

The distance all synthetic-data checks use (docs/synth-check.md) is a *root-mean-square
Gower distance*: for records x, y with p columns,

    d(x, y) = sqrt( (1/p) · Σ_c δ_c(x, y)² )

    numeric c:      δ_c = |clip(x_c) − clip(y_c)| / range_c      (in [0, 1])
    categorical c:  δ_c = 0 if x_c == y_c else 1

where range_c and the clip interval [min_c, max_c] come from train ∪ holdout (never from the
synthetic data: a release must not move the ruler it is measured with). Clipping a value outside
the fitted interval to its edge is what caps every column's contribution at 1, so d ∈ [0, 1].

The encoding makes this distance *exactly the Euclidean distance between encoded rows*:
numeric c → one coordinate (clip(x_c) − min_c) / range_c / √p; categorical c → one-hot over the
fitted categories, each hot coordinate 1/√(2p) (two rows that differ put 1/√(2p) in two different
coordinates: squared distance 2 · 1/(2p) = 1/p, i.e. δ_c = 1). Euclidean rather than the
classical L1 Gower mean was chosen for speed: squared Euclidean distances come from one matrix
product (BLAS), L1 needs an explicit |x − y| per pair and coordinate (measured ~10× slower on
2 CPU cores; see attacks/distance.py and benchmarks/bench_synthetic.py). Both weigh every
column equally and cap its contribution at 1; the RMS aggregation weighs one large difference
more than several small ones, where the mean (L1) Gower would weigh them alike.

Edge cases, all deliberate:

* a category never seen in train/holdout (only the synthetic data can have one) goes to a shared
  "unseen" coordinate: it mismatches every real row (δ = 1), but two different unseen values look
  equal to each other; `unseen_categories` counts them so callers can warn;
* a numeric column that is constant in train ∪ holdout has range 0: it is encoded as 0 for every
  row (after clipping, any value equals the constant), so it never contributes;
* missing values follow an explicit `NanPolicy` (below); ±inf is always an error.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

from audit.errors import AuditInputError

__all__ = [
    "SyntheticDataError",
    "NanPolicy",
    "ColumnKind",
    "MixedTypeEncoder",
    "column_kind",
    "rms_gower_distance",
]

NanPolicy = Literal["error", "drop_rows", "indicator"]
"""What to do with missing values (NaN/None/NA), in any of train, holdout or synthetic:

- "error" (default): refuse, naming the file role and the column;
- "drop_rows": drop every row with a missing value (callers report how many);
- "indicator": keep them; a missing categorical value is its own category, a missing numeric
  value is encoded as the column midpoint plus a missing-indicator coordinate of weight √(3/4), so
  missing vs present contributes δ² = 3/4 + (v − 1/2)² ∈ [3/4, 1] and missing vs missing 0.
"""
ColumnKind = Literal["numeric", "categorical"]

_NAN_POLICIES: tuple[str, ...] = get_args(NanPolicy)
_MISSING_INDICATOR_WEIGHT = math.sqrt(0.75)


class SyntheticDataError(AuditInputError):
    """Bad synthetic-check input: `where` names the file role (train/holdout/synthetic) and column."""


def _describe(df: pd.DataFrame, role: str) -> str:
    source = df.attrs.get("source") if hasattr(df, "attrs") else None
    return f"{role} ({source})" if source else role


def column_kind(series: pd.Series) -> ColumnKind | None:
    """ "numeric" for int/float columns, "categorical" for object/category/bool/string, else None."""
    dtype = series.dtype
    if ptypes.is_bool_dtype(dtype):
        return "categorical"
    if ptypes.is_numeric_dtype(dtype) and not ptypes.is_complex_dtype(dtype):
        return "numeric"
    if isinstance(dtype, pd.CategoricalDtype) or ptypes.is_object_dtype(dtype) or ptypes.is_string_dtype(dtype):
        return "categorical"
    return None


def _sort_key(value) -> tuple[str, str]:
    return (type(value).__name__, str(value))


def _numeric_values(series: pd.Series) -> np.ndarray:
    return series.to_numpy(dtype="float64", na_value=np.nan)


def _with_string_columns(df):
    # Files always have string headers; frames built in code may not (0, 1, ...).
    if isinstance(df, pd.DataFrame) and not all(isinstance(c, str) for c in df.columns):
        renamed = df.rename(columns=str)
        renamed.attrs = dict(df.attrs)
        return renamed
    return df


class MixedTypeEncoder:
    """Encode mixed numeric/categorical frames so that Euclidean distance = RMS Gower distance.

    scikit-learn style: configure in `__init__`, learn column kinds, ranges and categories in
    `fit(train_df, holdout_df)`, then `transform(df, role)` any frame with the same columns into a
    float32 array. Validation happens here, at the boundary: missing/extra columns, a column
    numeric in one file and text in another, empty frames, unsupported dtypes, ±inf and (with
    `nan_policy="error"`) missing values raise `SyntheticDataError` naming the role and column.
    """

    def __init__(self, nan_policy: NanPolicy = "error"):
        if nan_policy not in _NAN_POLICIES:
            raise ValueError(f"nan_policy: expected one of {_NAN_POLICIES}, got {nan_policy!r}")
        self.nan_policy: NanPolicy = nan_policy

    # ------------------------------------------------------------------ validation (boundary)

    def _check_not_empty(self, df: pd.DataFrame, role: str) -> None:
        if not isinstance(df, pd.DataFrame):
            raise SyntheticDataError(role, f"expected a pandas DataFrame, got {type(df).__name__}")
        if df.shape[1] == 0:
            raise SyntheticDataError(_describe(df, role), "has no columns")
        if df.shape[0] == 0:
            raise SyntheticDataError(_describe(df, role), "has no rows")
        duplicated = df.columns[df.columns.duplicated()].tolist()
        if duplicated:
            raise SyntheticDataError(_describe(df, role), f"duplicated column name(s) {duplicated}")

    def _kinds_of(self, df: pd.DataFrame, role: str) -> dict[str, ColumnKind]:
        kinds: dict[str, ColumnKind] = {}
        for column in df.columns:
            kind = column_kind(df[column])
            if kind is None:
                raise SyntheticDataError(
                    f"{_describe(df, role)}, column '{column}'",
                    f"unsupported dtype {df[column].dtype}; expected numbers or text/categories "
                    "(convert dates to numbers or strings first)",
                )
            kinds[str(column)] = kind
        return kinds

    def _check_schema(self, df: pd.DataFrame, role: str, reference_role: str = "train") -> None:
        self._check_not_empty(df, role)
        where = _describe(df, role)
        present = [str(c) for c in df.columns]
        missing = [c for c in self.columns_ if c not in present]
        extra = [c for c in present if c not in self.kinds_]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing column(s) {missing}")
            if extra:
                parts.append(f"unexpected column(s) {extra}")
            raise SyntheticDataError(where, "; ".join(parts) + f" compared with the {reference_role} data")
        kinds = self._kinds_of(df, role)
        for column in self.columns_:
            if kinds[column] != self.kinds_[column]:
                raise SyntheticDataError(
                    f"{where}, column '{column}'",
                    f"is {kinds[column]} (dtype {df[column].dtype}) but {self.kinds_[column]} in "
                    f"the {reference_role} data; the same column must have the same type in every file",
                )

    def _check_values(self, df: pd.DataFrame, role: str) -> None:
        where = _describe(df, role)
        for column in self.columns_:
            series = df[column]
            if self.kinds_[column] == "numeric":
                values = _numeric_values(series)
                n_inf = int(np.isinf(values).sum())
                if n_inf:
                    raise SyntheticDataError(
                        f"{where}, column '{column}'", f"{n_inf} infinite value(s); expected finite numbers"
                    )
            if self.nan_policy == "error":
                n_missing = int(series.isna().sum())
                if n_missing:
                    raise SyntheticDataError(
                        f"{where}, column '{column}'",
                        f"{n_missing} missing value(s) and nan_policy='error'; use nan_policy "
                        "'drop_rows' or 'indicator', or fill them first",
                    )

    # ------------------------------------------------------------------ policy

    def drop_missing(self, df: pd.DataFrame, role: str) -> tuple[pd.DataFrame, int]:
        """`(df, n_dropped)`: under "drop_rows" the rows without any missing value, else `df` as is.

        Call this before `transform` when you need to know which rows were kept.
        """
        df = _with_string_columns(df)
        if self.nan_policy != "drop_rows":
            return df, 0
        keep = ~df.isna().any(axis=1)
        n_dropped = int((~keep).sum())
        if n_dropped == 0:
            return df, 0
        kept = df.loc[keep]
        kept.attrs = dict(df.attrs)
        if kept.shape[0] == 0:
            raise SyntheticDataError(
                _describe(df, role), "every row has a missing value; nothing left after nan_policy='drop_rows'"
            )
        return kept, n_dropped

    # ------------------------------------------------------------------ fit / transform

    def fit(self, train_df: pd.DataFrame, holdout_df: pd.DataFrame | None = None) -> MixedTypeEncoder:
        """Learn column kinds, numeric [min, max] and categories from train (+ holdout if given)."""
        train_df = _with_string_columns(train_df)
        holdout_df = _with_string_columns(holdout_df)
        self._check_not_empty(train_df, "train")
        self.columns_: list[str] = [str(c) for c in train_df.columns]
        self.kinds_: dict[str, ColumnKind] = self._kinds_of(train_df, "train")
        frames = [("train", train_df)]
        if holdout_df is not None:
            self._check_schema(holdout_df, "holdout")
            frames.append(("holdout", holdout_df))
        for role, frame in frames:
            self._check_values(frame, role)
        frames = [(role, self.drop_missing(frame, role)[0]) for role, frame in frames]

        self.n_columns_ = len(self.columns_)
        self.numeric_min_: dict[str, float] = {}
        self.numeric_range_: dict[str, float] = {}
        self.categories_: dict[str, list] = {}
        for column in self.columns_:
            if self.kinds_[column] == "numeric":
                values = np.concatenate([_numeric_values(frame[column]) for _, frame in frames])
                finite = values[~np.isnan(values)]
                low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
                self.numeric_min_[column] = low
                self.numeric_range_[column] = high - low
            else:
                seen: set = set()
                for _, frame in frames:
                    seen.update(frame[column].dropna().unique().tolist())
                self.categories_[column] = sorted(seen, key=_sort_key)
        self._layout()
        return self

    def _layout(self) -> None:
        # Per column: (first coordinate, number of coordinates). Numeric: value [+ indicator];
        # categorical: fitted categories, then "unseen", then "missing" (indicator policy only).
        self.slices_: dict[str, tuple[int, int]] = {}
        offset = 0
        for column in self.columns_:
            if self.kinds_[column] == "numeric":
                width = 2 if self.nan_policy == "indicator" else 1
            else:
                width = len(self.categories_[column]) + 1 + (self.nan_policy == "indicator")
            self.slices_[column] = (offset, width)
            offset += width
        self.n_features_ = offset

    def transform(self, df: pd.DataFrame, role: str = "data") -> np.ndarray:
        """Encode `df` into a float32 array (n_rows, n_features_); Euclidean = RMS Gower distance.

        Under nan_policy "drop_rows" rows with a missing value are dropped first, so the result can
        have fewer rows than `df` (use `drop_missing` first to know which).
        """
        if not hasattr(self, "kinds_"):
            raise RuntimeError("MixedTypeEncoder.transform called before fit")
        df = _with_string_columns(df)
        self._check_schema(df, role)
        self._check_values(df, role)
        df, _ = self.drop_missing(df, role)
        p = self.n_columns_
        numeric_weight = 1.0 / math.sqrt(p)
        onehot_weight = 1.0 / math.sqrt(2 * p)
        encoded = np.zeros((df.shape[0], self.n_features_), dtype=np.float32)
        for column in self.columns_:
            start, width = self.slices_[column]
            if self.kinds_[column] == "numeric":
                values = _numeric_values(df[column])
                low, span = self.numeric_min_[column], self.numeric_range_[column]
                scaled = (np.clip(values, low, low + span) - low) / span if span > 0 else np.zeros_like(values)
                missing = np.isnan(values)
                if missing.any():  # only reachable under the "indicator" policy
                    scaled[missing] = 0.5
                    encoded[missing, start + 1] = _MISSING_INDICATOR_WEIGHT * numeric_weight
                encoded[:, start] = scaled * numeric_weight
            else:
                codes = self._category_codes(df[column], column)
                encoded[np.arange(df.shape[0]), start + codes] = onehot_weight
        return encoded

    def _category_codes(self, series: pd.Series, column: str) -> np.ndarray:
        categories = self.categories_[column]
        codes = pd.Categorical(series.astype(object), categories=categories).codes.astype(np.int64)
        missing = series.isna().to_numpy()
        codes[(codes < 0) & ~missing] = len(categories)  # "unseen"
        codes[missing] = len(categories) + 1  # "missing": only reachable under "indicator"
        return codes

    def unseen_categories(self, df: pd.DataFrame) -> dict[str, int]:
        """`{column: number of rows}` whose (non-missing) category was never seen in train/holdout."""
        df = _with_string_columns(df)
        counts = {}
        for column in self.columns_:
            if self.kinds_[column] == "categorical" and column in df.columns:
                codes = self._category_codes(df[column], column)
                n = int((codes == len(self.categories_[column])).sum())
                if n:
                    counts[column] = n
        return counts

    def describe(self) -> dict:
        """JSON-ready summary of what the distance is and which columns it uses."""
        return {
            "distance": "root-mean-square Gower: sqrt(mean over columns of delta^2), "
            "numeric delta = |difference| / train+holdout range (values clipped to that range), "
            "categorical delta = 0/1 mismatch; equals Euclidean distance on the encoding",
            "nan_policy": self.nan_policy,
            "n_columns": self.n_columns_,
            "n_features": self.n_features_,
            "numeric_columns": [c for c in self.columns_ if self.kinds_[c] == "numeric"],
            "categorical_columns": [c for c in self.columns_ if self.kinds_[c] == "categorical"],
        }


def rms_gower_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise distance between two encoded arrays of the same shape (Euclidean on the encoding)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return np.sqrt(((a - b) ** 2).sum(axis=-1))
