"""σ of `make_private_with_epsilon` computed once per test process for the same arguments.

Opacus's `get_noise_multiplier` binary-searches σ with ~10-20 accountant evaluations (the PRV
accountant: ~0.5-1 s of CPU each, mostly the RDP bound that sizes its domain). The usage setups of
audit/demos/whitebox_factories.py and the in-script tests ask it the same question (ε 2, δ 1e-5, q 0.1,
2 epochs) three times per factory run: one conformance row spent a third of its CPU there. The function
is pure (its arguments decide the float it returns), so a test module that builds many such setups
answers a repeated question from the first answer: the same σ, bit for bit, from Opacus's own code.
Only `opacus.privacy_engine`'s reference is wrapped, for the module's duration; a worker process the
command spawns computes its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def memoised_noise_multiplier() -> Iterator[dict[tuple, float]]:
    import opacus.privacy_engine as privacy_engine

    original = privacy_engine.get_noise_multiplier
    answers: dict[tuple, float] = {}

    def get_noise_multiplier(**kwargs: Any) -> float:
        key = tuple(sorted(kwargs.items()))
        if key not in answers:
            answers[key] = original(**kwargs)
        return answers[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(privacy_engine, "get_noise_multiplier", get_noise_multiplier)
        yield answers
