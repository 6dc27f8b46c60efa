"""Privacy accountants: ε for a DP-SGD run described as data, (σ, q, T, δ).

Opacus's accountants (`prv` default, `rdp`, `gdp`) answer what the training code claims; the PLD
accountant of Google's `dp_accounting` is the tight reference (Koskela et al. 2020; Doroshenko et
al. 2022, arXiv 2207.04380). Both assume Poisson subsampling with rate q, as DP-SGD with
Opacus's DPDataLoader does: a fixed-size shuffled batch sampler is a different mechanism and must
not be accounted with these numbers.
"""

from __future__ import annotations

import logging
import math
import numbers
import threading
import time
import warnings
from collections import OrderedDict
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

OPACUS_ACCOUNTANTS = ("prv", "rdp", "gdp")
PLD_DISCRETIZATION = 1e-4
# The PLD interval is refined until upper − lower ≤ this fraction of ε, or the time budget is spent.
PLD_RELATIVE_TOLERANCE = 0.01
PLD_TIME_BUDGET_S = 30.0
# Below this the discretisation makes the PLD grids too large for memory on a laptop.
PLD_FINEST_DISCRETIZATION = 1e-7
_COST_EXPONENT = 0.7


@dataclass(frozen=True)
class DPSGDEvent:
    """What happened in training: T steps of the Poisson-subsampled Gaussian mechanism.

    Attributes:
        noise_multiplier: σ, the noise's standard deviation over the clipping norm.
        sample_rate: q, each record's Poisson inclusion probability per step.
        steps: T, the noisy steps.
    """

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

    Privacy loss distributions: Koskela, Jälkö, Honkela 2020 (arXiv 1906.03049); the pessimistic
    discretisation of Doroshenko, Ghazi, Kamath, Kumar, Manurangsi 2022 (arXiv 2207.04380).
    The PLD with pessimistic discretisation is an upper bound on the true ε; its discretisation
    error at interval 1e-4 is far below the tolerances used when comparing accountants.

    Args:
        event: the DP-SGD run (noise multiplier σ, sample rate q, steps T).
        delta: the δ at which ε is read.

    Returns:
        ε (inf when σ ≤ 0).
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


@dataclass(frozen=True)
class PLDInterval:
    """Where the true ε of T Poisson-subsampled Gaussian steps lies: lower ≤ ε ≤ upper.

    `tight` says whether upper − lower ≤ `relative_tolerance`·upper was reached; when not (the time
    budget ran out first) `note` says so, and a judgement against `lower` is weaker than it could be
    (fewer accountants are flagged), never wrong.
    """

    lower: float
    upper: float
    discretization: float
    tight: bool
    relative_tolerance: float
    seconds: float
    note: str

    @property
    def relative_gap(self) -> float:
        return (self.upper - self.lower) / self.upper if self.upper > 0 else 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "relative_gap": self.relative_gap}


# Single-step PLDs kept for reuse, newest last, while their probability arrays hold at most this
# many values in all (8 bytes each: ≤ 32 MiB). One step of the subsampled Gaussian does not depend
# on T or δ: a grid of σ × q × T (accountant-check's default: 3 × 3 × 3) builds each once per
# discretisation instead of once per T, and it was most of a round's time (from_gaussian_mechanism
# evaluates the privacy loss at every grid point in Python; the composition is one FFT).
_SINGLE_STEP_CACHE_VALUES = 4_000_000
_single_step_cache: OrderedDict[tuple[float, float, float, bool], tuple[Any, int]] = OrderedDict()
_single_step_lock = threading.Lock()


def _pmf_size(distribution) -> int | None:
    """Values held by the distribution's probability arrays; None when this dp_accounting does not say."""
    pmfs = {id(p): p for p in (getattr(distribution, "_pmf_remove", None), getattr(distribution, "_pmf_add", None))}
    sizes = [getattr(p, "size", None) for p in pmfs.values() if p is not None]
    counts = [int(s) for s in sizes if isinstance(s, numbers.Integral)]
    return sum(counts) if sizes and len(counts) == len(sizes) else None


def _single_step_pld(noise_multiplier: float, sample_rate: float, interval: float, pessimistic: bool):
    """dp_accounting's PLD of ONE Poisson-subsampled Gaussian step (pure; the result is never
    mutated: composition returns a new distribution), from a small cache when it was built before."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    key = (float(noise_multiplier), float(sample_rate), float(interval), bool(pessimistic))
    with _single_step_lock:
        if key in _single_step_cache:
            _single_step_cache.move_to_end(key)
            return _single_step_cache[key][0]
    # Connect-the-dots is a valid pessimistic (upper) discretisation only; the optimistic one
    # rounds privacy losses down, so its ε is a lower bound on the true ε.
    distribution = pld.from_gaussian_mechanism(
        noise_multiplier,
        sampling_prob=sample_rate,
        pessimistic_estimate=pessimistic,
        value_discretization_interval=interval,
        use_connect_dots=pessimistic,
    )
    size = _pmf_size(distribution)
    with _single_step_lock:
        if size is not None and size <= _SINGLE_STEP_CACHE_VALUES // 4:  # unknown or large: not kept
            _single_step_cache[key] = (distribution, size)
            while sum(s for _, s in _single_step_cache.values()) > _SINGLE_STEP_CACHE_VALUES:
                _single_step_cache.popitem(last=False)
    return distribution


@lru_cache(maxsize=1024)  # two floats; asked again for the same (event, δ, h) by each formula checked on a grid
def _pld_bounds_at(event: DPSGDEvent, delta: float, interval: float) -> tuple[float, float]:
    def epsilon(pessimistic: bool) -> float:
        distribution = _single_step_pld(event.noise_multiplier, event.sample_rate, interval, pessimistic)
        return float(distribution.self_compose(event.steps).get_epsilon_for_delta(delta))

    return epsilon(False), epsilon(True)


@lru_cache(maxsize=512)
def pld_epsilon_interval(
    event: DPSGDEvent,
    delta: float,
    relative_tolerance: float = PLD_RELATIVE_TOLERANCE,
    time_budget_s: float = PLD_TIME_BUDGET_S,
) -> PLDInterval:
    """The true ε of `event` at `delta` bracketed by dp_accounting's optimistic and pessimistic PLDs.

    Meiser & Mohammadi 2018 (privacy buckets); Koskela, Jälkö, Honkela 2020 (arXiv 1906.03049);
    Doroshenko, Ghazi, Kamath, Kumar, Manurangsi 2022, "Connect the Dots: Tighter Discrete
    Approximations of Privacy Loss Distributions", arXiv 2207.04380. The pessimistic PLD's ε is an
    upper bound on the true ε, the optimistic PLD's a lower bound; both converge as the value
    discretisation h shrinks. The gap grows about linearly in T·h (at σ 2, q 0.004, T 4000, δ 1e-5:
    [0.280, 0.480] at h = 1e-4, [0.4736, 0.4796] at 3e-6), so one fixed h can hide an unsound
    accountant. Starting at h = 1e-4, h shrinks (by at least half per round, to where the gap is
    predicted to meet the tolerance) until upper − lower ≤ `relative_tolerance`·upper, or until the
    next round would overrun `time_budget_s` (then `tight` is False and `note` says so).
    Cached per (event, δ, tolerance, budget): the run's accountant column and `accountants` reuse it.
    """
    logging.getLogger().setLevel(logging.ERROR)  # dp_accounting logs a notice for optimistic PLDs
    from dp_accounting.pld import privacy_loss_distribution  # noqa: F401  (import time is not a round's cost)

    if event.noise_multiplier <= 0:
        return PLDInterval(math.inf, math.inf, 0.0, True, relative_tolerance, 0.0, "no noise: ε = ∞")
    start = time.monotonic()
    interval = PLD_DISCRETIZATION
    while True:
        round_start = time.monotonic()
        lower, upper = _pld_bounds_at(event, delta, interval)
        round_seconds = time.monotonic() - round_start
        elapsed = time.monotonic() - start
        gap = upper - lower
        if gap <= relative_tolerance * upper or upper == 0:
            return PLDInterval(
                lower,
                upper,
                interval,
                True,
                relative_tolerance,
                elapsed,
                f"upper − lower = {gap:.2g} ≤ {relative_tolerance:.0%} of ε (discretisation {interval:.2g})",
            )
        # Gap ∝ h: aim a little below the tolerance, shrinking at least by half. The cost of a round
        # grows about like h^(-0.7) (measured: 1e-4 → 3e-6 costs ≈ 12×); when the aimed-for round
        # would overrun the budget, take the largest step that still fits.
        factor = min(0.5, 0.8 * relative_tolerance * upper / gap)
        remaining = time_budget_s - elapsed
        if remaining > 0 and round_seconds / factor**_COST_EXPONENT > remaining:
            factor = (round_seconds / remaining) ** (1 / _COST_EXPONENT)
        next_interval = interval * factor
        if factor > 0.5 or remaining <= 0 or next_interval < PLD_FINEST_DISCRETIZATION:
            return PLDInterval(
                lower,
                upper,
                interval,
                False,
                relative_tolerance,
                elapsed,
                f"not tight: upper − lower = {gap:.3g} ({gap / upper:.1%} of ε) at discretisation {interval:.2g}; "
                f"refining further would exceed the {time_budget_s:g} s budget; an accountant is judged "
                f"unsound only below the lower end {lower:.4g}",
            )
        interval = next_interval
