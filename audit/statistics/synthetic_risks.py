"""Re-identification risks of a synthetic release measured against a control set (Giomi et al. 2022).

The three risks named by the Article 29 Working Party (Opinion 05/2014) and measured as attacks by
M. Giomi, F. Boenisch, C. Wehmeyer, B. Tasnádi, "A Unified Framework for Quantifying Privacy Risk
in Synthetic Data", PoPETs 2023 (arXiv 2211.10459) — the method of the `anonymeter` library:

- **singling out**: from the synthetic rows the attacker builds predicates ("age ≥ 71 and city =
  B and income ≤ 9 300") that match exactly one synthetic row, and wins when the predicate matches
  exactly one row of the original data;
- **linkability**: the attacker holds two disjoint column sets A and B of a target record and
  links them when the nearest synthetic neighbour on A and the nearest on B are the same row;
- **attribute inference**: the attacker knows every column but a secret one and guesses the
  secret from the nearest synthetic row on the known columns.

Each attack is run on targets drawn from the training rows and, identically, from a *control* set
the generator never saw. The risk is the excess success on training rows over control rows,
normalised by the room left above the control:

    risk = (r_train − r_control) / (1 − r_control),

with each rate a Wilson score estimate and the error propagated to first order (Giomi et al.,
Sec. 4; anonymeter's `residual_success`). A release independent of its training rows gives risk
≈ 0; a copy gives risk near 1. Because targets from train and control are exchangeable when the
release carries nothing about the training rows, this is a test with a null: a risk is *flagged*
when the lower end of its CI is above 0 at the per-test level the caller gives (Bonferroni).

Choices where anonymeter leaves freedom (written down so a reader can reproduce the numbers):
- distances are anonymeter's mixed-type Gower L1: Σ |Δx|/range over numeric columns (range from
  train ∪ control, never from the release) + Σ 1[categories differ]; a missing value matches a
  missing value (distance 0) and mismatches anything else (1);
- ties between equally near synthetic rows are broken at random (seeded), independently for each
  search, so tied rows cannot create links by their position in the file;
- singling out: the multivariate attack of anonymeter (n_cols columns of a random synthetic row,
  numeric predicates towards the tail: ≥ above the median, ≤ below); the training and control
  sets are cut to the same size (seeded) so that their chance success is equal without
  anonymeter's fitted size correction, and the rate is over the queries actually generated.
  All queries are evaluated on the same two tables, so their successes are correlated and the
  Wilson error understates the spread (an independent sample was flagged in our tests): the CI
  is widened to the spread of the success difference over random re-splits of train ∪ control;
- linkability: columns split alternately into A = columns[0::2], B = columns[1::2] unless given;
- inference: every column is a secret in turn (aux = all others); a numeric secret is guessed
  right within anonymeter's relative tolerance |guess − secret| ≤ 0.05 · |guess|.

`dcr_baseline_protection` is SDMetrics' DCRBaselineProtection idea: the median distance from a
synthetic row to its closest training row, over the same median for uniformly random rows.

Pure functions of DataFrames and a seed; no I/O.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy import sparse
from scipy.stats import fisher_exact, norm

from targets.tabular_encoding import column_kind

__all__ = [
    "SuccessRate",
    "attack_success_rate",
    "residual_risk",
    "singling_out_risk",
    "linkability_risk",
    "inference_risk",
    "dcr_baseline_protection",
    "synthetic_risks",
    "NUMERIC_TOLERANCE",
    "risk_p_value",
]

NUMERIC_TOLERANCE = 0.05  # anonymeter's relative tolerance for a numeric secret guessed right
_QUERY_BATCH = 1000
NULL_RESPLITS = 200  # random re-splits of train ∪ control that calibrate the singling-out spread
_NN_CHUNK = 256
_BASELINE_CHUNK = 64  # against every training row: 64 × 100k float32 distances = 25 MiB a part


# ----------------------------------------------------------------------------------------- rates


@dataclass(frozen=True)
class SuccessRate:
    """Wilson-score estimate of an attack's success rate and its half-width at `confidence`."""

    value: float
    error: float
    n_success: int
    n_attacks: int


def attack_success_rate(n_success: int, n_attacks: int, confidence: float) -> SuccessRate:
    """Wilson (1927) score estimate and half-width, as in Giomi et al. 2022, eq. (3)-(4)."""
    if n_attacks <= 0:
        raise ValueError(f"n_attacks: expected > 0, got {n_attacks}")
    if not 0 <= n_success <= n_attacks:
        raise ValueError(f"n_success: expected 0..{n_attacks}, got {n_success}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: expected a number in (0, 1), got {confidence!r}")
    z = float(norm.ppf(0.5 * (1 + confidence)))
    denominator = n_attacks + z * z
    value = (n_success + 0.5 * z * z) / denominator
    error = z / denominator * math.sqrt(n_success * (n_attacks - n_success) / n_attacks + 0.25 * z * z)
    return SuccessRate(float(value), float(error), int(n_success), int(n_attacks))


def residual_risk(attack: SuccessRate, control: SuccessRate) -> dict[str, Any]:
    """Excess success on training over control rows, (r_a − r_c)/(1 − r_c), with a propagated CI.

    Giomi et al. 2022, Sec. 4 (anonymeter `residual_success` + `bind_value`): the point value and
    the CI are clipped to [0, 1]; `raw` keeps the unclipped estimate (negative = control attacked
    more easily than training rows, i.e. no sign of leakage).
    """
    room = 1.0 - control.value
    raw = (attack.value - control.value) / room
    error = math.sqrt((attack.error / abs(room)) ** 2 + (control.error * (attack.value - 1) / room**2) ** 2)
    clip = lambda v: min(max(v, 0.0), 1.0)  # noqa: E731
    return {"value": clip(raw), "ci": [clip(raw - error), clip(raw + error)], "raw": float(raw),
            "error": float(error)}


def _risk_record(name: str, n_train_success: int, n_control_success: int, n_attacks: int, n_control_attacks: int,
                 confidence: float, **extra: Any) -> dict[str, Any]:
    attack = attack_success_rate(n_train_success, n_attacks, confidence)
    control = attack_success_rate(n_control_success, n_control_attacks, confidence)
    return {
        "name": name,
        **residual_risk(attack, control),
        "attack_rate": attack.value,
        "control_rate": control.value,
        "n_success": attack.n_success,
        "n_control_success": control.n_success,
        "n_attacks": attack.n_attacks,
        "n_control_attacks": control.n_attacks,
        "confidence": confidence,
        **extra,
    }


# ------------------------------------------------------------------------------ mixed-type table


class _Table:
    """Numeric columns as floats (range-scaled by the caller's ruler), categoricals as shared codes."""

    def __init__(self, frames: dict[str, pd.DataFrame], ruler: tuple[str, ...]):
        first = next(iter(frames.values()))
        self.columns = [str(c) for c in first.columns]
        self.kinds = {c: column_kind(first[c]) or "categorical" for c in first.columns}
        self.numeric = {}
        self.codes = {}
        lengths = {role: len(df) for role, df in frames.items()}
        for column in first.columns:
            name = str(column)
            if self.kinds[column] == "numeric":
                values = {role: pd.to_numeric(df[column], errors="coerce").to_numpy(dtype="float64")
                          for role, df in frames.items()}
                reference = np.concatenate([values[r] for r in ruler])
                finite = reference[np.isfinite(reference)]
                span = float(finite.max() - finite.min()) if finite.size else 0.0
                self.numeric[name] = {role: v / (span or 1.0) for role, v in values.items()}
            else:
                joined = pd.concat([df[column].astype("object") for df in frames.values()], ignore_index=True)
                codes, _ = pd.factorize(joined, use_na_sentinel=True)  # missing → −1, its own value
                split = np.cumsum([0, *lengths.values()])
                self.codes[name] = {role: codes[split[i]:split[i + 1]] for i, role in enumerate(frames)}

    def block(self, role: str, columns: list[str]) -> tuple[np.ndarray, np.ndarray]:
        num = [self.numeric[c][role] for c in columns if c in self.numeric]
        cat = [self.codes[c][role] for c in columns if c in self.codes]
        n = len(next(iter(self.numeric.values()))[role]) if self.numeric else len(next(iter(self.codes.values()))[role])
        return (np.column_stack(num) if num else np.zeros((n, 0))), (np.column_stack(cat) if cat else np.zeros((n, 0), int))


# Below this many query × release pairs a block is summed in numpy: torch.cdist's per-call set-up
# (~5–8 ms of CPU, its thread pool) is 20× the arithmetic there (the 300-row tables of the null
# false-alarm tests: 0.3 ms in numpy). Above it torch is ~10 % cheaper (256 × 20 000 pairs).
_TORCH_CDIST_PAIRS = 1 << 20


def _l1_float32_numpy(q32: np.ndarray, s32: np.ndarray) -> np.ndarray:
    """Σ_j |q_j − s_j| in float32, column after column: the sum torch.cdist(p = 1) forms on CPU
    (tests/test_synthetic_risks.py checks the two are equal)."""
    s_t = np.ascontiguousarray(s32.T)
    d = np.abs(q32[:, 0, None] - s_t[None, 0])
    for j in range(1, q32.shape[1]):
        step = q32[:, j, None] - s_t[None, j]
        np.abs(step, out=step)
        d += step
    return d


def _gower_l1(q_num, q_cat, s_num, s_cat) -> np.ndarray:
    """Mixed-type L1 distances (queries × synthetic): |Δ| of scaled numerics + categorical mismatches.

    Without missing values: float32 sums (p = 1 for the numerics, shifted to start at 0 so float32
    keeps their differences to ~1e-7; categorical mismatches counted exactly), `torch.cdist` for
    large blocks (about 4× faster than scipy's float64 loops) and the same sums in numpy for small
    ones; distances closer than ~1e-6 may order differently from float64, as any two float
    precisions would.
    """
    if not (np.isnan(q_num).any() or np.isnan(s_num).any()):
        small = q_num.shape[0] * s_num.shape[0] < _TORCH_CDIST_PAIRS
        parts = []
        if q_num.shape[1]:
            low = s_num.min(axis=0)
            q32, s32 = (q_num - low).astype(np.float32), (s_num - low).astype(np.float32)
            parts.append(_l1_float32_numpy(q32, s32) if small else
                         torch.cdist(torch.from_numpy(q32), torch.from_numpy(s32), p=1).numpy())
        if q_cat.shape[1]:
            if small:
                mismatches = np.zeros((q_cat.shape[0], s_cat.shape[0]), dtype=np.int32)
                for j in range(q_cat.shape[1]):
                    mismatches += q_cat[:, j, None] != s_cat[None, :, j]
                parts.append(mismatches.astype(np.float32))
            else:
                parts.append(torch.cdist(torch.from_numpy(q_cat.astype(np.float32)),
                                         torch.from_numpy(s_cat.astype(np.float32)), p=0).numpy())
        if not parts:
            return np.zeros((q_num.shape[0], s_num.shape[0]), dtype=np.float32)
        return np.add(parts[0], parts[1], out=parts[0]) if len(parts) == 2 else parts[0]
    d = np.zeros((q_num.shape[0], s_num.shape[0]), dtype=np.float32)
    for j in range(q_num.shape[1]):  # column by column: two 2-D arrays in memory, never a 3-D one
        q, s = q_num[:, j, None].astype(np.float32), s_num[None, :, j].astype(np.float32)
        diff = np.abs(q - s)
        q_nan, s_nan = np.isnan(q), np.isnan(s)
        if q_nan.any() or s_nan.any():
            diff = np.where(q_nan & s_nan, 0.0, np.where(q_nan | s_nan, 1.0, diff))
        d += diff
    for j in range(q_cat.shape[1]):
        d += q_cat[:, j, None] != s_cat[None, :, j]
    return d


def _nearest_rows(table: _Table, role: str, rows: np.ndarray, columns: list[str], k: int,
                  rng: np.random.Generator) -> np.ndarray:
    """Indices of the k nearest synthetic rows to each of table[role][rows] on `columns`, ties at random."""
    q_num, q_cat = table.block(role, columns)
    s_num, s_cat = table.block("synthetic", columns)
    order = rng.permutation(s_num.shape[0])  # a stable sort over a shuffled release breaks ties at random
    s_num, s_cat = s_num[order], s_cat[order]
    out = np.empty((rows.size, k), dtype=np.int64)
    for start in range(0, rows.size, _NN_CHUNK):
        chunk = rows[start:start + _NN_CHUNK]
        d = _gower_l1(q_num[chunk], q_cat[chunk], s_num, s_cat)
        # argmin / a stable sort return the first of tied rows, i.e. a random one of the shuffled release
        nearest = d.argmin(axis=1)[:, None] if k == 1 else np.argsort(d, axis=1, kind="stable")[:, :k]
        out[start:start + chunk.size] = order[nearest]
    return out


def _check_frames(train: pd.DataFrame, control: pd.DataFrame, synthetic: pd.DataFrame) -> None:
    columns = [str(c) for c in train.columns]
    for role, df in (("control", control), ("synthetic", synthetic)):
        if sorted(str(c) for c in df.columns) != sorted(columns):
            raise ValueError(f"{role}: expected the train columns {columns}, got {[str(c) for c in df.columns]}")
    for role, df in (("train", train), ("control", control), ("synthetic", synthetic)):
        if len(df) < 2:
            raise ValueError(f"{role}: expected at least 2 rows, got {len(df)}")


def _frames(train, control, synthetic) -> dict[str, pd.DataFrame]:
    _check_frames(train, control, synthetic)
    order = list(train.columns)
    return {"train": train.reset_index(drop=True), "control": control[order].reset_index(drop=True),
            "synthetic": synthetic[order].reset_index(drop=True)}


def _prepare(train, control, synthetic) -> tuple[dict[str, pd.DataFrame], _Table]:
    """The frames and the table of linkability and inference (built once when all of them run:
    `prepared=` is for `synthetic_risks`, which passes the same three tables to each)."""
    frames = _frames(train, control, synthetic)
    return frames, _Table(frames, ruler=("train", "control"))


def _targets(n_rows: int, n_attacks: int, rng: np.random.Generator) -> np.ndarray:
    return rng.choice(n_rows, size=min(n_attacks, n_rows), replace=False)


# ------------------------------------------------------------------------------------ singling out


def _as_matrix(table: _Table, role: str) -> np.ndarray:
    """Rows × columns (the table's column order): scaled numerics, categorical codes as floats (−1 = missing)."""
    return np.column_stack([
        table.numeric[c][role] if c in table.numeric else table.codes[c][role].astype(float) for c in table.columns
    ])


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


def _matched_rows(data_t: np.ndarray, cols: np.ndarray, ops: np.ndarray, values: np.ndarray,
                  cap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
    pairs = (np.concatenate(pairs_q) if pairs_q else np.zeros(0, np.int64),
             np.concatenate(pairs_r) if pairs_r else np.zeros(0, np.int64))
    return pairs[0], pairs[1], counts <= cap


def _count_in(query: np.ndarray, rows: np.ndarray, sides: np.ndarray, n_queries: int) -> np.ndarray:
    """Per query and side, how many of its (query, row) pairs have their row on that side
    (`sides`: real rows × sides, bool). A sparse product over the rows that occur only."""
    if query.size == 0:
        return np.zeros((n_queries, sides.shape[1]), dtype=np.int64)
    used, position = np.unique(rows, return_inverse=True)
    incidence = sparse.csr_matrix((np.ones(query.size, np.int32), (query, position.reshape(-1))),
                                  shape=(n_queries, used.size))
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


def singling_out_risk(train: pd.DataFrame, control: pd.DataFrame, synthetic: pd.DataFrame, *,
                      n_attacks: int = 500, n_cols: int = 3, confidence: float = 0.95, seed: int = 0,
                      max_attempts: int | None = None) -> dict[str, Any]:
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
        ops = np.where(~numeric[cols], _EQ, np.where(np.isnan(values), _ISNA,
                                                      np.where(values > medians[cols], _GE, _LE)))
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
        return {"name": "singling_out", "value": None, "ci": None, "n_attacks": 0,
                "note": f"no predicate on {n_cols} columns singles out a synthetic row in {attempts} attempts"}
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
    record = _risk_record("singling_out", n_train, n_control, len(queries), len(queries), confidence,
                          n_cols=n_cols, n_rows_each=n_equal, attempts=attempts)
    null_differences = (singled[1:1 + NULL_RESPLITS] - singled[2 + NULL_RESPLITS:]) / len(queries)
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


# ------------------------------------------------------------------------------------- linkability


def linkability_risk(train: pd.DataFrame, control: pd.DataFrame, synthetic: pd.DataFrame, *,
                     aux_cols: tuple[list[str], list[str]] | None = None, n_attacks: int = 500,
                     n_neighbors: int = 1, confidence: float = 0.95, seed: int = 0,
                     prepared: tuple[dict[str, pd.DataFrame], _Table] | None = None) -> dict[str, Any]:
    """Linkability risk (Giomi et al. 2022, Sec. 5.2): can the release join two halves of a record?

    A target is linked when its nearest `n_neighbors` synthetic rows on columns A and on columns B
    share a row. Targets are `n_attacks` random training rows, and as many random control rows.
    """
    rng = np.random.default_rng([seed, 12])
    frames, table = prepared or _prepare(train, control, synthetic)
    if aux_cols is None:
        aux_cols = (table.columns[0::2], table.columns[1::2])
    first, second = [str(c) for c in aux_cols[0]], [str(c) for c in aux_cols[1]]
    if not first or not second or set(first) & set(second):
        raise ValueError(f"aux_cols: expected two disjoint, non-empty column lists, got {aux_cols}")
    k = min(n_neighbors, len(frames["synthetic"]))

    def links(role: str) -> tuple[int, int]:
        rows = _targets(len(frames[role]), n_attacks, rng)
        a = _nearest_rows(table, role, rows, first, k, rng)
        b = _nearest_rows(table, role, rows, second, k, rng)
        return sum(bool(set(x) & set(y)) for x, y in zip(a, b)), rows.size

    n_train, m_train = links("train")
    n_control, m_control = links("control")
    n_syn = len(frames["synthetic"])
    return _risk_record("linkability", n_train, n_control, m_train, m_control, confidence,
                        aux_cols=[first, second], n_neighbors=k,
                        baseline_rate=float(1 - math.comb(n_syn - k, k) / math.comb(n_syn, k)))


# --------------------------------------------------------------------------------------- inference


def inference_risk(train: pd.DataFrame, control: pd.DataFrame, synthetic: pd.DataFrame, *, secret: str,
                   aux_cols: list[str] | None = None, n_attacks: int = 500, confidence: float = 0.95,
                   seed: int = 0, prepared: tuple[dict[str, pd.DataFrame], _Table] | None = None) -> dict[str, Any]:
    """Attribute-inference risk for one secret column (Giomi et al. 2022, Sec. 5.3).

    The attacker knows `aux_cols` (default: every other column) of a target and guesses `secret` as
    the value of the nearest synthetic row. Categorical secrets must match exactly; numeric ones
    within NUMERIC_TOLERANCE relative to the guess (anonymeter's rule). The baseline is a guess
    copied from a random synthetic row.
    """
    rng = np.random.default_rng([seed, 13])
    secret = str(secret)
    if secret not in [str(c) for c in train.columns]:
        raise ValueError(f"secret: expected one of the columns {list(train.columns)}, got {secret!r}")
    frames, table = prepared or _prepare(train, control, synthetic)
    aux = [c for c in (aux_cols or table.columns) if str(c) != secret]
    if not aux:
        raise ValueError("aux_cols: expected at least one column besides the secret")
    numeric = secret in table.numeric
    values = table.numeric[secret] if numeric else table.codes[secret]

    def correct(guesses: np.ndarray, truth: np.ndarray) -> np.ndarray:
        if not numeric:
            return guesses == truth
        both_missing = np.isnan(guesses) & np.isnan(truth)
        with np.errstate(invalid="ignore"):
            return both_missing | (np.abs(guesses - truth) <= NUMERIC_TOLERANCE * np.abs(guesses))

    def successes(role: str) -> tuple[int, int]:
        rows = _targets(len(frames[role]), n_attacks, rng)
        nearest = _nearest_rows(table, role, rows, aux, 1, rng)[:, 0]
        return int(correct(values["synthetic"][nearest], values[role][rows]).sum()), rows.size

    n_train, m_train = successes("train")
    n_control, m_control = successes("control")
    baseline_rows = _targets(len(frames["train"]), n_attacks, rng)
    random_guess = values["synthetic"][rng.integers(0, len(frames["synthetic"]), baseline_rows.size)]
    baseline = int(correct(random_guess, values["train"][baseline_rows]).sum()) / baseline_rows.size
    return _risk_record("inference", n_train, n_control, m_train, m_control, confidence, secret=secret,
                        secret_kind="numeric" if numeric else "categorical", baseline_rate=float(baseline))


# ------------------------------------------------------------------------------------ DCR baseline


def dcr_baseline_protection(train: pd.DataFrame, synthetic: pd.DataFrame, *, seed: int = 0,
                            max_rows: int = 2000) -> dict[str, Any]:
    """SDMetrics' DCRBaselineProtection idea: median DCR of the release over that of random rows.

    DCR = mean-Gower distance (L1 above ÷ number of columns, in [0, 1]) from a row to its closest
    training row. Random rows are drawn uniformly per column (numeric: within the training range;
    categorical: among the training categories), as many as synthetic rows evaluated (at most
    `max_rows`, seeded). score = min(1, median DCR synthetic / median DCR random): 1 = as far from
    the training rows as noise, 0 = copies. A descriptive ratio, not a test: an honest sample of
    the population is closer to the training rows than noise is, so it scores below 1 as well.
    """
    rng = np.random.default_rng([seed, 14])
    train = train.reset_index(drop=True)
    synthetic = synthetic[list(train.columns)].reset_index(drop=True)
    rows = np.sort(rng.choice(len(synthetic), min(max_rows, len(synthetic)), replace=False))
    synthetic = synthetic.iloc[rows].reset_index(drop=True)
    random = {}
    for column in train.columns:
        if (column_kind(train[column]) or "categorical") == "numeric":
            x = pd.to_numeric(train[column], errors="coerce").to_numpy(dtype="float64")
            random[column] = rng.uniform(np.nanmin(x), np.nanmax(x), len(synthetic))
        else:
            categories = train[column].dropna().unique()
            random[column] = categories[rng.integers(0, len(categories), len(synthetic))]
    random_df = pd.DataFrame(random)[list(train.columns)]
    table = _Table({"train": train, "synthetic": synthetic, "random": random_df}, ruler=("train",))
    n_columns = len(table.columns)

    def median_dcr(role: str) -> float:
        q_num, q_cat = table.block(role, table.columns)
        t_num, t_cat = table.block("train", table.columns)
        nearest = np.concatenate([
            _gower_l1(q_num[s:s + _BASELINE_CHUNK], q_cat[s:s + _BASELINE_CHUNK], t_num, t_cat).min(axis=1)
            for s in range(0, q_num.shape[0], _BASELINE_CHUNK)
        ])
        return float(np.median(nearest) / n_columns)

    synthetic_median, random_median = median_dcr("synthetic"), median_dcr("random")
    score = 1.0 if random_median == 0 else min(1.0, synthetic_median / random_median)
    return {"score": float(score), "median_dcr_synthetic": synthetic_median, "median_dcr_random": random_median,
            "n_rows": int(len(synthetic)),
            "definition": "min(1, median DCR of synthetic rows / median DCR of uniformly random rows); "
            "1 = as far from training rows as noise, 0 = copies (SDMetrics DCRBaselineProtection); not a test"}


# ------------------------------------------------------------------------------------- all of them


def synthetic_risks(train: pd.DataFrame, control: pd.DataFrame, synthetic: pd.DataFrame, *,
                    alpha_each: float, n_attacks: int = 500, confidence: float = 0.95, seed: int = 0,
                    secrets: list[str] | None = None, max_synthetic_rows: int = 20_000) -> dict[str, Any]:
    """Singling-out, linkability and per-column inference risks vs `control`, DCR baseline, and flags.

    `control` = real rows the generator never saw, from the same population (the holdout).
    Reported CIs are at `confidence`. A risk is flagged when its lower bound at the one-sided level
    `alpha_each` (the caller's Bonferroni share) is above 0; `n_tests` says how many risks can flag,
    so the caller can split its α before calling (`risk_test_count`).
    """
    columns = [str(c) for c in train.columns]
    secrets = columns if secrets is None else [str(s) for s in secrets]
    risks = [singling_out_risk(train, control, synthetic, n_attacks=n_attacks, confidence=confidence, seed=seed)]
    notes = []
    searched = synthetic
    if len(synthetic) > max_synthetic_rows:
        # Each nearest-neighbour attack is n_attacks × |release| × columns: on a huge release the
        # attacker is simulated with a seeded sample of it. Fewer rows to match can only weaken
        # the attack, so these risks are then lower estimates — said in the notes.
        rows = np.sort(np.random.default_rng([seed, 15]).choice(len(synthetic), max_synthetic_rows, replace=False))
        searched = synthetic.iloc[rows]
        notes.append(f"linkability and inference attacks searched a seeded sample of {max_synthetic_rows} of the "
                     f"{len(synthetic)} synthetic rows: an attacker using all rows may do better (lower estimates)")
    if len(columns) >= 2:
        prepared = _prepare(train, control, searched)
        risks.append(linkability_risk(train, control, searched, n_attacks=n_attacks, confidence=confidence, seed=seed,
                                      prepared=prepared))
        risks += [inference_risk(train, control, searched, secret=s, n_attacks=n_attacks, confidence=confidence,
                                 seed=seed, prepared=prepared) for s in secrets]
    flags = []
    test_confidence = 1 - 2 * alpha_each  # two-sided interval whose lower end is a one-sided α_each test
    for risk in risks:
        if risk.get("value") is None:
            continue
        attack = attack_success_rate(risk["n_success"], risk["n_attacks"], test_confidence)
        control_rate = attack_success_rate(risk["n_control_success"], risk["n_control_attacks"], test_confidence)
        tested = {**risk, **residual_risk(attack, control_rate), "control_rate": control_rate.value}
        if "null_sd" in risk:
            tested = _widened(tested, test_confidence)
        low = tested["ci"][0]
        risk["p_value"] = risk_p_value(risk)
        risk["test_lower_bound"] = low
        risk["flagged"] = low > 0
        if low > 0:
            what = risk["name"].replace("_", "-") + (f" of '{risk['secret']}'" if "secret" in risk else "")
            flags.append({"check": f"risk_{risk['name']}",
                          "message": f"{what} risk {risk['value']:.3f} (CI {risk['ci'][0]:.3f}–{risk['ci'][1]:.3f}): "
                          f"attacks succeed on {risk['attack_rate']:.1%} of training rows vs {risk['control_rate']:.1%} "
                          f"of control rows (lower bound {low:.3f} > 0 at one-sided α {alpha_each:.2g})"})
    inference = [r for r in risks if r["name"] == "inference"]
    return {
        "singling_out": risks[0],
        "linkability": next((r for r in risks if r["name"] == "linkability"), None),
        "inference": inference,
        "inference_max": max((r["value"] for r in inference), default=None),
        "dcr_baseline_protection": dcr_baseline_protection(train, synthetic, seed=seed),
        "flags": flags,
        "notes": notes,
        "alpha_each": alpha_each,
        "confidence": confidence,
        "method": "Giomi et al. 2022 (anonymeter): attacks on training rows vs control rows the generator never saw",
    }


def risk_p_value(risk: dict[str, Any]) -> float:
    """One-sided p-value of "attacks succeed no more often on training rows than on control rows".

    Without memorisation, training and control targets are exchangeable draws from one population
    and the release is fixed, so each success is a Bernoulli of the same rate on both sides: Fisher's
    exact test (one-sided, conditional on the total successes) is valid. Singling-out queries are
    all evaluated on the same two tables (correlated successes): there the z statistic of the rate
    difference over its spread across random re-splits of train ∪ control (`null_sd`) is used.
    """
    n_t, s_t = int(risk["n_attacks"]), int(risk["n_success"])
    n_c, s_c = int(risk["n_control_attacks"]), int(risk["n_control_success"])
    if "null_sd" in risk and risk["null_sd"]:
        difference = s_t / n_t - s_c / n_c
        return float(norm.sf(difference / float(risk["null_sd"])))
    return float(fisher_exact([[s_t, n_t - s_t], [s_c, n_c - s_c]], alternative="greater").pvalue)


def risk_test_count(n_columns: int, n_secrets: int | None = None) -> int:
    """How many risks `synthetic_risks` can flag: singling out, linkability, one inference per secret."""
    if n_columns < 2:
        return 1
    return 2 + (n_columns if n_secrets is None else n_secrets)
