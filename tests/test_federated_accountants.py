"""The two federated documents' ε formulas are flagged unsound on accountant-check's default grid."""
from __future__ import annotations

import pytest

from audit.demos.federated_accountants import dp_fedavg_sqrt_composition, hospitals_abadi_approximation
from audit.dp_validation.accountant_check import DEFAULT_MARGIN, AccountantGrid, check_accountant, classify, summarize


# The default grid's σ × q at its T = 100 column; the T = 1000 and 4000 columns are left out only
# because their PLD intervals take minutes on a loaded 2-core machine (on the full default grid
# 24/27 and 18/27 points are unsound: README, "Federated targets").
GRID = AccountantGrid(steps=[100])


def test_both_documents_accountants_under_report_epsilon_on_the_default_grid():
    # One pass over the grid (the PLD intervals are the slow part), both formulas judged on it.
    points = check_accountant(hospitals_abadi_approximation, GRID)
    summary = summarize(points)
    assert not summary["passed"]
    assert summary["counts"]["unsound"] > len(points) // 2
    fedavg_labels = [
        classify(dp_fedavg_sqrt_composition(p.noise_multiplier, p.sample_rate, p.steps, p.delta),
                 p.pld_lower, p.pld_upper, DEFAULT_MARGIN)[0]
        for p in points
    ]
    assert fedavg_labels.count("unsound") > len(points) // 2
    for point in points:
        if point.label == "unsound":
            assert point.reported < point.pld_lower


def test_dp_fedavg_formula_matches_the_document():
    # q = 0.5, σ = 1, δ = 1e-5, 100 rounds: 0.5·sqrt(2 ln 125000)·sqrt(100)
    assert dp_fedavg_sqrt_composition(1.0, 0.5, 100, 1e-5) == pytest.approx(24.2240, abs=1e-3)
    # q = 0.01, T = 1000, δ = 1e-5, σ = 1: 0.01·sqrt(1000·ln 1e5)
    assert hospitals_abadi_approximation(1.0, 0.01, 1000, 1e-5) == pytest.approx(1.0730, abs=1e-3)
