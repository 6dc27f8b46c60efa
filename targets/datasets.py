"""Datasets the audit trains targets on: the seeded default generator, user files, sklearn's own.

Every loader returns a `TabularData` with float32 features (categoricals one-hot encoded) and
integer class labels 0..K-1. Nothing is downloaded: the default data is generated, the sklearn
datasets used are the ones it ships inside the package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from audit.errors import AuditInputError
from targets.table_checks import check_cells, check_class_count, check_unique_header

# Rare sub-populations of the default generator: (name, share of rows). Membership inference
# finds outliers first, so a realistic audit dataset must contain some.
RARE_SUBPOPULATIONS = (("rare_a", 0.01), ("rare_b", 0.01), ("rare_c", 0.005))
N_NUMERIC = 10
CATEGORICAL_LEVELS = {"region": 5, "device": 3, "plan": 4, "channel": 6}
LABEL_NOISE = 0.1


@dataclass(frozen=True)
class TabularData:
    features: np.ndarray  # (n, d) float32, standardised numerics + one-hot categoricals
    labels: np.ndarray  # (n,) int64 in 0..n_classes-1
    feature_names: list[str]
    n_classes: int
    description: str
    subpopulation: np.ndarray | None = field(default=None)  # (n,) str or None: where each row came from
    # The rows before encoding (mixed types, label included): what synthesizers are trained on.
    frame: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def n_rows(self) -> int:
        return int(self.labels.shape[0])


def make_default_tabular(n_rows: int, seed: int) -> TabularData:
    """The default audit dataset: a seeded, synthetic, mixed-type binary classification table.

    * 10 numeric columns from a mixture of 3 common Gaussian clusters, and 3 rare
      sub-populations (1 %, 1 %, 0.5 % of rows) placed far from them with their own labelling rule;
    * 4 categorical columns (3 to 6 levels) whose level frequencies depend on the cluster;
    * the label is a noisy non-linear function of the features, with 10 % of labels flipped, so a
      non-private model can only fit the training set by memorising individual rows — the
      behaviour membership inference exploits.
    """
    rng = np.random.default_rng(seed)
    n_rare = [max(1, int(round(share * n_rows))) for _, share in RARE_SUBPOPULATIONS]
    n_common = n_rows - sum(n_rare)
    cluster_centres = rng.normal(0.0, 1.5, size=(3, N_NUMERIC))
    cluster = rng.integers(0, 3, size=n_common)
    numeric_common = cluster_centres[cluster] + rng.normal(0.0, 1.0, size=(n_common, N_NUMERIC))
    groups = [np.array([f"common_{c}" for c in cluster], dtype=object)]
    numeric_parts = [numeric_common]
    for (name, _), count in zip(RARE_SUBPOPULATIONS, n_rare):
        centre = rng.normal(0.0, 1.0, size=N_NUMERIC) + rng.choice([-6.0, 6.0], size=N_NUMERIC)
        numeric_parts.append(centre + rng.normal(0.0, 0.7, size=(count, N_NUMERIC)))
        groups.append(np.full(count, name, dtype=object))
    numeric = np.vstack(numeric_parts)
    group = np.concatenate(groups)

    categorical = {}
    for column, n_levels in CATEGORICAL_LEVELS.items():
        # Each sub-population prefers different levels; a Dirichlet per group keeps it seeded.
        level = np.empty(n_rows, dtype=np.int64)
        for g in np.unique(group):
            rows = np.flatnonzero(group == g)
            probabilities = rng.dirichlet(np.full(n_levels, 0.7))
            level[rows] = rng.choice(n_levels, size=rows.size, p=probabilities)
        categorical[column] = level

    weights = rng.normal(0.0, 1.0, size=N_NUMERIC)
    level_effects = {c: rng.normal(0.0, 1.0, size=k) for c, k in CATEGORICAL_LEVELS.items()}
    logit = numeric @ weights / np.sqrt(N_NUMERIC) + 0.8 * np.sin(numeric[:, 0] * numeric[:, 1])
    logit += sum(level_effects[c][categorical[c]] for c in CATEGORICAL_LEVELS)
    is_rare = ~np.char.startswith(group.astype(str), "common")
    logit[is_rare] = -logit[is_rare]  # the rare groups follow the opposite rule: must be memorised
    labels = (logit > np.median(logit)).astype(np.int64)
    flip = rng.random(n_rows) < LABEL_NOISE
    labels[flip] = 1 - labels[flip]

    order = rng.permutation(n_rows)  # rare rows must not sit at the end of the table
    frame = pd.DataFrame(numeric[order], columns=[f"x{i}" for i in range(N_NUMERIC)])
    for column in CATEGORICAL_LEVELS:
        frame[column] = pd.Categorical([f"L{v}" for v in categorical[column][order]])
    features, names = encode_features(frame, source="default dataset")
    return TabularData(
        features=features,
        labels=labels[order],
        feature_names=names,
        n_classes=2,
        description=f"default synthetic tabular (n={n_rows}, seed={seed})",
        subpopulation=group[order].astype(str),
        frame=frame.assign(label=labels[order]),
    )


def encode_features(frame: pd.DataFrame, source: str) -> tuple[np.ndarray, list[str]]:
    """Numeric columns standardised, categorical/text/bool columns one-hot; NaN is refused.

    NaN is refused rather than imputed: a silent imputation would change which rows look like
    outliers, which is exactly what the audit measures.
    """
    nan_columns = [c for c in frame.columns if frame[c].isna().any()]
    if nan_columns:
        raise AuditInputError(
            f"{source}: column '{nan_columns[0]}'",
            f"contains missing values (NaN) in {int(frame[nan_columns[0]].isna().sum())} row(s); "
            "drop or impute them before the audit",
        )
    parts, names = [], []
    for column in frame.columns:
        values = frame[column]
        if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values):
            dummies = pd.get_dummies(values.astype(str), prefix=str(column), dtype=np.float32)
            parts.append(dummies.to_numpy())
            names.extend(dummies.columns.astype(str))
        else:
            numeric = values.to_numpy(dtype=np.float64)
            if not np.isfinite(numeric).all():
                raise AuditInputError(f"{source}: column '{column}'", "contains infinite values")
            std = numeric.std()
            scaled = (numeric - numeric.mean()) / (std if std > 0 else 1.0)
            parts.append(scaled[:, None].astype(np.float32))
            names.append(str(column))
    if not parts:
        raise AuditInputError(source, "has no feature columns besides the label")
    return np.hstack(parts).astype(np.float32), names


def labels_to_classes(values: pd.Series, where: str) -> tuple[np.ndarray, int]:
    """Numeric labels → 0..K-1. Non-numeric or single-class labels are user errors."""
    if values.isna().any():
        raise AuditInputError(where, f"has {int(values.isna().sum())} missing label(s)")
    if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values):
        raise AuditInputError(where, f"must hold numeric class labels, got values such as {values.iloc[0]!r}")
    numeric = values.to_numpy()
    if np.issubdtype(numeric.dtype, np.floating) and not np.all(np.isfinite(numeric)):
        raise AuditInputError(where, "must hold integer class labels (found an infinite value)")
    if np.issubdtype(numeric.dtype, np.floating) and not np.all(numeric == np.round(numeric)):
        raise AuditInputError(where, "must hold integer class labels (found fractional values)")
    classes, encoded = np.unique(numeric, return_inverse=True)
    check_class_count(int(classes.size), where)
    if classes.size < 2:
        raise AuditInputError(where, f"has a single class ({classes[0].item()!r}); membership inference needs ≥ 2")
    return encoded.astype(np.int64), int(classes.size)


def read_table(path: str | Path, role: str = "data file") -> pd.DataFrame:
    """CSV or Parquet by suffix, with errors that name the file and its role."""
    path = Path(path)
    where = f"{role} '{path}'"
    if not path.is_file():
        raise AuditInputError(where, "does not exist or is not a file")
    suffix = path.suffix.lower()
    if suffix in (".csv", ".parquet", ".pq"):
        check_unique_header(path, "csv" if suffix == ".csv" else "parquet", where)
    try:
        if suffix == ".csv":
            frame = pd.read_csv(path)
        elif suffix in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
        else:
            raise AuditInputError(where, f"unsupported suffix '{suffix}'; expected .csv or .parquet")
    except AuditInputError:
        raise
    except Exception as exc:  # the parsers raise many types; all mean "not a readable table"
        raise AuditInputError(where, f"could not be read as {suffix[1:]} ({str(exc)[:160]})") from None
    if frame.empty:
        raise AuditInputError(where, "has no rows")
    check_cells(frame, where)
    return frame


def load_table_dataset(path: str | Path, label: str) -> TabularData:
    frame = read_table(path)
    if label not in frame.columns:
        shown = ", ".join(map(str, frame.columns[:10]))
        raise AuditInputError(f"data file '{path}'", f"has no label column '{label}' (columns: {shown})")
    labels, n_classes = labels_to_classes(frame[label], f"data file '{path}': label column '{label}'")
    features, names = encode_features(frame.drop(columns=[label]), source=f"data file '{path}'")
    return TabularData(features, labels, names, n_classes, f"{Path(path).name} (label '{label}')", frame=frame)


def load_sklearn_dataset(name: str) -> TabularData:
    """`breast_cancer` or `digits`: bundled inside scikit-learn, no download."""
    from sklearn import datasets

    loader = {"breast_cancer": datasets.load_breast_cancer, "digits": datasets.load_digits}[name]
    bunch = loader(as_frame=True)
    features, names = encode_features(bunch.data, source=f"sklearn {name}")
    labels, n_classes = labels_to_classes(bunch.target, f"sklearn {name} target")
    return TabularData(
        features, labels, names, n_classes, f"scikit-learn {name}", frame=bunch.data.assign(label=bunch.target)
    )


def load_dataset(source: str, *, n_rows: int, seed: int, path: str | None, label: str | None) -> TabularData:
    if source == "synthetic":
        return make_default_tabular(n_rows, seed)
    if source == "file":
        if path is None or label is None:  # the config's validation requires both for a file source
            raise ValueError("a file source needs data.path and data.label")
        return load_table_dataset(path, label)
    return load_sklearn_dataset(source)
