"""The arguments the white-box audits share (`whitebox-audit --mode runs` and `--mode one-run`), checked
once here: the subject (a factory or the harness's DP-SGD), the observation, δ, the confidence, a claimed ε,
σ, q, T and C. Errors name the function's parameters; `audit/cli/parameter_flags.py` maps them to flags.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from audit.dp_validation.claims import PrivacyClaim, validate_claim
from audit.errors import AuditInputError

OBSERVATIONS = ("all", "final")


def _check_positive(value, flag: str, *, integer: bool = False, low: float = 0.0, high: float = math.inf):
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if integer:
        ok = ok and float(value).is_integer()
    if not ok or not (low < value <= high):
        kind = "an integer" if integer else "a finite number"
        raise AuditInputError(flag, f"expected {kind} in ({low:g}, {high:g}], got {value!r}")
    return int(value) if integer else float(value)


def builtin_device(device: str | None, builtin: bool) -> str | None:
    """The device `--builtin` trains on ("cpu", "cuda", ...; None for a factory, which places its own
    model): `--device` auto | cpu | cuda as `run --device`, CUDA without a GPU a bad input."""
    if not builtin:
        if device not in (None, "auto"):
            raise AuditInputError("device", "applies to --builtin only; your --factory places its own model and data")
        return None
    from targets.devices import resolve_device

    return str(resolve_device("auto" if device is None else device))


@dataclass(frozen=True)
class WhiteboxArguments:
    """What both white-box modes need checked before anything trains. `claim`: the (ε, δ) given by
    `claimed_epsilon`, validated once (None: the accountant's ε is the claim, read after training)."""

    device: str | None
    delta: float
    confidence: float
    claim: PrivacyClaim | None


def check_whitebox_arguments(
    *,
    factory: str | None,
    builtin: bool,
    observe: str,
    delta,
    confidence,
    claimed_epsilon,
    canary_scale,
    min_canary_scale: float,
    device: str | None,
) -> WhiteboxArguments:
    """The subject (exactly one of `factory` and `builtin`), `observe`, δ in (0, 1) (Gaussian noise is
    not (ε, 0)-DP), the confidence in [0.5, 1), the claimed ε when given, the canary's scale and the device.
    AuditInputError naming the parameter otherwise."""
    if (factory is None) == (not builtin):
        raise AuditInputError("factory", "give either --factory module:function or --builtin")
    if observe not in OBSERVATIONS:
        raise AuditInputError("observe", f"expected one of {', '.join(OBSERVATIONS)}, got {observe!r}")
    if not (isinstance(delta, (int, float)) and 0 < delta < 1):
        raise AuditInputError("delta", f"must be in (0, 1) (Gaussian noise is not (ε, 0)-DP), got {delta!r}")
    if not (isinstance(confidence, (int, float)) and 0.5 <= confidence < 1):
        raise AuditInputError("confidence", f"must be in [0.5, 1), got {confidence!r}")
    claim = None
    if claimed_epsilon is not None:
        epsilon, checked_delta = validate_claim(claimed_epsilon, delta)
        claim = PrivacyClaim(epsilon, checked_delta, "--claimed-epsilon")
    _check_positive(canary_scale, "canary_scale", low=min_canary_scale, high=1e9)
    return WhiteboxArguments(builtin_device(device, builtin), float(delta), float(confidence), claim)


def check_builtin_dpsgd(noise_multiplier, sample_rate, steps, max_grad_norm) -> tuple[float, float, int, float]:
    """(σ, q, T, C) of the harness's DP-SGD that `--builtin` audits, each checked."""
    if noise_multiplier is None:
        raise AuditInputError("noise_multiplier", "--builtin needs the noise multiplier σ of the DP-SGD to audit")
    return (
        _check_positive(noise_multiplier, "noise_multiplier", high=1e6),
        _check_positive(sample_rate, "sample_rate", high=1.0),
        _check_positive(steps, "steps", integer=True, high=100_000),
        _check_positive(max_grad_norm, "max_grad_norm", high=1e6),
    )
