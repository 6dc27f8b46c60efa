"""Ties and saturation are visible (issues 24 and 27): exact TPR at a fixed FPR on a constructed
example whose answer is known by hand, and notes that name a mostly tied or saturated attack."""

import numpy as np
import pytest

from audit.statistics.attack_metrics import tpr_at_fpr
from audit.statistics.score_ties import score_ties, tie_notes, tpr_at_fpr_randomized


def _constructed():
    # 100 non-members: 5 score 2, 50 tie at 1, 45 score 0. 100 members: 20 score 2, 60 tie at 1, 20 score 0.
    scores = np.r_[np.full(5, 2.0), np.full(50, 1.0), np.zeros(45), np.full(20, 2.0), np.full(60, 1.0), np.zeros(20)]
    members = np.r_[np.zeros(100, bool), np.ones(100, bool)]
    return scores, members


def test_tpr_at_fpr_is_exact_under_both_conventions_on_a_tie():
    scores, members = _constructed()
    # Conservative: no deterministic threshold between "score 2" (FPR 0.05, TPR 0.20) and "score ≥ 1"
    # (FPR 0.55), so TPR@10 % is 0.20. Randomized: take each tied score with γ = (0.10 − 0.05)/0.50 = 0.1,
    # TPR = 0.20 + 0.1 · 0.60 = 0.26 at FPR exactly 0.10.
    assert tpr_at_fpr(scores, members, [0.1])[0.1] == pytest.approx(0.20)
    assert tpr_at_fpr_randomized(scores, members, [0.1, 0.05, 0.55, 1.0]) == pytest.approx(
        {0.1: 0.26, 0.05: 0.20, 0.55: 0.80, 1.0: 1.0}
    )
    # Below the first point: γ = 0.01/0.05 of the top group, TPR = 0.2 · 0.2 = 0.04.
    assert tpr_at_fpr_randomized(scores, members, [0.01])[0.01] == pytest.approx(0.04)


def test_randomized_tpr_matches_interpolation_without_ties_and_is_never_below_the_conservative():
    rng = np.random.default_rng(3)
    members = rng.random(3000) < 0.5
    scores = rng.normal(size=3000) + members
    cons = tpr_at_fpr(scores, members, [0.001, 0.01, 0.1])
    rand = tpr_at_fpr_randomized(scores, members, [0.001, 0.01, 0.1])
    for level in cons:
        # One non-member step at most separates them on continuous scores.
        assert cons[level] <= rand[level] <= cons[level] + 0.01


def test_a_mostly_tied_and_saturated_attack_is_named_in_a_note():
    rng = np.random.default_rng(4)
    members = rng.random(2400) < 0.5
    scores = rng.normal(size=2400) + members
    scores[rng.random(2400) < 0.6] = -77000.0  # saturated logits, tied at one value
    ties = score_ties(scores)
    assert ties["largest_tie_fraction"] > 0.5 and ties["saturated_fraction"] > 0.5
    cons = tpr_at_fpr(scores, members, [0.001, 0.01, 0.1])
    rand = tpr_at_fpr_randomized(scores, members, [0.001, 0.01, 0.1])
    notes = tie_notes("rmia", scores, members, cons, rand, where="target ε 0.5")
    assert any("target ε 0.5, rmia" in n and "tie at one value" in n for n in notes)
    assert any("saturated" in n for n in notes)


def test_continuous_scores_get_no_note():
    rng = np.random.default_rng(5)
    members = rng.random(2400) < 0.5
    scores = rng.normal(size=2400) + members
    cons = tpr_at_fpr(scores, members, [0.001, 0.01, 0.1])
    rand = tpr_at_fpr_randomized(scores, members, [0.001, 0.01, 0.1])
    assert tie_notes("loss", scores, members, cons, rand) == []
    assert score_ties(scores)["saturated_fraction"] == 0.0
