"""The inverse blow-up f̄⁻¹ of a privacy profile's trade-off curve, evaluated fast with the same digits.

f̄⁻¹(y) = min(1, max(0, max_i (y − δ_i)·e^{−ε_i}, max_i (1 − δ_i) − (1 − y)·e^{ε_i})) over the profile's
pairs (ε_i, δ_i) (Mahloujifar, Melis, Chaudhuri 2024, arXiv 2410.22235; the lines of Dong, Roth, Su 2019,
arXiv 1905.02383, Proposition 2.12; derivation in `audit.statistics.fdp_one_run`). The one-run f-DP
recursion evaluates it once per step, hundreds of thousands of times per white-box twin, at one y at a
time; over a DP-SGD profile's 2 × 1201 lines each numpy call cost ≈ 30 µs, mostly call overhead.

Why the fast path gives the reference's number bit for bit: every line is a fixed sequence of IEEE
operations on y and the line's own constants (the same e^{±ε_i} array values), so a line's value does
not depend on which other lines are evaluated; the maximum over any subset that contains the maximal line
is the maximum over all. For a bin [a, b] of y, a line can be the (floating-point) maximum somewhere in it
only if its larger end value, plus a bound on its rounding error, reaches the largest smaller end value
of any line less that line's error bound (each line is linear, so its extremes on [a, b] are its end
values). Only those lines are kept for the bin (computed once per bin visited, on first use), and y is
evaluated on them alone. The error bounds are 16 units of 2⁻⁵³ times the terms' magnitudes, more than
the roundings of a value at y, at the bin's end and of the bounds themselves can cost together. `profile_inverse_reference` is the plain evaluation over
every line; tests/test_profile_inverse.py checks both agree bit for bit on dense and tiny y.

Pure functions (a closure's per-bin memo changes no result), no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from audit.statistics.tradeoff_curves import PrivacyProfile

__all__ = ["profile_inverse_fast", "profile_inverse_reference"]

# Bins: 2^12 equal bins on [2^-12, 1]; below, one bin per binary exponent [2^(e-1), 2^e] (the recursion
# starts at y = α·c/m, as small as 10⁻⁴⁰ in the p-value's bisection); and y = 0 alone.
_UNIFORM_BITS = 12
_UNIFORM_BINS = 1 << _UNIFORM_BITS
# A bin whose kept lines are more than this is evaluated with numpy over the kept lines (same values).
_PYTHON_LINES = 48
# 16 units of 2⁻⁵³ times the terms' magnitude: a line's value at y and at a bin's end each cost ≤ 3 of them,
# the bounds' own sums ≤ 2 more.
_ERROR_UNITS = 16.0 * 2.0**-53


def profile_inverse_reference(profile: PrivacyProfile) -> Callable[[float], float]:
    """f̄⁻¹ of the profile's curve, every line evaluated at every y (the reference the fast path equals)."""
    eps, deltas = profile.arrays()
    scale_down, scale_up = np.exp(-eps), np.exp(eps)

    def inverse(y: float) -> float:
        y = min(max(float(y), 0.0), 1.0)
        first = (y - deltas) * scale_down
        second = 1.0 - deltas - (1.0 - y) * scale_up
        return float(min(1.0, max(0.0, np.max(first), np.max(second))))

    return inverse


def _bin_of(y: float) -> tuple[int, float, float]:
    """(key, a, b): the bin [a, b] ∋ y (exact binary fractions, so y ∈ [a, b] holds exactly)."""
    if y >= 1.0 / _UNIFORM_BINS:
        k = min(int(y * _UNIFORM_BINS), _UNIFORM_BINS - 1)
        return k, k / _UNIFORM_BINS, (k + 1) / _UNIFORM_BINS
    if y <= 0.0:
        return -1, 0.0, 0.0
    _, e = math.frexp(y)  # y = mantissa·2^e, mantissa ∈ [½, 1): y ∈ [2^(e−1), 2^e)
    return -10_000 + e, math.ldexp(1.0, e - 1), math.ldexp(1.0, e)


def profile_inverse_fast(profile: PrivacyProfile) -> Callable[[float], float]:
    """f̄⁻¹ of the profile's curve, equal bit for bit to `profile_inverse_reference` (module docstring)."""
    eps, deltas = profile.arrays()
    scale_down, scale_up = np.exp(-eps), np.exp(eps)
    one_minus = 1.0 - deltas
    memo: dict[int, tuple] = {}

    def kept(a: float, b: float) -> tuple:
        first_a, first_b = (a - deltas) * scale_down, (b - deltas) * scale_down
        second_a, second_b = one_minus - (1.0 - a) * scale_up, one_minus - (1.0 - b) * scale_up
        err_first = _ERROR_UNITS * (b + deltas) * scale_down
        err_second = _ERROR_UNITS * (1.0 + deltas + (1.0 - a) * scale_up)
        low = max(
            float(np.max(np.minimum(first_a, first_b) - err_first)),
            float(np.max(np.minimum(second_a, second_b) - err_second)),
        )
        keep_first = np.flatnonzero(np.maximum(first_a, first_b) + err_first >= low)
        keep_second = np.flatnonzero(np.maximum(second_a, second_b) + err_second >= low)
        if keep_first.size + keep_second.size > _PYTHON_LINES:
            return (
                "numpy",
                (deltas[keep_first], scale_down[keep_first]),
                (deltas[keep_second], scale_up[keep_second]),
            )
        return (
            "python",
            [(float(deltas[i]), float(scale_down[i])) for i in keep_first],
            [(float(deltas[i]), float(scale_up[i])) for i in keep_second],
        )

    def inverse(y: float) -> float:
        y = min(max(float(y), 0.0), 1.0)
        key, a, b = _bin_of(y)
        lines = memo.get(key)
        if lines is None:
            lines = memo[key] = kept(a, b)
        kind, first, second = lines
        if kind == "numpy":
            (d1, s1), (d2, s2) = first, second
            values = [float(np.max((y - d1) * s1))] if d1.size else []
            values += [float(np.max(1.0 - d2 - (1.0 - y) * s2))] if d2.size else []
            best = max(values)
        else:
            best = max([(y - d) * s for d, s in first] + [(1.0 - d) - (1.0 - y) * u for d, u in second])
        return float(min(1.0, max(0.0, best)))

    return inverse
