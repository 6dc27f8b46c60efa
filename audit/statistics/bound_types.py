"""The shared types of the ε bounds: the result (`EpsilonLowerBound`), the threshold strategies
(`HeldOut`, `Bonferroni`) and the argument checks every estimator applies at its boundary.

Threshold choice is the classic way to fool yourself: a threshold picked to maximise the bound on
the same scores the bound is computed on gives an optimistic "bound". Hence the strategies
`HeldOut` (choose on one part, bound on the other) and `Bonferroni` (pay for every threshold
tried), as small frozen dataclasses instead of string flags.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field

from audit.statistics.attack_metrics import validate_probability

__all__ = ["EpsilonLowerBound", "HeldOut", "Bonferroni", "ThresholdStrategy", "GDP_LABEL"]

GDP_LABEL = "estimate (assumes GDP)"


# --------------------------------------------------------------------------------------------------
# Result and strategy types
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EpsilonLowerBound:
    """One ε lower bound (or, for GDP, estimate) with everything needed to reproduce it.

    `sound` is False for the GDP estimate: it assumes a Gaussian trade-off curve and must never
    decide a violation verdict on its own. `details` is JSON-serialisable (plain floats, ints,
    strings, lists, dicts).

    Attributes:
        epsilon: the bound (or estimate), ≥ 0; inf where a perfect attack's counts allow it.
        method: the estimator's name in the registry (audit/statistics/estimators.py).
        confidence: the level it holds at.
        sound: a proven lower bound under the method's assumption (False: an estimate).
        details: the counts, rule and levels that reproduce it.
    """

    epsilon: float
    method: str
    confidence: float
    sound: bool
    details: dict = field(default_factory=dict)


@dataclass(frozen=True)
class HeldOut:
    """Choose threshold and direction on a random stratified `fraction` of the candidates
    (members and non-members split separately, seeded by `seed`); bound on the rest only.

    Attributes:
        fraction: the share of candidates the threshold is chosen on, in (0, 1).
        seed: seeds the stratified split.
    """

    fraction: float = 0.5
    seed: int = 0

    def __post_init__(self):
        validate_probability("fraction", self.fraction, open_low=True, open_high=True)
        _as_count("seed", self.seed)


@dataclass(frozen=True)
class Bonferroni:
    """Try up to `max_thresholds` thresholds (quantiles of all scores) × both directions on all
    data, splitting the failure probability equally across every one-sided bound computed.

    Attributes:
        max_thresholds: the most thresholds tried (≥ 1); each costs its share of the error level.
    """

    max_thresholds: int = 100

    def __post_init__(self):
        if _as_count("max_thresholds", self.max_thresholds) < 1:
            raise ValueError(f"max_thresholds: must be ≥ 1, got {self.max_thresholds!r}")


ThresholdStrategy = HeldOut | Bonferroni


# --------------------------------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------------------------------


def _as_count(name: str, value) -> int:
    """A non-negative integer (Python or numpy int, or an integral float), else ValueError."""
    if isinstance(value, bool):
        raise ValueError(f"{name}: expected a non-negative integer, got {value!r}")
    try:
        out = operator.index(value)
    except TypeError:
        if isinstance(value, float) and value.is_integer():
            out = int(value)
        else:
            raise ValueError(f"{name}: expected a non-negative integer, got {value!r}") from None
    if out < 0:
        raise ValueError(f"{name}: expected a non-negative integer, got {value!r}")
    return out


def _check_delta(delta) -> float:
    return validate_probability("delta", delta, open_low=False, open_high=True)


def _check_confidence(confidence) -> float:
    return validate_probability("confidence", confidence, open_low=True, open_high=True)


def _check_rate(name: str, value) -> float:
    return validate_probability(name, value, open_low=False, open_high=False)


def _check_epsilon(epsilon) -> float:
    try:
        eps = float(epsilon)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"epsilon: expected a number, got {epsilon!r}") from exc
    if math.isnan(eps) or eps < 0:
        raise ValueError(f"epsilon: must be ≥ 0, got {epsilon!r}")
    return eps


def _check_strategy(strategy) -> ThresholdStrategy:
    if not isinstance(strategy, (HeldOut, Bonferroni)):
        raise ValueError(f"strategy: expected HeldOut(...) or Bonferroni(...), got {strategy!r}")
    return strategy
