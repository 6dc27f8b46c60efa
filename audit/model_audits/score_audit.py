"""Bring your own scores: audit a membership-score file produced anywhere.

The file (CSV or Parquet) has a `member` column (0/1) and either `score` (higher = more likely a
member) or `loss` (lower = more likely a member; scored as −loss). An optional `label` column gives
the per-class breakdown. The result has the same shape as a `run`'s results.json (one target, one
attack), so the report, the policy gate and the JSON Schema apply unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from audit.errors import AuditInputError
from audit.machinery.environment import describe_environment
from audit.machinery.verdict import verdict_for_results
from audit.model_audits.data_files import integer_label_values
from audit.statistics.attack_evaluation import best_sound_lower_bound, evaluate_attack
from targets.datasets import read_table

SCHEMA_VERSION = 3
# The DP-SGD settings of a target the harness did not train (the user's scores or model): unknown, so
# null in results.json, in the places the sweep's targets hold them (an audit of scores and the
# language-model audit share it).
NOT_TRAINED_HERE: dict[str, None] = {
    "noise_multiplier": None,
    "sample_rate": None,
    "steps": None,
    "max_grad_norm": None,
    "poisson_sampling": None,
}


def read_scores(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """(scores, members, labels, source column) from a user file, validated column by column."""
    frame = read_table(path, role="scores file")
    where = f"scores file '{path}'"
    if "member" not in frame.columns:
        raise AuditInputError(where, f"has no 'member' column (columns: {', '.join(map(str, frame.columns[:10]))})")
    has_score, has_loss = "score" in frame.columns, "loss" in frame.columns
    if has_score == has_loss:
        raise AuditInputError(
            where, "needs exactly one of the columns 'score' (higher = member) or 'loss' (lower = member)"
        )
    column = "score" if has_score else "loss"
    member = frame["member"]
    if not pd.api.types.is_numeric_dtype(member) or not member.isin([0, 1]).all():
        raise AuditInputError(f"{where}: column 'member'", "must hold only 0 and 1")
    values = pd.to_numeric(frame[column], errors="coerce")
    bad = values.isna() | ~np.isfinite(values.fillna(0.0))
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise AuditInputError(
            f"{where}: column '{column}'", f"row {row + 2} is not a finite number ({frame[column].iloc[row]!r})"
        )
    members = member.to_numpy().astype(bool)
    if members.all() or not members.any():
        raise AuditInputError(f"{where}: column 'member'", "needs both members (1) and non-members (0)")
    n_in, n_out = int(members.sum()), int((~members).sum())
    if min(n_in, n_out) < MIN_PER_SIDE:
        # The threshold is chosen on one half of each side and evaluated on the other.
        raise AuditInputError(
            f"{where}: column 'member'",
            f"needs ≥ {MIN_PER_SIDE} members and ≥ {MIN_PER_SIDE} non-members, got {n_in} and {n_out}",
        )
    scores = values.to_numpy(dtype=np.float64)
    if column == "loss":
        scores = -scores
    labels = (
        _labels(frame["label"], f"{where}: column 'label'")
        if "label" in frame.columns
        else np.zeros(len(frame), dtype=np.int64)
    )
    return scores, members, labels, column


MIN_PER_SIDE = 4


def _labels(values: pd.Series, where: str) -> np.ndarray:
    """Integer class labels for the per-class breakdown (one class is fine here)."""
    from targets.table_checks import check_class_count

    numeric = integer_label_values(values, where, "class labels")
    classes, encoded = np.unique(numeric, return_inverse=True)
    check_class_count(int(classes.size), where)
    return classes.astype(np.int64)[encoded]


def audit_scores(
    path: str | Path,
    *,
    delta: float = 1e-5,
    confidence: float = 0.95,
    claimed_epsilon: float | None = None,
    membership_randomized: bool = False,
    seed: int = 0,
    name: str = "scores",
) -> dict[str, Any]:
    """Every attack metric and ε lower bound for one score file, as a results dict (schema_version 2)."""
    if not 0 < delta < 1:
        raise AuditInputError("--delta", f"must be in (0, 1), got {delta}")
    if not 0.5 < confidence < 1:
        raise AuditInputError("--confidence", f"must be in (0.5, 1), got {confidence}")
    if claimed_epsilon is not None and not claimed_epsilon > 0:
        raise AuditInputError("--claimed-epsilon", f"must be > 0, got {claimed_epsilon}")
    scores, members, labels, column = read_scores(path)
    attack = evaluate_attack(
        name,
        scores,
        members,
        labels,
        delta=delta,
        confidence=confidence,
        threshold_seed=seed,
        accountant_epsilon=claimed_epsilon,
        membership_randomized=membership_randomized,
    )
    best, best_method = best_sound_lower_bound([attack])
    violation = False  # decided by audit.machinery.verdict (Holm over the proven tests)
    notes = (
        []
        if membership_randomized
        else [
            "one-run bound not computed: pass --membership-randomized only if each record's membership was a fair coin "
            "flip; without it no bound proven for one model decides a claimed ε (Clopper-Pearson is shown only)"
        ]
    )
    target = {
        "epsilon_target": claimed_epsilon,
        "delta": delta,
        **NOT_TRAINED_HERE,
        "accountant": "claimed" if claimed_epsilon is not None else None,
        "epsilon": {"claimed": claimed_epsilon} if claimed_epsilon is not None else {},
        "epsilon_accountant": claimed_epsilon,
        "test_accuracy": None,
        "attacks": [attack],
        "epsilon_lb_best": best,
        "epsilon_lb_best_method": best_method,
        "epsilon_lb_ratio": best / claimed_epsilon if claimed_epsilon and best is not None else None,
        "violation": bool(violation),
    }
    reasons: list[str] = []
    results = {
        "schema_version": SCHEMA_VERSION,
        "config": {
            "name": name,
            "source": str(path),
            "score_column": column,
            "delta": delta,
            "confidence": confidence,
            "claimed_epsilon": claimed_epsilon,
            "membership_randomized": membership_randomized,
            "seed": seed,
        },
        "environment": describe_environment("cpu", seed),
        "data": {"description": f"scores from {Path(path).name}", "n_candidates": int(len(scores))},
        "attacks_run": [name],
        "targets": [target],
        "synthetic": [],
        "notes": notes,
        "verdict": {"status": "pass", "passed": not violation, "policy": None, "reasons": reasons},
    }
    return verdict_for_results(results)[0]  # the one verdict model: proven bounds, Holm
