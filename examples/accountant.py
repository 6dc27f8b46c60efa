"""Two accountants for `accountant-check`: one that holds and one that under-reports ε.

    privacy-audit accountant-check --accountant accountant:rdp_accountant --grid accountant_grid.yaml
    privacy-audit accountant-check --accountant accountant:sqrt_composition --grid accountant_grid.yaml

An accountant is a function `(noise_multiplier σ, sample_rate q, steps T, δ) -> ε` for DP-SGD with
Poisson sampling. The check compares it with the tight PLD accountant of `dp_accounting` at each
grid point: below the PLD's optimistic value it is *unsound* (it claims more privacy than the
mechanism gives; exit 1), more than 10 % above it is *loose* (sound, wasteful).
"""

from __future__ import annotations

import math


def rdp_accountant(noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> float:
    """Rényi-DP accounting of the subsampled Gaussian (Mironov et al. 2019, arXiv 1908.10530), via Opacus."""
    from opacus.accountants import RDPAccountant

    accountant = RDPAccountant()
    accountant.history = [(noise_multiplier, sample_rate, steps)]
    return float(accountant.get_epsilon(delta))


def sqrt_composition(noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> float:
    """Unsound: the Gaussian mechanism's ε for one step, scaled by q as if amplification were linear,
    composed as √T·ε (the δ and ε²T terms of advanced composition dropped)."""
    per_step = sample_rate * math.sqrt(2.0 * math.log(1.25 / delta)) / noise_multiplier
    return math.sqrt(steps) * per_step
