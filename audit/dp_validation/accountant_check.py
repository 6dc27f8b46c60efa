"""Cross-checking an accountant against the tight PLD reference on a grid of DP-SGD parameters.

For each (σ, q, T, δ) the reference is the PLD accountant of `dp_accounting` (Doroshenko et al.
2022, arXiv 2207.04380) computed twice: a pessimistic estimate (an upper bound on the true ε) and
an optimistic one (a lower bound). The true ε of the Poisson-subsampled Gaussian mechanism lies
between them, so a reported ε below the optimistic value is certainly too small:

* `unsound`  reported ε < optimistic PLD ε (claims more privacy than the mechanism gives);
* `loose`    reported ε > (1 + margin) × pessimistic PLD ε (safe but wastes budget);
* `ok`       in between;
* `invalid`  the accountant raised, or returned a non-number, NaN, or a negative value.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from audit.errors import AuditInputError
from audit.machinery.audit_results import AccountantCheckPoint
from audit.machinery.progress import Progress, as_progress
from audit.statistics.accountants import (
    PLD_RELATIVE_TOLERANCE,
    PLD_TIME_BUDGET_S,
    DPSGDEvent,
    PLDInterval,
)
from audit.statistics.accountants import pld_epsilon_interval as tight_pld_interval

DEFAULT_MARGIN = 0.10


class AccountantGrid(BaseModel):
    """The parameter grid; the default spans typical DP-SGD settings (ε from ~0.1 to ~20)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    noise_multipliers: list[float] = Field(default_factory=lambda: [0.8, 1.0, 2.0], min_length=1, max_length=20)
    sample_rates: list[float] = Field(default_factory=lambda: [0.004, 0.01, 0.05], min_length=1, max_length=20)
    steps: list[int] = Field(default_factory=lambda: [100, 1000, 4000], min_length=1, max_length=20)
    deltas: list[float] = Field(default_factory=lambda: [1e-5], min_length=1, max_length=10)

    def points(self) -> list[tuple[float, float, int, float]]:
        return list(itertools.product(self.noise_multipliers, self.sample_rates, self.steps, self.deltas))


# Ranges of the DP-SGD parameters the accountants are asked about, with the reason for each bound.
NOISE_MULTIPLIER_RANGE = (0.1, 1000.0)  # below 0.1 ε is astronomically large and PLD discretisation never ends
MAX_STEPS = 10_000_000  # beyond this the PRV/PLD compositions take hours
DELTA_RANGE = (1e-10, 0.1)  # below 1e-10 the accountants lose precision; above 0.1 is no guarantee


def validate_dpsgd_parameters(noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> None:
    from audit.machinery.input_files import check_number

    check_number(
        noise_multiplier,
        "noise_multiplier",
        low=NOISE_MULTIPLIER_RANGE[0],
        high=NOISE_MULTIPLIER_RANGE[1],
        why="outside it the accountants do not converge in reasonable time",
    )
    check_number(sample_rate, "sample_rate", low=0, low_open=True, high=1)
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise AuditInputError("steps", f"must be an integer in [1, {MAX_STEPS:,}], got {str(steps)[:40]}")
    check_number(
        delta,
        "delta",
        low=DELTA_RANGE[0],
        high=DELTA_RANGE[1],
        why="smaller δ is beyond the accountants' precision; larger δ is no guarantee",
    )


def load_grid(path: str | None) -> AccountantGrid:
    if path is None:
        return AccountantGrid()
    from audit.machinery.input_files import clip, load_yaml_file

    content = load_yaml_file(path, f"grid file '{path}'")
    if not isinstance(content, dict):
        raise AuditInputError(
            f"grid file '{path}'", "must be a YAML mapping with noise_multipliers, sample_rates, steps, deltas"
        )
    try:
        grid = AccountantGrid.model_validate(content)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = clip(".".join(map(str, first["loc"])), 80)
        raise AuditInputError(f"grid file '{path}': field '{field}'", clip(first["msg"])) from None
    for sigma, q, steps, delta in grid.points():
        try:
            validate_dpsgd_parameters(sigma, q, steps, delta)
        except AuditInputError as exc:
            raise AuditInputError(f"grid file '{path}'", f"{exc.where.lstrip('-')} {exc.message}") from None
    return grid


def pld_epsilon_interval(event: DPSGDEvent, delta: float, time_budget_s: float = PLD_TIME_BUDGET_S) -> PLDInterval:
    """(optimistic, pessimistic) PLD ε refined until tight: the true ε of the mechanism lies in between."""
    return tight_pld_interval(event, delta, PLD_RELATIVE_TOLERANCE, time_budget_s)


def accountant_table(
    noise_multiplier: float, sample_rate: float, steps: int, delta: float
) -> tuple[dict[str, float], dict]:
    """Worker task of `privacy-audit accountants`: Opacus's rdp/prv/gdp ε and the tight PLD interval (plain data)."""
    from audit.statistics.accountants import epsilon_opacus

    event = DPSGDEvent(noise_multiplier, sample_rate, steps)
    try:
        values = {name: float(epsilon_opacus(event, delta, name)) for name in ("rdp", "prv", "gdp")}
        return values, pld_epsilon_interval(event, delta).as_dict()
    except MemoryError as exc:
        # Inside the flags' ranges, Opacus's PRV discretisation (or the PLD grid) can ask for petabytes (e.g.
        # σ 0.1, q 1, 10⁷ steps): the parameters are beyond what can be computed, not a bug of the harness.
        raise AuditInputError(
            "--steps",
            f"ε cannot be computed here for σ {noise_multiplier:g}, q {sample_rate:g} over {steps} steps: "
            f"the accountant ran out of memory ({str(exc)[:80]}); fewer steps or a larger σ",
        ) from None


@dataclass(frozen=True)
class NotANumber:
    """What an isolated accountant returned when it was not a real number (type name and a short repr)."""

    type_name: str
    text: str


class AccountantRaised(Exception):
    """The isolated accountant raised: a finding about the accountant ('invalid'), not a crash."""


def classify(reported: object, lower: float, upper: float, margin: float) -> tuple[str, str, float | None]:
    """Label one reported ε against the PLD interval [lower, upper]."""
    if isinstance(reported, NotANumber):
        return "invalid", f"returned {reported.type_name} {reported.text}, expected a float", None
    if isinstance(reported, bool) or not isinstance(reported, numbers.Real):
        return "invalid", f"returned {type(reported).__name__} {str(reported)[:80]!r}, expected a float", None
    value = float(reported)
    if math.isnan(value):
        return "invalid", "returned NaN", None
    if value == math.inf:  # sound but vacuous; recorded as None because JSON has no infinity
        return "loose", "returned inf: sound, but it claims no privacy at all", None
    if value < 0:
        return "invalid", f"returned a negative ε ({value})", value if math.isfinite(value) else None
    if value < lower:
        return (
            "unsound",
            f"ε {value:.4g} is below the PLD lower value {lower:.4g}: claims more privacy than the mechanism gives",
            value,
        )
    if value > (1 + margin) * upper:
        return "loose", f"ε {value:.4g} is more than {margin:.0%} above the PLD value {upper:.4g}", value
    return "ok", f"ε {value:.4g} within [{lower:.4g}, {(1 + margin) * upper:.4g}]", value


def check_accountant(
    accountant: Callable[[float, float, int, float], float],
    grid: AccountantGrid,
    margin: float = DEFAULT_MARGIN,
    progress: Progress | None = None,
    time_budget_s: float = PLD_TIME_BUDGET_S,
) -> list[AccountantCheckPoint]:
    """Evaluate `accountant(noise_multiplier, sample_rate, steps, delta) -> ε` on every grid point.

    The reference interval is refined per point until it is within 1 % of ε (or `time_budget_s`
    per point is spent; the point then carries `pld_tight = False` and a note).
    """
    points = []
    grid_points = list(grid.points())
    progress = as_progress(progress)
    step = progress.begin("grid points: tight PLD ε and your accountant's", total=len(grid_points))
    for sigma, q, steps, delta in grid_points:
        event = DPSGDEvent(sigma, q, steps)
        failed: tuple[str, str, float | None] | None  # (label, message, value) when the accountant raised
        try:
            # The accountant first: a module that cannot be imported, exits or hangs fails fast.
            reported = accountant(sigma, q, steps, delta)
        except AuditInputError:  # a timeout, sys.exit or a dead worker: exit 2 naming the accountant
            raise
        except AccountantRaised as exc:
            failed = ("invalid", f"raised {exc}", None)
        except Exception as exc:  # the accountant under test failing is a finding, not a crash
            failed = ("invalid", f"raised {type(exc).__name__}: {str(exc)[:200]}", None)
        else:
            failed = None
        reference = pld_epsilon_interval(event, delta, time_budget_s)
        lower, upper = reference.lower, reference.upper
        label, message, value = failed if failed is not None else classify(reported, lower, upper, margin)
        points.append(
            AccountantCheckPoint(
                sigma,
                q,
                steps,
                delta,
                value,
                lower,
                upper,
                label,
                message,
                reference.tight,
                reference.discretization,
                reference.note,
            )
        )
        step.advance()
    progress.end(step)
    return points


# --------------------------------------------------------------------------------------------------
# The user's accountant, run in an isolated worker
# --------------------------------------------------------------------------------------------------

DEFAULT_ACCOUNTANT_TIMEOUT = 30.0  # seconds per call; an accountant is arithmetic, not training


def reported_epsilon_task(spec: str, noise_multiplier: float, sample_rate: float, steps: int, delta: float):
    """Worker task: import the user's accountant (in the child), call it once, return plain data.

    Returns the float, a `NotANumber`, or ("raised", text) — exceptions of the accountant are a
    finding ('invalid'); `sys.exit` in it or in its module is bad input (exit 2), via `user_code`.
    """
    from audit.machinery.user_code import load_user_function
    from audit.machinery.workers import UserCodeError, user_code

    name = f"--accountant {spec}"
    with user_code(name, "module"):
        function = load_user_function(spec, "accountant")
    try:
        value = function(noise_multiplier, sample_rate, steps, delta)
    except SystemExit as exc:
        raise UserCodeError(name, f"the accountant called sys.exit({exc.code!r}) instead of returning") from None
    except Exception as exc:  # noqa: BLE001 - reported as 'invalid' for this grid point
        return ("raised", f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        text = repr(value) if isinstance(value, (str, bytes, type(None))) else f"<{type(value).__name__}>"
        return NotANumber(type(value).__name__, text[:80])
    return float(value)


class IsolatedAccountant:
    """`accountant(σ, q, T, δ)` calls of the user's `module:function` in one worker process, each with
    a timeout. The parent never imports the user's module. Use as a context manager."""

    def __init__(self, spec: str, timeout: float = DEFAULT_ACCOUNTANT_TIMEOUT):
        from audit.machinery.workers import WorkerPool

        self.spec = spec
        self.pool = WorkerPool(1, name=f"--accountant {spec}", timeout=timeout, what="accountant")

    def __enter__(self) -> IsolatedAccountant:
        return self

    def __exit__(self, *exc_info) -> None:
        self.pool.close()

    def __call__(self, noise_multiplier: float, sample_rate: float, steps: int, delta: float):
        result = self.pool.map(reported_epsilon_task, [(self.spec, noise_multiplier, sample_rate, steps, delta)])[0]
        if isinstance(result, tuple) and result and result[0] == "raised":
            raise AccountantRaised(result[1])
        return result


# Opacus's own accountants, exposed in the user-function signature so they can be checked the same way
# (`--accountant audit.dp_validation.accountant_check:opacus_gdp`).
def _opacus(name: str) -> Callable[[float, float, int, float], float]:
    def accountant(noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> float:
        from audit.statistics.accountants import epsilon_opacus

        return epsilon_opacus(DPSGDEvent(noise_multiplier, sample_rate, steps), delta, name)

    accountant.__name__ = f"opacus_{name}"
    return accountant


opacus_prv = _opacus("prv")
opacus_rdp = _opacus("rdp")
opacus_gdp = _opacus("gdp")
