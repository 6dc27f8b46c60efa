"""δ(ε') on a grid (audit.statistics.pld_deltas) equals dp_accounting's get_delta_for_epsilon bit for bit."""

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld

from audit.statistics.pld_deltas import pld_deltas
from audit.statistics.tradeoff_curves import EPSILON_GRID_MAX, EPSILON_GRID_POINTS


@pytest.mark.parametrize(
    ("sigma", "q", "steps"),
    [(1.0357666015625, 1 / 19, 570), (9.21875, 1 / 19, 570), (2.0, 1.0, 1), (0.5, 0.01, 100)],
)
def test_the_vectorised_deltas_equal_the_librarys_loop(sigma, q, steps):
    distribution = pld.from_gaussian_mechanism(
        sigma, sampling_prob=q, pessimistic_estimate=True, value_discretization_interval=1e-3, use_connect_dots=True
    ).self_compose(steps)
    grids = [
        np.linspace(0.0, EPSILON_GRID_MAX, EPSILON_GRID_POINTS),
        np.array([0.0, 0.5, 0.5, 3.0, np.inf]),  # repeated and infinite ε'
        np.array([-1.0, 100.0]),  # below every loss, above every loss
    ]
    for grid in grids:
        expected = np.asarray(distribution.get_delta_for_epsilon(grid), dtype=np.float64)
        assert np.array_equal(pld_deltas(distribution, grid).view(np.int64), expected.view(np.int64))


def test_an_unsorted_grid_goes_through_the_library_and_raises_as_it_does():
    distribution = pld.from_gaussian_mechanism(1.0, sampling_prob=0.1, value_discretization_interval=1e-2)
    with pytest.raises(ValueError, match="sorted"):
        pld_deltas(distribution, np.array([1.0, 0.5]))
