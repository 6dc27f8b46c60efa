"""What a release did, as plain data: a list of mechanisms, each a small validated dict.

Kinds (every scale is the noise's, every sensitivity the query's; ε is then scale-free):

    {"kind": "dpsgd", "noise_multiplier": σ, "sample_rate": q, "steps": T}
        DP-SGD with Poisson sampling at rate q, Gaussian noise σ × the clipping norm, T steps
        (Abadi et al. 2016, arXiv:1607.00133); one training is one mechanism.
    {"kind": "gaussian", "scale": s, "sensitivity": Δ, "count": n}
        n Gaussian queries of L2 sensitivity Δ with noise standard deviation s.
    {"kind": "laplace", "scale": b, "sensitivity": Δ, "count": n}
        n Laplace queries of L1 sensitivity Δ with noise scale b: each (Δ/b)-DP.
    {"kind": "zcdp", "rho": ρ, "count": n}
        n ρ-zCDP releases (Bun & Steinke 2016, arXiv:1605.02065).
    {"kind": "epsilon_delta", "epsilon": ε, "delta": δ, "count": n}
        a release known only by its (ε, δ) guarantee (a synthetic generator's ε, an audit claim
        stated as a pair): composed as the worst mechanism with that guarantee, never as a curve.

State as data (the Opacus accountant's lesson): the ledger stores these dicts as JSON and the
composition is recomputed from them, so a release is never summarised into a number too early.
"""

from __future__ import annotations

import math
from typing import Any

from audit.errors import AuditInputError

__all__ = ["KINDS", "validate_mechanism", "canonical_key", "describe_mechanism"]

KINDS = ("dpsgd", "gaussian", "laplace", "zcdp", "epsilon_delta")
# From the one range table (audit/machinery/limits.py): far beyond any real release.
from audit.machinery.limits import COUNT_LIMITS as _LIMITS  # noqa: E402 - after the docstring's imports

_MAX_COUNT = _LIMITS["ledger --count"].high
_MAX_STEPS = _LIMITS["ledger --steps"].high


def _number(
    value: Any, where: str, *, low: float, low_open: bool = True, high: float | None = None, high_open: bool = False
) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AuditInputError(where, f"expected a number, got {str(value)[:40]!r}")
    number = float(value)
    if math.isnan(number) or math.isinf(number):
        raise AuditInputError(where, f"must be a finite number, got {number}")
    if (number <= low) if low_open else (number < low):
        raise AuditInputError(where, f"must be {'>' if low_open else '≥'} {low:g}, got {number:g}")
    if high is not None and ((number >= high) if high_open else (number > high)):
        raise AuditInputError(where, f"must be {'<' if high_open else '≤'} {high:g}, got {number:g}")
    return number


def _integer(value: Any, where: str, *, high: int) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or isinstance(value, float)
        and (not math.isfinite(value) or value != int(value))
    ):
        raise AuditInputError(where, f"expected a whole number, got {str(value)[:40]!r}")
    if not 1 <= int(value) <= high:
        raise AuditInputError(where, f"must be in [1, {high:,}], got {int(value)}")
    return int(value)


def validate_mechanism(spec: Any, where: str = "mechanism") -> dict[str, Any]:
    """The mechanism as a normalised dict (floats, ints, count filled in); AuditInputError naming the field."""
    if not isinstance(spec, dict):
        raise AuditInputError(where, "expected a mapping with a 'kind'")
    kind = spec.get("kind")
    if kind not in KINDS:
        raise AuditInputError(f"{where}.kind", f"expected one of {', '.join(KINDS)}, got {str(kind)[:40]!r}")
    fields = {
        "dpsgd": ("noise_multiplier", "sample_rate", "steps"),
        "gaussian": ("scale", "sensitivity", "count"),
        "laplace": ("scale", "sensitivity", "count"),
        "zcdp": ("rho", "count"),
        "epsilon_delta": ("epsilon", "delta", "count"),
    }[kind]
    unknown = set(spec) - set(fields) - {"kind"}
    if unknown:
        raise AuditInputError(
            f"{where}.{sorted(unknown)[0]}", f"unknown field for kind {kind} (known: {', '.join(fields)})"
        )
    spec = {"count": 1, "sensitivity": 1.0, **spec} if kind != "dpsgd" else dict(spec)
    for name in fields:
        if name not in spec:
            raise AuditInputError(f"{where}.{name}", f"missing (kind {kind} needs {', '.join(fields)})")
    from audit.machinery.limits import MIN_NOISE_TO_SENSITIVITY, check_range

    def ranged(name: str, option: str, shown: str) -> float:
        # Type and finiteness first (named as before), then the range table's interval.
        _number(spec[name], f"{where}.{shown}", low=-math.inf)
        return check_range(option, spec[name], where=f"{where}.{shown}")

    out: dict[str, Any] = {"kind": kind}
    if kind == "dpsgd":
        out["noise_multiplier"] = ranged("noise_multiplier", "ledger --noise-multiplier", "noise_multiplier (σ)")
        out["sample_rate"] = ranged("sample_rate", "ledger --sample-rate", "sample_rate (q)")
        out["steps"] = _integer(spec["steps"], f"{where}.steps (T)", high=_MAX_STEPS)
    elif kind in ("gaussian", "laplace"):
        out["scale"] = ranged("scale", f"ledger --{kind}-scale", "scale")
        out["sensitivity"] = ranged("sensitivity", "ledger --sensitivity", "sensitivity")
        out["count"] = _integer(spec["count"], f"{where}.count", high=_MAX_COUNT)
        if out["scale"] / out["sensitivity"] < MIN_NOISE_TO_SENSITIVITY:
            raise AuditInputError(
                f"{where}.scale",
                f"scale / sensitivity must be ≥ {MIN_NOISE_TO_SENSITIVITY:g}, got "
                f"{out['scale'] / out['sensitivity']:.3g} (below it one query spends ε > 10⁵)",
            )
    elif kind == "zcdp":
        out["rho"] = ranged("rho", "ledger --zcdp-rho", "rho (ρ)")
        out["count"] = _integer(spec["count"], f"{where}.count", high=_MAX_COUNT)
    else:
        out["epsilon"] = ranged("epsilon", "ledger --epsilon", "epsilon")
        out["delta"] = ranged("delta", "ledger --delta", "delta")
        out["count"] = _integer(spec["count"], f"{where}.count", high=_MAX_COUNT)
        if out["epsilon"] == 0 and out["delta"] == 0:
            raise AuditInputError(f"{where}.epsilon", "(0, 0) is no release at all; record nothing instead")
    return out


def canonical_key(spec: dict[str, Any]) -> tuple:
    """Sort key and identity of a mechanism up to its count: equal keys compose as one self-composition.

    Composing in this order (not in the order releases arrived) makes the figure a function of the set
    of releases: concurrent writers and a sequential run get bit-identical ε.
    """
    return (spec["kind"],) + tuple((k, spec[k]) for k in sorted(spec) if k not in ("kind", "count"))


def describe_mechanism(spec: dict[str, Any]) -> str:
    kind = spec["kind"]
    times = f" × {spec['count']}" if spec.get("count", 1) != 1 else ""
    if kind == "dpsgd":
        return f"DP-SGD σ={spec['noise_multiplier']:g} q={spec['sample_rate']:g} T={spec['steps']}"
    if kind == "gaussian":
        return f"Gaussian scale {spec['scale']:g} (sensitivity {spec['sensitivity']:g}){times}"
    if kind == "laplace":
        return f"Laplace scale {spec['scale']:g} (sensitivity {spec['sensitivity']:g}){times}"
    if kind == "zcdp":
        return f"ρ-zCDP ρ={spec['rho']:g}{times}"
    return f"(ε, δ) pair ({spec['epsilon']:g}, {spec['delta']:g}){times}"
