"""The singling-out risk of a synthetic release (Giomi et al. 2022; anonymeter's `SinglingOutEvaluator`):
predicates that single out one synthetic row, counted on the training rows and on the control rows.
The choices written down in `audit.statistics.synthetic_risks`'s docstring apply.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.stats import norm

from audit.statistics.synthetic_risk_base import (
    NULL_RESPLITS,
    _frames,
    _risk_record,
    _Table,
)

_QUERY_BATCH = 1000


def _as_matrix(table: _Table, role: str) -> np.ndarray:
    """Rows × columns (the table's column order): scaled numerics, categorical codes as floats (−1 = missing)."""
    return np.column_stack(
        [table.numeric[c][role] if c in table.numeric else table.codes[c][role].astype(float) for c in table.columns]
    )


_GE, _LE, _EQ, _ISNA = 0, 1, 2, 3


def _query_masks(data_t: np.ndarray, cols: np.ndarray, ops: np.ndarray, values: np.ndarray) -> np.ndarray:
    """queries × rows: which rows each predicate matches. data_t = columns × rows; cols, ops, values
    = queries × n_cols (a predicate is the AND of its n_cols conditions)."""
    mask = np.ones((cols.shape[0], data_t.shape[1]), dtype=bool)
    for j in range(cols.shape[1]):
        x = data_t[cols[:, j]]  # queries × rows
        v, op = values[:, j, None], ops[:, j]
        # x == v is x ≥ v and x ≤ v: two comparisons cover ≥, ≤ and ==.
        want_ge, want_le = np.isin(op, (_GE, _EQ))[:, None], np.isin(op, (_LE, _EQ))[:, None]
        with np.errstate(invalid="ignore"):
            mask &= (~want_ge | (x >= v)) & (~want_le | (x <= v))
        isna = np.flatnonzero(op == _ISNA)
        if isna.size:  # NaN compares False both ways: those conditions are checked apart
            mask[isna] &= np.isnan(x[isna])
    return mask


def _matched_rows(
    data_t: np.ndarray, cols: np.ndarray, ops: np.ndarray, values: np.ndarray, cap: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which rows (columns of data_t) each predicate matches, stopping a predicate at cap + 1 matches.

    Returns `(query, row)` pairs and `complete` per query: True = the pairs are ALL its matching
    rows (it matched ≤ cap rows), False = they are the first ≥ cap + 1 in row order, so its true
    count is larger than cap. Rows are scanned in chunks that grow from 1024; a predicate leaves
    the scan as soon as it is known to match more than `cap` rows, and most predicates built from
    a release match many rows, so they leave in the first chunk (exact counts, a fraction of the
    work of the full queries × rows mask).
    """
    n_queries, n_rows = cols.shape[0], data_t.shape[1]
    counts = np.zeros(n_queries, dtype=np.int64)
    active = np.arange(n_queries)
    pairs_q, pairs_r = [], []
    start, size = 0, 1024
    while start < n_rows and active.size:
        stop = min(start + size, n_rows)
        mask = _query_masks(data_t[:, start:stop], cols[active], ops[active], values[active])
        q, r = np.nonzero(mask)
        pairs_q.append(active[q])
        pairs_r.append(r + start)
        counts[active] += mask.sum(axis=1)
        active = active[counts[active] <= cap]
        start, size = stop, min(4 * size, 65536)
    pairs = (
        np.concatenate(pairs_q) if pairs_q else np.zeros(0, np.int64),
        np.concatenate(pairs_r) if pairs_r else np.zeros(0, np.int64),
    )
    return pairs[0], pairs[1], counts <= cap


def _count_in(query: np.ndarray, rows: np.ndarray, sides: np.ndarray, n_queries: int) -> np.ndarray:
    """Per query and side, how many of its (query, row) pairs have their row on that side
    (`sides`: real rows × sides, bool). A sparse product over the rows that occur only."""
    if query.size == 0:
        return np.zeros((n_queries, sides.shape[1]), dtype=np.int64)
    used, position = np.unique(rows, return_inverse=True)
    incidence = sparse.csr_matrix(
        (np.ones(query.size, np.int32), (query, position.reshape(-1))), shape=(n_queries, used.size)
    )
    return np.asarray(incidence @ sides[used].astype(np.int32), dtype=np.int64)


_PAIR_CAP = 64  # matches kept per predicate: beyond, "exactly one" is settled by the first 65 (below)


def _singled_out_counts(real_t: np.ndarray, cols, ops, values, sides: np.ndarray, seed) -> np.ndarray:
    """Per side (a boolean column over the real rows: train, each re-split half), then per
    complement of each side (control, the other halves), how many predicates match exactly one of
    that side's rows — exactly, without the queries × rows mask.

    The rows are scanned in a seeded random order, each predicate keeping its first 65 matches.
    A predicate with ≤ 64 matches is counted from all of them. One with more is not "exactly one"
    on a side that holds ≥ 2 of its kept matches; where a side holds < 2 of them (with 65 matches
    in random order that needs most of them on the other side: rare), its full match set is found.
    """
    n_queries, n_rows = cols.shape[0], real_t.shape[1]
    order = np.random.default_rng([*seed, 16]).permutation(n_rows)
    query, position, complete = _matched_rows(np.ascontiguousarray(real_t[:, order]), cols, ops, values, _PAIR_CAP)
    counts = _with_complements(_count_in(query, order[position], sides, n_queries), query, n_queries)
    # Incomplete predicates: a side holding ≥ 2 kept matches has ≥ 2 matches. Any other side is unsure.
    unsure = np.flatnonzero(~complete & (counts < 2).any(axis=1))
    if unsure.size:
        q, r, _ = _matched_rows(real_t, cols[unsure], ops[unsure], values[unsure], n_rows)
        counts[unsure] = _with_complements(_count_in(q, r, sides, unsure.size), q, unsure.size)
    return (counts == 1).sum(axis=0)


def _with_complements(counts: np.ndarray, query: np.ndarray, n_queries: int) -> np.ndarray:
    """Per-side counts followed by the counts on each side's complement (all pairs minus the side's)."""
    total = np.bincount(query, minlength=n_queries)[:, None]
    return np.concatenate([counts, total - counts], axis=1)


def singling_out_risk(
    train: pd.DataFrame,
    control: pd.DataFrame,
    synthetic: pd.DataFrame,
    *,
    n_attacks: int = 500,
    n_cols: int = 3,
    confidence: float = 0.95,
    seed: int = 0,
    max_attempts: int | None = None,
) -> dict[str, Any]:
    """Multivariate singling-out risk (Giomi et al. 2022, Sec. 5.1; Cohen & Nissim 2020, arXiv 1904.06009).

    Predicates are built from random synthetic rows on `n_cols` random columns and kept when they
    match exactly one (deduplicated) synthetic row; the attack wins on a predicate that matches
    exactly one training row, and the control attack on one that matches exactly one control row
    (training and control cut to the same size). Returns the risk record (value, ci, rates, counts).
    """
    rng = np.random.default_rng([seed, 11])
    frames = _frames(train, control, synthetic)
    frames = {role: df.drop_duplicates(ignore_index=True) for role, df in frames.items()}
    n_equal = min(len(frames["train"]), len(frames["control"]))
    for role in ("train", "control"):
        if len(frames[role]) > n_equal:
            keep = np.sort(rng.choice(len(frames[role]), n_equal, replace=False))
            frames[role] = frames[role].iloc[keep].reset_index(drop=True)
    table = _Table(frames, ruler=("train", "control"))
    n_columns = len(table.columns)
    n_cols = min(n_cols, n_columns)
    syn = _as_matrix(table, "synthetic")
    syn_t = np.ascontiguousarray(syn.T)
    numeric = np.array([c in table.numeric for c in table.columns])
    medians = np.full(n_columns, np.nan)
    for index in np.flatnonzero(numeric):
        finite = syn[:, index][~np.isnan(syn[:, index])]
        medians[index] = np.median(finite) if finite.size else np.nan
    n_syn = syn.shape[0]
    max_attempts = max_attempts or 50 * n_attacks
    batch = max(50, min(_QUERY_BATCH, 20_000_000 // max(n_syn, 1)))  # queries × rows booleans per batch
    kept: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    seen: set[bytes] = set()
    attempts = 0
    while len(seen) < n_attacks and attempts < max_attempts:
        size = min(batch, max_attempts - attempts)
        attempts += size
        rows = rng.integers(0, n_syn, size=size)
        cols = np.sort(np.argsort(rng.random((size, n_columns)), axis=1)[:, :n_cols], axis=1)
        values = syn[rows[:, None], cols]
        ops = np.where(
            ~numeric[cols], _EQ, np.where(np.isnan(values), _ISNA, np.where(values > medians[cols], _GE, _LE))
        )
        query, _, complete = _matched_rows(syn_t, cols, ops, values, cap=1)
        singles = np.flatnonzero(complete & (np.bincount(query, minlength=size) == 1))
        for q in singles:
            key = np.r_[cols[q], ops[q], np.nan_to_num(values[q], nan=-9e99)].tobytes()
            if key not in seen and len(seen) < n_attacks:
                seen.add(key)
                kept.append((cols[q], ops[q], values[q]))
    queries = kept
    notes = []
    if not queries:
        return {
            "name": "singling_out",
            "value": None,
            "ci": None,
            "n_attacks": 0,
            "note": f"no predicate on {n_cols} columns singles out a synthetic row in {attempts} attempts",
        }
    if len(queries) < n_attacks:
        notes.append(f"only {len(queries)} of {n_attacks} singling-out predicates found in {attempts} attempts")
    cols, ops, values = (np.array([q[i] for q in queries]) for i in range(3))
    real_t = np.ascontiguousarray(np.r_[_as_matrix(table, "train"), _as_matrix(table, "control")].T)
    # The queries are all evaluated on the same two tables, so their successes are not independent
    # trials: a table that happens to be sparse in one tail makes many predicates single out at once.
    # The Wilson errors ignore that; the spread of the success-rate difference over random re-splits
    # of train ∪ control (exchangeable when the release does not depend on the training rows) does not.
    in_train = np.r_[np.ones(n_equal, bool), np.zeros(n_equal, bool)]
    splits = np.zeros((2 * n_equal, NULL_RESPLITS), dtype=bool)
    for b in range(NULL_RESPLITS):
        splits[rng.permutation(2 * n_equal)[:n_equal], b] = True
    sides = np.column_stack([in_train, splits])
    singled = _singled_out_counts(real_t, cols, ops, values, sides, seed=(seed, 11))
    n_train, n_control = int(singled[0]), int(singled[1 + NULL_RESPLITS])
    record = _risk_record(
        "singling_out",
        n_train,
        n_control,
        len(queries),
        len(queries),
        confidence,
        n_cols=n_cols,
        n_rows_each=n_equal,
        attempts=attempts,
    )
    null_differences = (singled[1 : 1 + NULL_RESPLITS] - singled[2 + NULL_RESPLITS :]) / len(queries)
    record["null_sd"] = float(np.std(null_differences, ddof=1))
    record["null_resplits"] = NULL_RESPLITS
    if notes:
        record["note"] = "; ".join(notes)
    return _widened(record, confidence)


def _widened(record: dict[str, Any], confidence: float) -> dict[str, Any]:
    """Widen a singling-out risk's CI to the re-split spread when that exceeds the Wilson error."""
    z = float(norm.ppf(0.5 * (1 + confidence)))
    room = 1.0 - record["control_rate"]
    error = max(record["error"], z * record["null_sd"] / room)
    clip = lambda v: min(max(v, 0.0), 1.0)  # noqa: E731
    return {**record, "error": error, "ci": [clip(record["raw"] - error), clip(record["raw"] + error)]}
