"""The privacy claim under audit: (ε, δ) from flags, or a `CLAIM` declared beside the user's code.

A claim is either {epsilon, delta} or a DP-SGD configuration {noise_multiplier, sample_rate, steps,
delta}, whose ε is the tight PLD accountant's. Shared by the canary and mechanism audits.

Validated once, at the boundary: `check_stated_claim` (the explicit ε / δ a caller passed, before any
user code runs) and `claim_from_declaration` (the declared CLAIM, read in a worker) build one frozen
`PrivacyClaim`; the audits below take it as it is (`claim=`) and never check it again. Errors name the
library parameter (`claimed_epsilon`, `delta`) or the place of the CLAIM; the commands show the flag
(`audit/cli/parameter_flags.py`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from audit.errors import AuditInputError
from audit.statistics.accountants import DPSGDEvent, epsilon_pld

__all__ = [
    "PrivacyClaim",
    "check_stated_claim",
    "claim_from_declaration",
    "declared_claim",
    "require_claim",
    "resolve_claim",
    "validate_claim",
]

# Where an explicit claim came from, as results.json has always recorded it.
STATED_SOURCE = "--claimed-epsilon/--delta"


def validate_claim(
    claimed_epsilon, delta, *, epsilon_flag: str = "claimed_epsilon", delta_flag: str = "delta"
) -> tuple[float, float]:
    """(ε, δ) as floats; ε must be finite and > 0, δ in [0, 1). AuditInputError otherwise, naming
    `epsilon_flag` / `delta_flag` (a parameter, or the place of a declared CLAIM).

    Strict types (a CLAIM is input like any other): "4.5" and True are not numbers."""
    return _check_epsilon(claimed_epsilon, epsilon_flag), _check_delta(delta, delta_flag)


def _check_epsilon(value: Any, where: str) -> float:
    from audit.machinery.input_files import check_finite, shorten

    eps = check_finite(value, where)
    if not eps > 0:
        raise AuditInputError(where, f"must be a finite number > 0, got {shorten(value, 40)}")
    return eps


def _check_delta(value: Any, where: str) -> float:
    from audit.machinery.input_files import check_finite, shorten

    d = check_finite(value, where)
    if not (0 <= d < 1):
        raise AuditInputError(where, f"must be in [0, 1), got {shorten(value, 40)}")
    return d


def check_stated_claim(claimed_epsilon: Any, delta: Any) -> tuple[float | None, float | None]:
    """The explicit parts of a claim a caller passed, as checked floats (None where not passed).

    Called once at a library boundary, before any user code runs; `claim_from_declaration` then
    combines them with the declared CLAIM without checking them again."""
    return (
        None if claimed_epsilon is None else _check_epsilon(claimed_epsilon, "claimed_epsilon"),
        None if delta is None else _check_delta(delta, "delta"),
    )


@dataclass(frozen=True)
class PrivacyClaim:
    """The (ε, δ) the training code claims, and where it came from.

    When the claim is a DP-SGD configuration (σ, q, T), ε is the PLD accountant's (the tight
    reference, `audit.statistics.accountants.epsilon_pld`) and the Dirac audit can be run on it.

    Attributes:
        epsilon: the claimed ε (> 0; inf for no claim).
        delta: the claimed δ, in [0, 1).
        source: where the claim came from (a flag, a file, the accountant of (σ, q, T)).
        noise_multiplier, sample_rate, steps: the DP-SGD configuration (σ, q, T) when the claim is one,
            else None.
    """

    epsilon: float
    delta: float
    source: str
    noise_multiplier: float | None = None
    sample_rate: float | None = None
    steps: int | None = None

    @classmethod
    def stated(cls, epsilon: Any, delta: Any) -> PrivacyClaim:
        """A claim of (`epsilon`, `delta`) as a caller states it, checked here (errors name
        `claimed_epsilon` and `delta`): the form the audit functions take as `claim=`."""
        eps, d = check_stated_claim(epsilon, delta)
        if eps is None or d is None:
            raise AuditInputError("claimed_epsilon" if eps is None else "delta", "required for a stated claim")
        return cls(eps, d, STATED_SOURCE)

    @property
    def is_dpsgd(self) -> bool:
        return self.noise_multiplier is not None

    @property
    def dpsgd(self) -> tuple[float, float, int] | None:
        """(σ, q, T) when the claim is a DP-SGD configuration (its whole privacy profile is known), else None."""
        if self.noise_multiplier is None or self.sample_rate is None or self.steps is None:
            return None
        return float(self.noise_multiplier), float(self.sample_rate), int(self.steps)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def require_claim(claim: Any) -> PrivacyClaim:
    """`claim` when it is a `PrivacyClaim` (built, and checked, at the boundary): the audits take it as it
    is. Anything else is refused, so that no bare number slips past the one check."""
    if not isinstance(claim, PrivacyClaim):
        raise AuditInputError(
            "claim",
            f"expected a PrivacyClaim (PrivacyClaim.stated(epsilon, delta) or resolve_claim(...)), "
            f"got {type(claim).__name__}",
        )
    return claim


def _claim_from_dict(claim: Any, where: str, delta_override: float | None) -> PrivacyClaim:
    if not isinstance(claim, dict):
        raise AuditInputError(where, f"expected a dict, got {type(claim).__name__}")
    keys = set(claim)
    dpsgd_keys = {"noise_multiplier", "sample_rate", "steps", "delta"}
    if keys == dpsgd_keys:
        from audit.machinery.input_files import check_number

        # Validated like any input: "4.5" is not a number, True is not 1, 20.9 is not a step count.
        sigma = check_number(claim["noise_multiplier"], f"{where}['noise_multiplier']", low=0, low_open=True, high=1e6)
        q = check_number(claim["sample_rate"], f"{where}['sample_rate']", low=0, low_open=True, high=1)
        steps = claim["steps"]
        if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 10**7:
            raise AuditInputError(f"{where}['steps']", f"expected an integer in [1, 10⁷], got {steps!r}"[:200])
        # An override was checked at the boundary (`check_stated_claim`); the declared δ is checked here.
        d = _check_delta(claim["delta"], where) if delta_override is None else delta_override
        if d == 0:
            raise AuditInputError(where, "delta must be > 0 for a Gaussian-noise (DP-SGD) claim")
        eps = epsilon_pld(DPSGDEvent(sigma, q, steps), d)
        return PrivacyClaim(eps, d, f"{where} (ε from the PLD accountant)", sigma, q, steps)
    if keys == {"epsilon", "delta"}:
        eps, d = validate_claim(claim["epsilon"], claim["delta"], epsilon_flag=where, delta_flag=where)
        if delta_override is not None and float(delta_override) != d:
            raise AuditInputError(
                "delta", f"{where} states ε = {eps} at δ = {d}; to audit at another δ pass --claimed-epsilon too"
            )
        return PrivacyClaim(eps, d, where)
    raise AuditInputError(
        where,
        f"expected keys {{epsilon, delta}} or {{noise_multiplier, sample_rate, steps, delta}}, got {sorted(keys)}",
    )


def declared_claim(trainer: Callable) -> tuple[Any, str]:
    """(the trainer's CLAIM or None, where it was found): an attribute of the function, else of its
    module. Called in the worker that loaded the trainer (the parent never imports user code)."""
    declared = getattr(trainer, "CLAIM", None)
    where = f"{getattr(trainer, '__qualname__', 'trainer')}.CLAIM"
    if declared is None:
        module = sys.modules.get(getattr(trainer, "__module__", "") or "")
        declared = getattr(module, "CLAIM", None)
        where = f"CLAIM in module '{getattr(module, '__name__', '?')}'"
    return declared, where


def claim_from_declaration(
    declared: Any, where: str | None, *, claimed_epsilon: float | None = None, delta: float | None = None
) -> PrivacyClaim:
    """The claim to audit: explicit `claimed_epsilon` (+ `delta`) first, else the `declared` CLAIM
    (found at `where`). AuditInputError when there is none.

    `claimed_epsilon` and `delta` are the floats `check_stated_claim` returned at the boundary: they
    are not checked again; what the declaration adds is checked here, once."""
    if claimed_epsilon is not None:
        if delta is None:
            if isinstance(declared, dict) and "delta" in declared:
                delta = _check_delta(declared["delta"], "delta")
            else:
                raise AuditInputError(
                    "delta", "required with --claimed-epsilon (the trainer declares no CLAIM with a delta)"
                )
        return PrivacyClaim(claimed_epsilon, delta, STATED_SOURCE)
    if declared is None:
        raise AuditInputError(
            "claimed_epsilon",
            "no privacy claim to audit: pass --claimed-epsilon and --delta, or define CLAIM = "
            "{'epsilon': ..., 'delta': ...} (or noise_multiplier, sample_rate, steps, delta) in the trainer's module",
        )
    return _claim_from_dict(declared, where or "CLAIM", delta)


def resolve_claim(
    trainer: Callable | None = None, *, claimed_epsilon: float | None = None, delta: float | None = None
) -> PrivacyClaim:
    """The claim to audit: explicit `claimed_epsilon` (+ `delta`) first, else the trainer's CLAIM
    (an attribute of the function, else of its module). AuditInputError when there is none.

    The boundary for a caller in this process: the explicit parts are checked here, once."""
    eps, d = check_stated_claim(claimed_epsilon, delta)
    declared, where = declared_claim(trainer) if trainer is not None else (None, None)
    return claim_from_declaration(declared, where, claimed_epsilon=eps, delta=d)
