"""Privacy (DCR, NNDR) and fidelity/utility metrics of a synthetic table, as pure functions.

Distances are Euclidean on the `targets.tabular_encoding.MixedTypeEncoder` encoding, i.e. the
root-mean-square Gower distance documented there (each column contributes at most 1, d ∈ [0, 1]).
The exact, chunked nearest-neighbour search is `attacks.distance.nearest_neighbours` (never an
N × M matrix in memory); `nearest_distances` is re-exported here for convenience.

Each privacy metric has two entry points: `x(synthetic, train, ...)` on encoded arrays, and
`x_from_distances(...)` on nearest-neighbour distances, so that an orchestrator computing several
metrics can share one search (see `audit.statistics.synthetic_evaluation`). All results are JSON-ready dicts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from threadpoolctl import threadpool_limits

from attacks.distance import nearest_distances, nearest_neighbours
from targets.tabular_encoding import MixedTypeEncoder, SyntheticDataError, column_kind

__all__ = [
    "nearest_distances",
    "nndr",
    "nndr_from_distances",
    "nndr_real_vs_synthetic",
    "nndr_real_vs_synthetic_from_distances",
    "equal_size_reference_rows",
    "dcr",
    "dcr_from_distances",
    "column_fidelity",
    "correlation_distance",
    "tstr",
    "HOLDOUT_MIN_RATIO",
]

# A holdout under this fraction of the train size is "much smaller": refuse rather than silently
# throwing away most of the training set (the caller may opt in with subsample_train=True).
HOLDOUT_MIN_RATIO = 0.9
_PERCENTILES = {"p1": 1, "p10": 10, "median": 50}


def _distribution_summary(values: np.ndarray) -> dict[str, float | None]:
    if values.size == 0:
        return {name: None for name in (*_PERCENTILES, "mean")}
    summary: dict[str, float | None] = {name: float(np.percentile(values, q)) for name, q in _PERCENTILES.items()}
    summary["mean"] = float(values.mean())
    return summary


# --------------------------------------------------------------------------------------------------
# NNDR
# --------------------------------------------------------------------------------------------------


def nndr_from_distances(nearest_two: np.ndarray) -> dict[str, Any]:
    """NNDR summary from each synthetic row's distances to its two nearest train rows (n, 2)."""
    d = np.asarray(nearest_two, dtype=float)
    if d.ndim != 2 or d.shape[1] < 2:
        raise ValueError(f"nearest_two: expected shape (n, 2), got {d.shape}")
    first, second = d[:, 0], d[:, 1]
    # 0/0 happens only when the nearest train row is an exact copy (and so is the 2nd): a copy is
    # the leakiest case, so it gets the leakiest value, 0.
    ratio = np.divide(first, second, out=np.zeros_like(first), where=second > 0)
    return {
        **_distribution_summary(ratio),
        "n_synthetic": int(ratio.size),
        "zero_over_zero": "0 (the nearest train row is an exact copy)",
        "definition": "per synthetic row, d(nearest train row) / d(second-nearest train row); "
        "near 0 = near-copy of one training record",
    }


def nndr(synthetic, train) -> dict[str, Any]:
    """Nearest-neighbour distance ratio of each synthetic row w.r.t. the training rows.

    NNDR = d(nearest train) / d(2nd-nearest train), one of the DCR/NNDR synthetic-data privacy
    metrics (e.g. Zhao et al. 2021, "CTAB-GAN: Effective Table Data Synthesizing",
    arXiv 2102.08369). Values near 0 mean a synthetic row sits on one training record rather
    than in a dense region. Returns the percentiles p1, p10, median and the mean of the ratios.
    """
    return nndr_from_distances(nearest_distances(synthetic, train, k=2))


def nndr_real_vs_synthetic_from_distances(
    nearest_real: np.ndarray, nearest_other_synthetic: np.ndarray
) -> dict[str, Any]:
    """The textbook variant: d(nearest real row) / d(nearest OTHER synthetic row), per synthetic row.

    A ratio is undefined when the nearest other synthetic row is an exact duplicate (denominator 0):
    such rows are left out and counted in `n_excluded_duplicate_synthetic`.
    """
    real = np.asarray(nearest_real, dtype=float).reshape(-1)
    other = np.asarray(nearest_other_synthetic, dtype=float).reshape(-1)
    defined = other > 0
    ratio = real[defined] / other[defined]
    return {
        **_distribution_summary(ratio),
        "n_synthetic": int(real.size),
        "n_excluded_duplicate_synthetic": int((~defined).sum()),
        "definition": "per synthetic row, d(nearest train row) / d(nearest other synthetic row); "
        "well below 1 = closer to a training record than synthetic rows are to each other",
    }


def nndr_real_vs_synthetic(synthetic, train) -> dict[str, Any]:
    """Distance to the nearest real (train) row over distance to the nearest other synthetic row."""
    nearest_real = nearest_distances(synthetic, train, k=1)[:, 0]
    nearest_other = nearest_distances(synthetic, synthetic, k=1, exclude_self=True)[:, 0]
    return nndr_real_vs_synthetic_from_distances(nearest_real, nearest_other)


# --------------------------------------------------------------------------------------------------
# DCR
# --------------------------------------------------------------------------------------------------


def equal_size_reference_rows(
    n_train: int, n_holdout: int, *, subsample_train: bool = False, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """`(train_rows, holdout_rows, warnings)`: equal-size index sets for DCR (ideal share 0.5).

    A larger holdout is subsampled (seeded) to the train size. A smaller one within
    `HOLDOUT_MIN_RATIO` of it, or any smaller one when `subsample_train`, makes the train set be
    subsampled instead; a much smaller one otherwise raises `SyntheticDataError`: dropping most
    training rows would hide copies of the dropped ones.
    """
    rng = np.random.default_rng(seed)
    train_rows, holdout_rows, warnings = np.arange(n_train), np.arange(n_holdout), []
    if n_holdout > n_train:
        holdout_rows = np.sort(rng.choice(n_holdout, size=n_train, replace=False))
        warnings.append(
            f"holdout has {n_holdout} rows, train {n_train}: DCR uses a seeded random {n_train} "
            f"holdout rows (seed {seed}) so that both sides have the same size"
        )
    elif n_holdout < n_train:
        if n_holdout < HOLDOUT_MIN_RATIO * n_train and not subsample_train:
            raise SyntheticDataError(
                "holdout",
                f"has {n_holdout} rows but train has {n_train}; DCR needs a holdout of the same size "
                f"(at least {HOLDOUT_MIN_RATIO:.0%} of train). Provide a larger holdout, or pass "
                "subsample_train=True (CLI: --subsample-train) to compare against a random subset of the training rows",
            )
        train_rows = np.sort(rng.choice(n_train, size=n_holdout, replace=False))
        warnings.append(
            f"train has {n_train} rows, holdout {n_holdout}: DCR uses a seeded random {n_holdout} "
            f"train rows (seed {seed}); copies of the {n_train - n_holdout} left-out training "
            "rows are not counted as closer to train"
        )
    return train_rows, holdout_rows, warnings


def _permutation_null(
    closer: np.ndarray,
    untied: np.ndarray,
    train_index: np.ndarray,
    holdout_index: np.ndarray,
    n_train: int,
    n_holdout: int,
) -> tuple[float, float]:
    """`(p_value, standard error of the share)` of "closer to train" under random train/holdout labels.

    The binomial interval treats synthetic rows as independent trials, but rows that crowd around
    the same real record share their nearest neighbour, and then their outcomes move together
    (measured: a mode-collapsed DP generator gave dcr_share 0.446, and 0.554 with train and holdout
    swapped, both "significant" by the binomial). The right null is the holdout design itself:
    the generator never saw the holdout, so if it memorised nothing, which of the pooled real rows
    are "train" is a uniformly random split. Then K = Σ_r c_r L_r, with c_r the number of untied
    synthetic rows whose nearest real row is r and L_r the random train label, is the sum of a
    simple random sample of size n_train from the pool values c_r: mean n_train·c̄, variance
    n_train · n_holdout / (M − 1) · Var(c) (finite-population sampling, M = pool size). One-sided
    normal p-value for "closer to train".
    """
    pool = n_train + n_holdout
    nearest_real = np.where(closer, train_index, n_train + holdout_index)[untied]
    counts = np.bincount(nearest_real, minlength=pool).astype(float)
    k = float(closer[untied].sum())
    mean = n_train / pool * nearest_real.size
    variance = n_train * n_holdout / (pool - 1) * counts.var()
    if variance <= 0:
        return (1.0 if k <= mean else 0.0), 0.0
    sd = math.sqrt(variance)
    return float(stats.norm.sf((k - mean) / sd)), sd / closer.size


def dcr_from_distances(
    d_train: np.ndarray,
    d_holdout: np.ndarray,
    confidence: float = 0.95,
    warnings: Sequence[str] = (),
    *,
    train_index: np.ndarray | None = None,
    holdout_index: np.ndarray | None = None,
    n_train: int | None = None,
    n_holdout: int | None = None,
) -> dict[str, Any]:
    """DCR summary from each synthetic row's distance to its closest train and closest holdout row.

    `dcr_share` = fraction of synthetic rows strictly closer to train than to holdout, with an
    exact Clopper-Pearson interval (Clopper & Pearson 1934; `scipy.stats.binomtest`) that treats
    synthetic rows as independent. With train and holdout of equal size drawn from the same
    population, a generator that does not copy its training rows gives 0.5 minus half the tie
    rate, reported as `expected_share_if_not_memorising` (ties — common with few, categorical
    columns — count as "not closer"). `sign_test_p_value`: one-sided binomial test of "closer to
    train" on the untied rows. When the nearest rows' indices and the two set sizes are given,
    also `permutation_p_value` and `dcr_share_se_permutation`, which stay honest when synthetic
    rows crowd around a few real ones (see `_permutation_null`); flags should use that one.
    """
    d_train = np.asarray(d_train, dtype=float).reshape(-1)
    d_holdout = np.asarray(d_holdout, dtype=float).reshape(-1)
    if d_train.shape != d_holdout.shape or d_train.size == 0:
        raise ValueError(
            f"d_holdout: expected the same non-empty shape as d_train {d_train.shape}, got {d_holdout.shape}"
        )
    n = d_train.size
    closer_mask = d_train < d_holdout
    untied_mask = d_train != d_holdout
    closer = int(closer_mask.sum())
    untied = int(untied_mask.sum())
    ties = n - untied
    interval = stats.binomtest(closer, n).proportion_ci(confidence_level=confidence, method="exact")
    p_value = float(stats.binomtest(closer, untied, 0.5, alternative="greater").pvalue) if untied else 1.0
    permutation_p = permutation_se = None
    if train_index is not None and holdout_index is not None and n_train and n_holdout:
        permutation_p, permutation_se = _permutation_null(
            closer_mask,
            untied_mask,
            np.asarray(train_index).reshape(-1),
            np.asarray(holdout_index).reshape(-1),
            int(n_train),
            int(n_holdout),
        )
    return {
        "dcr_share": closer / n,
        "dcr_share_ci": [float(interval.low), float(interval.high)],
        "tie_share": ties / n,
        "expected_share_if_not_memorising": 0.5 * (1 - ties / n),
        "sign_test_p_value": p_value,
        "permutation_p_value": permutation_p,
        "dcr_share_se_permutation": permutation_se,
        "median_dcr_train": float(np.median(d_train)),
        "median_dcr_holdout": float(np.median(d_holdout)),
        "exact_match_rate": float((d_train == 0).mean()),
        "exact_match_rate_holdout": float((d_holdout == 0).mean()),
        "confidence": confidence,
        "n_synthetic": n,
        "warnings": list(warnings),
        "definition": "distance from each synthetic row to its closest train / holdout row; "
        "dcr_share = fraction strictly closer to train (ideal 0.5 with equal-size sets); "
        "exact match = distance 0 after encoding",
    }


def dcr(
    synthetic,
    train,
    holdout,
    confidence: float = 0.95,
    *,
    subsample_train: bool = False,
    seed: int = 0,
) -> dict[str, Any]:
    """Distance to closest record against train and against an equal-size holdout.

    Yale et al. 2019, "Privacy Preserving Synthetic Health Data" (ESANN), and the train-vs-holdout
    comparison of Platzer & Reutterer 2021, "Holdout-Based Empirical Assessment of Mixed-Type
    Synthetic Data", Front. Big Data 4:679939. Sizes are equalised by `equal_size_reference_rows`;
    see `dcr_from_distances` for the returned quantities.
    """
    train = np.asarray(train)
    holdout = np.asarray(holdout)
    train_rows, holdout_rows, warnings = equal_size_reference_rows(
        train.shape[0], holdout.shape[0], subsample_train=subsample_train, seed=seed
    )
    d_train, i_train = nearest_neighbours(synthetic, train[train_rows], k=1)
    d_holdout, i_holdout = nearest_neighbours(synthetic, holdout[holdout_rows], k=1)
    result = dcr_from_distances(
        d_train[:, 0],
        d_holdout[:, 0],
        confidence,
        warnings,
        train_index=i_train[:, 0],
        holdout_index=i_holdout[:, 0],
        n_train=train_rows.size,
        n_holdout=holdout_rows.size,
    )
    result.update({"n_train": int(train_rows.size), "n_holdout": int(holdout_rows.size)})
    return result


# --------------------------------------------------------------------------------------------------
# Fidelity and utility (context for the privacy numbers: a "private" release that is noise is moot)
# --------------------------------------------------------------------------------------------------


def _total_variation(a: pd.Series, b: pd.Series) -> float:
    p = a.astype(object).value_counts(normalize=True, dropna=False)
    q = b.astype(object).value_counts(normalize=True, dropna=False)
    p, q = p.align(q, fill_value=0.0)
    return float(0.5 * np.abs(p.to_numpy() - q.to_numpy()).sum())


def column_fidelity(real_df: pd.DataFrame, synthetic_df: pd.DataFrame) -> dict[str, Any]:
    """Per-column marginal distances, real vs synthetic.

    Numeric columns: two-sample Kolmogorov-Smirnov statistic (max CDF gap, `scipy.stats.ks_2samp`,
    missing values ignored). Categorical columns: total variation distance ½ Σ |p − q| over the
    union of categories (missing is a category). Both are in [0, 1], 0 = identical marginals.
    """
    ks, tvd = {}, {}
    for column in real_df.columns:
        kind = column_kind(real_df[column])
        if kind == "numeric":
            a = real_df[column].to_numpy(dtype="float64", na_value=np.nan)
            b = synthetic_df[column].to_numpy(dtype="float64", na_value=np.nan)
            a, b = a[~np.isnan(a)], b[~np.isnan(b)]
            ks[str(column)] = float(stats.ks_2samp(a, b, method="asymp").statistic) if a.size and b.size else None
        else:
            tvd[str(column)] = _total_variation(real_df[column], synthetic_df[column])

    def _mean_max(values: dict) -> tuple[float | None, float | None]:
        finite = [v for v in values.values() if v is not None]
        return (float(np.mean(finite)), float(np.max(finite))) if finite else (None, None)

    mean_ks, max_ks = _mean_max(ks)
    mean_tvd, max_tvd = _mean_max(tvd)
    return {"ks": ks, "tvd": tvd, "mean_ks": mean_ks, "max_ks": max_ks, "mean_tvd": mean_tvd, "max_tvd": max_tvd}


def correlation_distance(real_df: pd.DataFrame, synthetic_df: pd.DataFrame) -> dict[str, Any]:
    """Frobenius norm of the difference of the numeric columns' Pearson correlation matrices.

    Undefined correlations (a constant column) count as 0. `null` with fewer than 2 numeric columns.
    """
    numeric = [c for c in real_df.columns if column_kind(real_df[c]) == "numeric"]
    if len(numeric) < 2:
        return {"frobenius": None, "n_numeric_columns": len(numeric)}

    def _corr(df: pd.DataFrame) -> np.ndarray:
        values = df[numeric].astype("float64")
        return np.nan_to_num(values.corr(method="pearson").to_numpy(), nan=0.0)

    difference = _corr(real_df) - _corr(synthetic_df)
    return {"frobenius": float(np.linalg.norm(difference, ord="fro")), "n_numeric_columns": len(numeric)}


_MAX_CLASSES_FOR_NUMERIC_TARGET = 20


def tstr(
    train_df: pd.DataFrame,
    holdout_df: pd.DataFrame,
    synthetic_df: pd.DataFrame,
    target_column: str,
    seed: int = 0,
) -> dict[str, Any]:
    """Train on synthetic, test on real (holdout), relative to train on real, test on the same holdout.

    Esteban, Hyland, Rätsch 2017, "Real-valued (Medical) Time Series Generation with Recurrent
    Conditional GANs", arXiv 1706.02633 (TSTR). Model: scikit-learn HistGradientBoosting on the
    MixedTypeEncoder encoding of the other columns. Classification (accuracy) when the target is
    categorical or has ≤ 20 distinct integer values, else regression (R²). `relative` =
    synthetic score / real score (1 = the synthetic data is as useful as the real data).
    """
    if target_column not in train_df.columns:
        raise SyntheticDataError(
            f"target column '{target_column}'", f"not in the train data (columns: {list(train_df.columns)})"
        )
    frames = {"train": train_df, "holdout": holdout_df, "synthetic": synthetic_df}
    frames = {role: df.loc[df[target_column].notna()] for role, df in frames.items()}
    for role, df in frames.items():
        if df.shape[0] == 0:
            raise SyntheticDataError(f"{role}, column '{target_column}'", "no rows with a target value")
    features = [c for c in train_df.columns if c != target_column]
    if not features:
        raise SyntheticDataError(f"target column '{target_column}'", "is the only column; nothing to predict from")
    encoder = MixedTypeEncoder(nan_policy="indicator").fit(frames["train"][features], frames["holdout"][features])
    x = {role: encoder.transform(df[features], role) for role, df in frames.items()}

    target = train_df[target_column]
    kind = column_kind(target)
    values = target.dropna()
    is_classification = kind == "categorical" or (
        values.nunique() <= _MAX_CLASSES_FOR_NUMERIC_TARGET and np.all(np.mod(values.to_numpy(float), 1) == 0)
    )

    def labels(df: pd.DataFrame) -> np.ndarray:
        column = df[target_column]
        if kind == "numeric":
            return column.to_numpy(dtype="float64")
        return column.astype(str).to_numpy()

    y = {role: labels(df) for role, df in frames.items()}
    scores = {}
    # One OpenMP thread: HistGradientBoosting's many short parallel regions stall on shared or
    # oversubscribed CPUs (measured 50 s instead of 1 s for 1 500 rows on 2 busy cores).
    with threadpool_limits(limits=1, user_api="openmp"):
        scores = _fit_and_score(x, y, bool(is_classification), seed)
    real = scores["train"]
    relative = scores["synthetic"] / real if real > 0 and math.isfinite(real) else None
    return {
        "target_column": target_column,
        "task": "classification" if is_classification else "regression",
        "metric": "accuracy" if is_classification else "r2",
        "model": "HistGradientBoosting" + ("Classifier" if is_classification else "Regressor"),
        "train_synthetic_test_holdout": scores["synthetic"],
        "train_real_test_holdout": real,
        "relative": relative,
    }


def _fit_and_score(x: dict, y: dict, is_classification: bool, seed: int) -> dict[str, float]:
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.metrics import accuracy_score, r2_score

    scores = {}
    for source in ("synthetic", "train"):
        if is_classification:
            if np.unique(y[source]).size < 2:
                # A one-class training set: the only possible model predicts that class.
                prediction = np.full(y["holdout"].shape, y[source][0])
            else:
                model = HistGradientBoostingClassifier(random_state=seed).fit(x[source], y[source])
                prediction = model.predict(x["holdout"])
            scores[source] = float(accuracy_score(y["holdout"], prediction))
        else:
            model = HistGradientBoostingRegressor(random_state=seed).fit(x[source], y[source])
            scores[source] = float(r2_score(y["holdout"], model.predict(x["holdout"])))
    return scores
