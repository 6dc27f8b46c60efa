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
values) — and, as the result is floored at 0, only if that larger end value plus its error bound is ≥ 0
(when every line is below 0 the result is 0 whichever are kept). Only those lines are kept for the bin
(computed once per bin visited, on first use), and y is evaluated on them alone. Bins come in two levels:
a fine bin's lines are sought among its coarse bin's kept lines, which hold every line that can be the
maximum anywhere in the coarse bin, so in the fine bin too; the threshold computed over that subset is
no higher than over every line, so nothing that can be the maximum is dropped. The error bounds are 16
units of 2⁻⁵³ times the terms' magnitudes, more than the roundings of a value at y, at the bin's end and
of the bounds themselves can cost together. `profile_inverse_reference` is the plain evaluation over
every line; tests/test_profile_inverse.py checks both agree bit for bit on dense and tiny y.

Pure functions (a closure's per-bin memo changes no result), no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from audit.statistics.tradeoff_curves import PrivacyProfile

__all__ = ["profile_inverse_fast", "profile_inverse_reference"]

# Coarse bins: 2^8 equal bins on [2^-8, 1]; below, one per binary exponent [2^(e-1), 2^e] (the recursion
# starts at y = α·c/m, as small as 10⁻⁴⁰ in the p-value's bisection); y = 0 alone. Each coarse bin is cut
# into 2^3 equal fine bins (not below 2^-1000, where the cuts would not be exact binary fractions); a fine
# bin's lines are sought among its coarse bin's kept lines (module docstring: still every possible maximum).
_COARSE_BITS, _FINE_BITS = 8, 3
_SUBNORMAL_SAFE_EXPONENT = -1000
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


def _bins_of(y: float) -> tuple[tuple[int, float, float], tuple[int, float, float]]:
    """((key, a, b) of the coarse bin, (key, a, b) of the fine bin) ∋ y, y in [0, 1]: exact binary
    fractions, so y ∈ [a, b] holds exactly, and the fine bin lies inside the coarse one."""
    coarse, fine = 1 << _COARSE_BITS, 1 << (_COARSE_BITS + _FINE_BITS)
    if y >= 1.0 / coarse:
        k, j = min(int(y * coarse), coarse - 1), min(int(y * fine), fine - 1)
        return (k, k / coarse, (k + 1) / coarse), (j, j / fine, (j + 1) / fine)
    if y <= 0.0:
        return (-1, 0.0, 0.0), (-1, 0.0, 0.0)
    mantissa, e = math.frexp(y)  # y = mantissa·2^e, mantissa ∈ [½, 1): y ∈ [2^(e−1), 2^e)
    octave = (-10_000 + e, math.ldexp(1.0, e - 1), math.ldexp(1.0, e))
    if e - 1 - _FINE_BITS < _SUBNORMAL_SAFE_EXPONENT:
        return octave, octave
    part = int((2.0 * mantissa - 1.0) * (1 << _FINE_BITS))  # exact: y ∈ 2^(e−1)·[1 + part/8, 1 + (part+1)/8)
    start = (1 << _FINE_BITS) + part
    return octave, (
        -10_000_000 + e * 1000 + part,
        math.ldexp(float(start), e - 1 - _FINE_BITS),
        math.ldexp(float(start + 1), e - 1 - _FINE_BITS),
    )


def _kept_lines(
    a: float, b: float, d_first: np.ndarray, s_first: np.ndarray, d_second: np.ndarray, u_second: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the first-family lines (y − δ)·s and second-family lines (1 − δ) − (1 − y)·u that can
    give the floating-point maximum somewhere in [a, b] with a value ≥ 0 (below 0 the result is 0,
    whatever the line): those whose larger end value plus its error bound reaches the largest smaller
    end value less its error bound, and 0."""
    first_a, first_b = (a - d_first) * s_first, (b - d_first) * s_first
    one_minus = 1.0 - d_second
    second_a, second_b = one_minus - (1.0 - a) * u_second, one_minus - (1.0 - b) * u_second
    err_first = _ERROR_UNITS * (b + d_first) * s_first
    err_second = _ERROR_UNITS * (1.0 + d_second + (1.0 - a) * u_second)
    low = max(
        0.0,
        float(np.max(np.minimum(first_a, first_b) - err_first, initial=-np.inf)),
        float(np.max(np.minimum(second_a, second_b) - err_second, initial=-np.inf)),
    )
    return (
        np.flatnonzero(np.maximum(first_a, first_b) + err_first >= low),
        np.flatnonzero(np.maximum(second_a, second_b) + err_second >= low),
    )


def profile_inverse_fast(profile: PrivacyProfile) -> Callable[[float], float]:
    """f̄⁻¹ of the profile's curve, equal bit for bit to `profile_inverse_reference` (module docstring)."""
    eps, deltas = profile.arrays()
    scale_down, scale_up = np.exp(-eps), np.exp(eps)
    if not (np.all(np.isfinite(scale_up)) and np.all(scale_down > 0)):
        return profile_inverse_reference(profile)  # ε' beyond e^709: inf·0 would make NaNs; no fast path
    every = np.arange(deltas.size)
    coarse_memo: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    fine_memo: dict[int, tuple] = {}

    def lines(y: float) -> tuple:
        (coarse_key, ca, cb), (fine_key, a, b) = _bins_of(y)
        found = fine_memo.get(fine_key)
        if found is not None:
            return found
        parent = coarse_memo.get(coarse_key)
        if parent is None:
            kept = _kept_lines(ca, cb, deltas, scale_down, deltas, scale_up)
            parent = coarse_memo[coarse_key] = (every[kept[0]], every[kept[1]])
        first, second = parent
        keep_first, keep_second = _kept_lines(a, b, deltas[first], scale_down[first], deltas[second], scale_up[second])
        first, second = first[keep_first], second[keep_second]
        if first.size + second.size > _PYTHON_LINES:
            found = (True, deltas[first], scale_down[first], deltas[second], scale_up[second])
        else:  # second-family lines as (1 − δ, e^ε): the reference forms 1 − δ first, too
            found = (
                False,
                [(float(deltas[i]), float(scale_down[i])) for i in first],
                [(float(1.0 - deltas[i]), float(scale_up[i])) for i in second],
            )
        fine_memo[fine_key] = found
        return found

    lowest_uniform, fine_scale = 2.0**-_COARSE_BITS, float(1 << (_COARSE_BITS + _FINE_BITS))
    last_uniform, fine_parts = (1 << (_COARSE_BITS + _FINE_BITS)) - 1, 1 << _FINE_BITS

    def inverse(y: float) -> float:
        y = min(max(float(y), 0.0), 1.0)
        if y != y:
            return 0.0  # NaN: the reference's max(0.0, nan, nan) is 0.0
        # The fine bin's key of `_bins_of`, read without building the bins.
        if y >= lowest_uniform:
            found = fine_memo.get(min(int(y * fine_scale), last_uniform))
        else:
            mantissa, e = math.frexp(y)
            found = fine_memo.get(-10_000_000 + e * 1000 + int((2.0 * mantissa - 1.0) * fine_parts))
        if found is None:
            found = lines(y)
        if found[0]:
            _, d1, s1, d2, u2 = found
            values = [float(np.max((y - d1) * s1))] if d1.size else []
            values += [float(np.max(1.0 - d2 - (1.0 - y) * u2))] if d2.size else []
            return float(min(1.0, max(0.0, *values))) if values else 0.0
        # max(0.0, every value), as the reference's max(0.0, max(first), max(second)): ties are equal values.
        best = 0.0
        for d, scale in found[1]:
            value = (y - d) * scale
            if value > best:
                best = value
        rest = 1.0 - y
        for one_minus_d, scale in found[2]:
            value = one_minus_d - rest * scale
            if value > best:
                best = value
        return 1.0 if best > 1.0 else best

    return inverse
