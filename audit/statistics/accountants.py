"""Privacy accountants: ε for a DP-SGD run described as data, (σ, q, T, δ).

Opacus's accountants (`prv` default, `rdp`, `gdp`) answer what the training code claims; the PLD
accountant of Google's `dp_accounting` is the tight reference (Koskela et al. 2020; Doroshenko et
al. 2022, arXiv 2207.04380). Both assume Poisson subsampling with rate q, as DP-SGD with
Opacus's DPDataLoader does: a fixed-size shuffled batch sampler is a different mechanism and must
not be accounted with these numbers.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import lru_cache

OPACUS_ACCOUNTANTS = ("prv", "rdp", "gdp")
PLD_DISCRETIZATION = 1e-4


@dataclass(frozen=True)
class DPSGDEvent:
    """What happened in training: T steps of the Poisson-subsampled Gaussian mechanism."""

    noise_multiplier: float
    sample_rate: float
    steps: int


@lru_cache(maxsize=256)
def epsilon_opacus(event: DPSGDEvent, delta: float, accountant: str) -> float:
    """ε reported by Opacus's accountant `accountant` (prv, rdp or gdp) for `event` at `delta`."""
    from opacus.accountants import create_accountant

    if accountant not in OPACUS_ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {OPACUS_ACCOUNTANTS}, got {accountant!r}")
    with warnings.catch_warnings():
        # GDP warns that its CLT approximation is loose at these q; the cross-check says so in numbers.
        warnings.simplefilter("ignore")
        acc = create_accountant(mechanism=accountant)
        acc.history = [(event.noise_multiplier, event.sample_rate, event.steps)]
        return float(acc.get_epsilon(delta=delta))


@lru_cache(maxsize=256)
def epsilon_pld(event: DPSGDEvent, delta: float) -> float:
    """Tight ε from dp_accounting's PLD accountant: PoissonSampled(q, Gaussian(σ)) composed T times.

    The PLD with pessimistic discretisation is an upper bound on the true ε; its discretisation
    error at interval 1e-4 is far below the tolerances used when comparing accountants.
    """
    import dp_accounting
    from dp_accounting.pld import PLDAccountant

    if event.noise_multiplier <= 0:
        return math.inf
    accountant = PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION)
    accountant.compose(
        dp_accounting.PoissonSampledDpEvent(event.sample_rate, dp_accounting.GaussianDpEvent(event.noise_multiplier)),
        event.steps,
    )
    return float(accountant.get_epsilon(delta))


def epsilons_for_event(event: DPSGDEvent, delta: float, accountant: str) -> dict[str, float]:
    """The table a target row carries: prv, rdp, pld always, and the selected accountant if another."""
    names = ["prv", "rdp"] + ([accountant] if accountant not in ("prv", "rdp") else [])
    epsilons = {name: epsilon_opacus(event, delta, name) for name in names}
    epsilons["pld"] = epsilon_pld(event, delta)
    return epsilons
