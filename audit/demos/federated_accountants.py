"""The two federated documents' ε formulas, as accountants `accountant-check` can judge:

    privacy-audit accountant-check --accountant audit.demos.federated_accountants:hospitals_abadi_approximation
    privacy-audit accountant-check --accountant audit.demos.federated_accountants:dp_fedavg_sqrt_composition

Both follow the accountant protocol `(noise_multiplier σ, sample_rate q, steps T, δ) -> ε` and
are checked against the PLD accountant of the Poisson-subsampled Gaussian mechanism composed T
times — the mechanism they claim to account. Both are unsound on the default grid (they report
less ε than the mechanism gives); they are kept here as worked examples of what the check catches.
"""

from __future__ import annotations

import math

__all__ = ["dp_fedavg_sqrt_composition", "hospitals_abadi_approximation"]


def hospitals_abadi_approximation(noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> float:
    """Document 1 (hospitals): ε ≈ q·sqrt(T·ln(1/δ))/σ over a client's local steps.

    The asymptotic form of Abadi et al. 2016 ("Deep Learning with Differential Privacy", arXiv
    1607.00133, Theorem 1) with its unspecified constant taken as 1. The theorem only says ε is
    *of that order* for σ, T in a range; used as an equality it under-reports. (The document also
    draws batches by shuffling while this formula assumes Poisson sampling: a second, separate
    error that no accountant on (σ, q, T) can fix.)
    """
    return sample_rate * math.sqrt(steps * math.log(1.0 / delta)) / noise_multiplier


def dp_fedavg_sqrt_composition(noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> float:
    """Document 2 (client-level DP-FedAvg): ε_round = q·sqrt(2 ln(1.25/δ))/σ, ε = sqrt(T)·ε_round.

    ε_round is the classical Gaussian-mechanism calibration (Dwork & Roth 2014, Theorem 3.22;
    valid only for ε < 1) scaled by q as if subsampling amplification were linear, and the
    rounds are composed as sqrt(T)·ε_round, dropping the δ' and ε²T terms of the advanced
    composition theorem (Dwork, Rothblum, Vadhan 2010) and not composing δ at all.
    """
    per_round = sample_rate * math.sqrt(2.0 * math.log(1.25 / delta)) / noise_multiplier
    return math.sqrt(steps) * per_round
