import numpy as np
import pytest
from scipy.stats import binomtest

from audit.errors import AuditInputError
from targets.splits import AuditSplits, make_audit_splits


def _splits(seed=0, n=5000):
    return make_audit_splits(n, test_fraction=0.2, candidate_fraction=0.4, seed=seed)


def test_test_candidates_and_pool_are_disjoint_and_cover_the_data():
    s = _splits()
    parts = [set(s.test_idx), set(s.candidate_idx), set(s.pool_idx)]
    assert not parts[0] & parts[1] and not parts[0] & parts[2] and not parts[1] & parts[2]
    assert set().union(*parts) == set(range(5000))
    assert len(s.test_idx) == 1000 and len(s.candidate_idx) == 2000


def test_the_utility_test_set_is_never_a_candidate_or_training_row():
    s = _splits()
    assert not set(s.test_idx) & set(s.train_idx)
    assert set(s.train_idx) <= set(s.candidate_idx)


def test_membership_is_a_fair_coin_per_candidate():
    s = _splits(n=20000)
    heads = int(s.candidate_member.sum())
    assert binomtest(heads, s.candidate_member.size, 0.5).pvalue > 0.001
    # Independent of position: the first and second half have similar rates.
    half = s.candidate_member.size // 2
    assert abs(s.candidate_member[:half].mean() - s.candidate_member[half:].mean()) < 0.05


def test_the_same_seed_gives_the_same_splits_and_another_seed_does_not():
    a, b, c = _splits(seed=3), _splits(seed=3), _splits(seed=4)
    assert np.array_equal(a.candidate_idx, b.candidate_idx)
    assert np.array_equal(a.candidate_member, b.candidate_member)
    assert not np.array_equal(a.candidate_member, c.candidate_member)


def test_splits_round_trip_through_npz(tmp_path):
    s = _splits(seed=7)
    s.save(tmp_path / "splits.npz")
    loaded = AuditSplits.load(tmp_path / "splits.npz")
    assert loaded.seed == 7
    for field in ("test_idx", "candidate_idx", "candidate_member", "pool_idx"):
        assert np.array_equal(getattr(loaded, field), getattr(s, field))


def test_too_little_data_is_refused_with_a_message_naming_the_split():
    with pytest.raises(AuditInputError, match="split"):
        make_audit_splits(50, test_fraction=0.2, candidate_fraction=0.2, seed=0)
