"""Splitting a dataset into the three disjoint parts an audit needs, and saving them.

* test: measures utility only; never an audit candidate.
* candidates: every candidate is a member of the target's training set by an independent fair
  coin flip (Bernoulli ½). Independence is what makes the one-run ε lower bound valid
  (Steinke, Nasr, Jagielski 2023, arXiv 2305.08846) and keeps members and non-members
  exchangeable a priori.
* pool: population data for shadow / reference models, disjoint from test and candidates.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from audit.errors import AuditInputError


@dataclass(frozen=True)
class AuditSplits:
    test_idx: np.ndarray
    candidate_idx: np.ndarray
    candidate_member: np.ndarray  # bool, aligned with candidate_idx
    pool_idx: np.ndarray
    seed: int

    @property
    def train_idx(self) -> np.ndarray:
        """The target's training set: exactly the candidates whose coin came up heads."""
        return self.candidate_idx[self.candidate_member]

    def save(self, path: Path) -> None:
        np.savez(
            path,
            test_idx=self.test_idx,
            candidate_idx=self.candidate_idx,
            candidate_member=self.candidate_member,
            pool_idx=self.pool_idx,
            seed=np.int64(self.seed),
        )

    @classmethod
    def load(cls, path: Path) -> AuditSplits:
        with np.load(path) as stored:
            return cls(
                test_idx=stored["test_idx"],
                candidate_idx=stored["candidate_idx"],
                candidate_member=stored["candidate_member"].astype(bool),
                pool_idx=stored["pool_idx"],
                seed=int(stored["seed"]),
            )


def make_audit_splits(n_rows: int, *, test_fraction: float, candidate_fraction: float, seed: int) -> AuditSplits:
    """Random disjoint test / candidate / pool index sets and coin-flip membership of candidates."""
    n_test = int(round(test_fraction * n_rows))
    n_candidates = int(round(candidate_fraction * n_rows))
    n_pool = n_rows - n_test - n_candidates
    if min(n_test, n_candidates) < 20 or n_pool < 0:
        raise AuditInputError(
            "split",
            f"{n_rows} rows give {n_test} test rows and {n_candidates} candidates; "
            "need at least 20 of each (use more data or larger fractions)",
        )
    rng = np.random.default_rng([seed, 0x5117])  # a stream of its own: data generation uses `seed`
    order = rng.permutation(n_rows)
    test_idx = np.sort(order[:n_test])
    candidate_idx = np.sort(order[n_test : n_test + n_candidates])
    pool_idx = np.sort(order[n_test + n_candidates :])
    candidate_member = rng.random(n_candidates) < 0.5
    return AuditSplits(test_idx, candidate_idx, candidate_member, pool_idx, seed)
