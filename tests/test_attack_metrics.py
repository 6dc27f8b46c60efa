"""Claims about the attack metrics in audit/statistics/attack_metrics.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import roc_auc_score, roc_curve

from audit.statistics.attack_metrics import (
    advantage_bound,
    auc_with_ci,
    membership_advantage,
    per_class_tpr_at_fpr,
    roc_curve_points,
    tpr_at_fpr,
)


def _gaussian_shift(rng, n_per_side: int, shift: float):
    scores = np.concatenate([rng.normal(shift, 1, n_per_side), rng.normal(0, 1, n_per_side)])
    members = np.r_[np.ones(n_per_side, bool), np.zeros(n_per_side, bool)]
    return scores, members


# A hand-checkable ROC: 10 non-members at 0..9, 5 members at 9.5, 8.5, 8.4, 3, 2.
HAND_NONMEMBERS = np.arange(10.0)
HAND_MEMBERS = np.array([9.5, 8.5, 8.4, 3.0, 2.0])
HAND_SCORES = np.r_[HAND_MEMBERS, HAND_NONMEMBERS]
HAND_LABELS = np.r_[np.ones(5, int), np.zeros(10, int)]


# --------------------------------------------------------------------------------------------------
# ROC and AUC
# --------------------------------------------------------------------------------------------------


def test_roc_curve_points_are_sklearns_roc_curve():
    fpr, tpr, thr = roc_curve_points(HAND_SCORES, HAND_LABELS)
    ref = roc_curve(HAND_LABELS, HAND_SCORES)
    for got, want in zip((fpr, tpr, thr), ref):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("decimals", [None, 1, 0])
def test_the_full_roc_is_sklearns_roc_curve_with_every_threshold_exactly(decimals):
    # _full_roc (tpr_at_fpr, membership_advantage, per-class TPR) skips sklearn's input checks for
    # speed; its points must be sklearn's, bit for bit, with and without ties, on several sizes.
    from audit.statistics.attack_metrics import _full_roc

    rng = np.random.default_rng(7)
    for n in (2, 3, 15, 300, 2400):
        members = rng.random(n) < 0.5
        members[:2] = (True, False)
        scores = rng.normal(size=n) + members
        if decimals is not None:
            scores = np.round(scores, decimals)
        fpr, tpr = _full_roc(scores, members)
        ref_fpr, ref_tpr, _ = roc_curve(members, scores, drop_intermediate=False)
        np.testing.assert_array_equal(fpr, ref_fpr)
        np.testing.assert_array_equal(tpr, ref_tpr)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auc_matches_sklearn_roc_auc_score_including_ties(seed):
    rng = np.random.default_rng(seed)
    scores, members = _gaussian_shift(rng, 150, 0.7)
    scores = np.round(scores, 1)  # plenty of ties across and within classes
    auc, _ = auc_with_ci(scores, members)
    assert auc == pytest.approx(roc_auc_score(members, scores), abs=1e-12)


def _delong_variance_by_definition(pos, neg):
    # O(m·n) DeLong et al. (1988) structural components, to check the midrank shortcut.
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    return v10.var(ddof=1) / pos.size + v01.var(ddof=1) / neg.size


def test_delong_ci_equals_the_quadratic_time_definition():
    rng = np.random.default_rng(3)
    scores, members = _gaussian_shift(rng, 60, 0.5)
    scores = np.round(scores, 1)
    auc, (low, high) = auc_with_ci(scores, members, confidence=0.9)
    var = _delong_variance_by_definition(scores[members], scores[~members])
    half = stats.norm.ppf(0.95) * math.sqrt(var)
    assert low == pytest.approx(auc - half, abs=1e-12)
    assert high == pytest.approx(auc + half, abs=1e-12)


def test_delong_95_percent_ci_covers_the_true_auc_of_a_gaussian_shift_in_most_repeats():
    shift = 1.0
    true_auc = stats.norm.cdf(shift / math.sqrt(2))
    rng = np.random.default_rng(4)
    covered = 0
    repeats = 200
    for _ in range(repeats):
        scores, members = _gaussian_shift(rng, 100, shift)
        _, (low, high) = auc_with_ci(scores, members)
        covered += low <= true_auc <= high
    assert covered / repeats >= 0.90


def test_delong_ci_is_clipped_to_the_unit_interval():
    auc, (low, high) = auc_with_ci([3.0, 4.0, 1.0, 2.0], [1, 1, 0, 0])
    assert (auc, low, high) == (1.0, 1.0, 1.0)
    # Nearly perfect with few samples: the raw normal interval would pass 1.
    scores = [5, 6, 7, 8, 0.5, 1, 2, 3, 4, 5.5]
    auc, (low, high) = auc_with_ci(scores, [1, 1, 1, 1, 1, 0, 0, 0, 0, 0])
    assert 0.0 <= low <= auc <= high <= 1.0
    assert high == 1.0


def test_wider_confidence_gives_a_wider_interval():
    rng = np.random.default_rng(5)
    scores, members = _gaussian_shift(rng, 80, 0.5)
    _, (lo90, hi90) = auc_with_ci(scores, members, confidence=0.90)
    _, (lo99, hi99) = auc_with_ci(scores, members, confidence=0.99)
    assert lo99 < lo90 and hi99 > hi90


# --------------------------------------------------------------------------------------------------
# TPR at low FPR
# --------------------------------------------------------------------------------------------------


def test_tpr_at_fpr_is_the_best_actual_roc_point_without_interpolation():
    got = tpr_at_fpr(HAND_SCORES, HAND_LABELS, fpr_levels=(0.0, 0.05, 0.1, 0.15, 1.0))
    # FPR 0 is reached only above 9: one member (9.5). Interpolating between (0, 0.2) and
    # (0.1, 0.6) would claim 0.4 at FPR 0.05; no threshold achieves that.
    assert got == {0.0: 0.2, 0.05: 0.2, 0.1: 0.6, 0.15: 0.6, 1.0: 1.0}


def test_tpr_at_fpr_default_levels_are_carlini_s_low_fpr_points():
    rng = np.random.default_rng(6)
    scores, members = _gaussian_shift(rng, 2000, 2.0)
    got = tpr_at_fpr(scores, members)
    assert list(got) == [0.001, 0.01, 0.1]
    assert got[0.001] <= got[0.01] <= got[0.1]


def test_per_class_tpr_at_fpr_is_none_for_a_class_without_both_memberships():
    labels = np.r_[np.zeros(5, int), np.zeros(10, int)]
    labels[[0, 5]] = 7  # class 7: one member (9.5) and one non-member (0.0)
    labels[1] = 3  # class 3: a lone member
    got = per_class_tpr_at_fpr(HAND_SCORES, HAND_LABELS, labels, fpr=0.0)
    assert got[3] is None
    assert got[7] == 1.0
    mask = labels == 0
    assert got[0] == tpr_at_fpr(HAND_SCORES[mask], HAND_LABELS[mask], (0.0,))[0.0]
    assert set(got) == {0, 3, 7}


# --------------------------------------------------------------------------------------------------
# Advantage
# --------------------------------------------------------------------------------------------------


def test_membership_advantage_is_max_tpr_minus_fpr():
    # Best threshold 8.4: TPR 0.6, FPR 0.1 → 0.5.
    assert membership_advantage(HAND_SCORES, HAND_LABELS) == pytest.approx(0.5)


def test_membership_advantage_is_one_for_perfect_and_zero_for_backwards_scores():
    assert membership_advantage([2.0, 3.0, 0.0, 1.0], [1, 1, 0, 0]) == 1.0
    assert membership_advantage([0.0, 1.0, 2.0, 3.0], [1, 1, 0, 0]) == 0.0


def test_advantage_bound_is_the_edge_of_the_epsilon_delta_region():
    # max_x [min(e^ε x + δ, 1 − e^-ε (1 − δ − x)) − x] over FPR x, computed on a grid.
    x = np.linspace(0, 1, 200_001)
    for eps, delta in [(0.5, 0.0), (1.0, 1e-5), (2.0, 0.01), (4.0, 0.1)]:
        tpr = np.minimum(np.minimum(np.exp(eps) * x + delta, 1 - np.exp(-eps) * (1 - delta - x)), 1)
        assert advantage_bound(eps, delta) == pytest.approx((tpr - x).max(), abs=1e-5)


def test_advantage_bound_limits():
    assert advantage_bound(0.0, 0.0) == 0.0
    assert advantage_bound(0.0, 0.1) == pytest.approx(0.1)
    assert advantage_bound(1.0, 0.0) == pytest.approx(math.tanh(0.5))
    assert advantage_bound(math.inf, 0.0) == 1.0
    assert advantage_bound(1e4, 1e-5) == 1.0  # no overflow


# --------------------------------------------------------------------------------------------------
# Bad arguments
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scores, members, name",
    [
        ([0.1, 0.2, 0.3], [1, 0], "members"),  # length mismatch
        ([0.1, 0.2, 0.3], [1, 1, 1], "members"),  # no non-members
        ([0.1, 0.2, 0.3], [0, 0, 0], "members"),  # no members
        ([0.1, 0.2, 0.3], [1, 0, 2], "members"),  # not 0/1
        ([0.1, np.nan, 0.3], [1, 0, 1], "scores"),  # NaN
        ([0.1, np.inf, 0.3], [1, 0, 1], "scores"),  # inf
        ([[0.1, 0.2], [0.3, 0.4]], [1, 0], "scores"),  # 2-D
    ],
)
@pytest.mark.parametrize("metric", [roc_curve_points, auc_with_ci, tpr_at_fpr, membership_advantage])
def test_bad_scores_or_members_raise_value_error_naming_the_argument(metric, scores, members, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        metric(scores, members)


def test_other_bad_arguments_raise_value_error_naming_the_argument():
    s, m = HAND_SCORES, HAND_LABELS
    with pytest.raises(ValueError, match=r"^confidence\b"):
        auc_with_ci(s, m, confidence=1.0)
    with pytest.raises(ValueError, match=r"^fpr_levels\b"):
        tpr_at_fpr(s, m, fpr_levels=(0.01, 1.5))
    with pytest.raises(ValueError, match=r"^labels\b"):
        per_class_tpr_at_fpr(s, m, labels=[0, 1])
    with pytest.raises(ValueError, match=r"^labels\b"):
        per_class_tpr_at_fpr(s, m, labels=np.array(["cat"] * s.size))
    with pytest.raises(ValueError, match=r"^fpr\b"):
        per_class_tpr_at_fpr(s, m, labels=np.zeros(s.size), fpr=-0.1)
    with pytest.raises(ValueError, match=r"^epsilon\b"):
        advantage_bound(-1.0, 0.0)
    with pytest.raises(ValueError, match=r"^delta\b"):
        advantage_bound(1.0, 1.5)
