"""`targets.canaries` inside a real Opacus step: witness rows, the clipped sum, the exact clipping check."""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest
import torch

from audit.dp_validation.one_run_whitebox import train_loop
from targets.canaries import make_canaries
from targets.opacus_setups import tabular_mlp_setup

STEPS, Q, C = 12, 0.1, 2.0


def _run(max_rows=None, kind="dirac", m=200, no_clipping=False):
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    setup = tabular_mlp_setup(
        noise_multiplier=1.0, sample_rate=Q, steps=STEPS, max_grad_norm=C, rows=400, hidden=(32,), seed=0
    )
    optimizer = setup["optimizer"]
    if no_clipping:

        def clip_nothing(self):
            for p in self.params:
                grad = self._get_flat_grad_sample(p).sum(0)
                p.summed_grad = grad if p.summed_grad is None else p.summed_grad + grad

        optimizer.clip_and_accumulate = types.MethodType(clip_nothing, optimizer)
    d = sum(p.numel() for p in optimizer.params if p.requires_grad)
    canaries = make_canaries(d, m, kind=kind, sample_rate=Q, seed=3, noise_multiplier=1.0, max_rows=max_rows)
    canaries.attach(optimizer)
    steps, _ = train_loop(
        setup["model"], optimizer, setup["data_loader"], setup["epochs"], canaries=canaries, max_steps=STEPS
    )
    assert steps == STEPS
    return canaries


@pytest.fixture(scope="module")
def every_row():
    return _run(max_rows=10**9)


@pytest.fixture(scope="module")
def witnesses():
    return _run()


def test_witness_rows_change_the_cost_not_the_scores(every_row, witnesses):
    assert witnesses.inserted == every_row.inserted > 0
    assert every_row.as_rows == every_row.inserted
    assert 0 < witnesses.as_rows < witnesses.inserted  # only some canaries went as rows
    for observe in ("all", "final"):
        np.testing.assert_allclose(witnesses.scores(observe), every_row.scores(observe), rtol=1e-4, atol=1e-4)


def test_a_correct_clipping_adds_exactly_c_per_dirac_canary(every_row, witnesses):
    for canaries in (every_row, witnesses):
        assert canaries.clip_checked_steps == STEPS and canaries.clip_unchecked_steps == 0
        assert canaries.clip_deviation < 1e-3


def test_a_missing_clipping_shows_exactly_in_the_witness_rows():
    canaries = _run(no_clipping=True)
    assert canaries.as_rows > 0
    # A witness of norm 1000·C added 1000·C instead of C.
    assert canaries.clip_deviation > 100


def test_random_direction_canaries_score_the_same_with_witness_rows():
    every, some = _run(max_rows=10**9, kind="random", m=50), _run(kind="random", m=50)
    assert some.as_rows < some.inserted == every.inserted
    np.testing.assert_allclose(some.scores("all"), every.scores("all"), rtol=1e-3, atol=1e-3)
