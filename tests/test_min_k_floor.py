"""min-k % and min-k %++ keep ⌊k·n⌋ tokens (at least one), as the papers' code does (issue #41 item 5):
scores checked against the formulas written out by hand on a document where ⌊·⌋ and ⌈·⌉ differ."""

from __future__ import annotations

import numpy as np
import pytest

from attacks.min_k import min_k_scores
from attacks.min_k_plus_plus import min_k_plus_plus_scores

# One document of n = 6 scored tokens (a padded 7th position): log p(x_t | x_<t), and the model's
# own mean μ_t and SD σ_t of log p(z | x_<t) at each position (Zhang et al. 2024, eq. 3).
LOGPROB = np.array([[-0.2, -4.0, -1.0, -6.0, -0.5, -2.5, np.nan]])
MU = np.array([[-1.0, -2.0, -1.5, -3.0, -0.8, -2.0, np.nan]])
SIGMA = np.array([[0.5, 1.0, 0.5, 2.0, 0.4, 0.25, np.nan]])


def test_min_k_keeps_floor_of_k_n_tokens():
    # Shi et al. 2024: mean of the ⌊k·n⌋ lowest log-probabilities.
    # k = 0.2: ⌊1.2⌋ = 1 → {-6.0}; ⌈1.2⌉ = 2 would be {-6.0, -4.0}.
    assert min_k_scores(LOGPROB, 0.2)[0] == pytest.approx(-6.0)
    # k = 0.5: ⌊3⌋ = 3 → {-6.0, -4.0, -2.5}.
    assert min_k_scores(LOGPROB, 0.5)[0] == pytest.approx((-6.0 - 4.0 - 2.5) / 3)
    # k = 0.6: ⌊3.6⌋ = 3 (⌈3.6⌉ = 4 would add -1.0).
    assert min_k_scores(LOGPROB, 0.6)[0] == pytest.approx((-6.0 - 4.0 - 2.5) / 3)
    # k = 0.1: ⌊0.6⌋ = 0 → at least one token.
    assert min_k_scores(LOGPROB, 0.1)[0] == pytest.approx(-6.0)


def test_min_k_plus_plus_keeps_floor_of_k_n_standardised_tokens():
    # Zhang et al. 2024: z_t = (log p − μ_t) / σ_t, then the mean of the ⌊k·n⌋ lowest z_t.
    z = [
        (-0.2 + 1.0) / 0.5,
        (-4.0 + 2.0) / 1.0,
        (-1.0 + 1.5) / 0.5,
        (-6.0 + 3.0) / 2.0,
        (-0.5 + 0.8) / 0.4,
        (-2.5 + 2.0) / 0.25,
    ]  # 1.6, -2.0, 1.0, -1.5, 0.75, -2.0
    lowest = sorted(z)
    assert min_k_plus_plus_scores(LOGPROB, MU, SIGMA, 0.2)[0] == pytest.approx(lowest[0])  # ⌊1.2⌋ = 1
    assert min_k_plus_plus_scores(LOGPROB, MU, SIGMA, 0.5)[0] == pytest.approx(np.mean(lowest[:3]))  # ⌊3⌋ = 3
    assert min_k_plus_plus_scores(LOGPROB, MU, SIGMA, 0.6)[0] == pytest.approx(np.mean(lowest[:3]))  # ⌊3.6⌋ = 3
    assert min_k_plus_plus_scores(LOGPROB, MU, SIGMA, 1.0)[0] == pytest.approx(np.mean(z))
