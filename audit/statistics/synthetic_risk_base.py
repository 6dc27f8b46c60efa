"""What the synthetic-data risks of `audit.statistics.synthetic_risks` share: success rates with Wilson
intervals and the residual risk over the control (Giomi et al. 2022, Sec. 4), the mixed-type table and its
Gower L1 nearest neighbours, and the targets drawn from train and control.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy.stats import norm

from targets.tabular_encoding import column_kind

_NN_CHUNK = 256


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
    return {"value": clip(raw), "ci": [clip(raw - error), clip(raw + error)], "raw": float(raw), "error": float(error)}


def _risk_record(
    name: str,
    n_train_success: int,
    n_control_success: int,
    n_attacks: int,
    n_control_attacks: int,
    confidence: float,
    **extra: Any,
) -> dict[str, Any]:
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
                values = {
                    role: pd.to_numeric(df[column], errors="coerce").to_numpy(dtype="float64")
                    for role, df in frames.items()
                }
                reference = np.concatenate([values[r] for r in ruler])
                finite = reference[np.isfinite(reference)]
                span = float(finite.max() - finite.min()) if finite.size else 0.0
                self.numeric[name] = {role: v / (span or 1.0) for role, v in values.items()}
            else:
                joined = pd.concat([df[column].astype("object") for df in frames.values()], ignore_index=True)
                codes, _ = pd.factorize(joined, use_na_sentinel=True)  # missing → −1, its own value
                split = np.cumsum([0, *lengths.values()])
                self.codes[name] = {role: codes[split[i] : split[i + 1]] for i, role in enumerate(frames)}

    def block(self, role: str, columns: list[str]) -> tuple[np.ndarray, np.ndarray]:
        num = [self.numeric[c][role] for c in columns if c in self.numeric]
        cat = [self.codes[c][role] for c in columns if c in self.codes]
        n = len(next(iter(self.numeric.values()))[role]) if self.numeric else len(next(iter(self.codes.values()))[role])
        return (np.column_stack(num) if num else np.zeros((n, 0))), (
            np.column_stack(cat) if cat else np.zeros((n, 0), int)
        )


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
            parts.append(
                _l1_float32_numpy(q32, s32)
                if small
                else torch.cdist(torch.from_numpy(q32), torch.from_numpy(s32), p=1).numpy()
            )
        if q_cat.shape[1]:
            if small:
                mismatches = np.zeros((q_cat.shape[0], s_cat.shape[0]), dtype=np.int32)
                for j in range(q_cat.shape[1]):
                    mismatches += q_cat[:, j, None] != s_cat[None, :, j]
                parts.append(mismatches.astype(np.float32))
            else:
                parts.append(
                    torch.cdist(
                        torch.from_numpy(q_cat.astype(np.float32)), torch.from_numpy(s_cat.astype(np.float32)), p=0
                    ).numpy()
                )
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


def _nearest_rows(
    table: _Table, role: str, rows: np.ndarray, columns: list[str], k: int, rng: np.random.Generator
) -> np.ndarray:
    """Indices of the k nearest synthetic rows to each of table[role][rows] on `columns`, ties at random."""
    q_num, q_cat = table.block(role, columns)
    s_num, s_cat = table.block("synthetic", columns)
    order = rng.permutation(s_num.shape[0])  # a stable sort over a shuffled release breaks ties at random
    s_num, s_cat = s_num[order], s_cat[order]
    out = np.empty((rows.size, k), dtype=np.int64)
    for start in range(0, rows.size, _NN_CHUNK):
        chunk = rows[start : start + _NN_CHUNK]
        d = _gower_l1(q_num[chunk], q_cat[chunk], s_num, s_cat)
        # argmin / a stable sort return the first of tied rows, i.e. a random one of the shuffled release
        nearest = d.argmin(axis=1)[:, None] if k == 1 else np.argsort(d, axis=1, kind="stable")[:, :k]
        out[start : start + chunk.size] = order[nearest]
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
    return {
        "train": train.reset_index(drop=True),
        "control": control[order].reset_index(drop=True),
        "synthetic": synthetic[order].reset_index(drop=True),
    }


def _prepare(train, control, synthetic) -> tuple[dict[str, pd.DataFrame], _Table]:
    """The frames and the table of linkability and inference (built once when all of them run:
    `prepared=` is for `synthetic_risks`, which passes the same three tables to each)."""
    frames = _frames(train, control, synthetic)
    return frames, _Table(frames, ruler=("train", "control"))


def _targets(n_rows: int, n_attacks: int, rng: np.random.Generator) -> np.ndarray:
    return rng.choice(n_rows, size=min(n_attacks, n_rows), replace=False)


NULL_RESPLITS = 200  # random re-splits of train ∪ control that calibrate the singling-out spread
