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
import logging
import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from audit.statistics.accountants import PLD_DISCRETIZATION, DPSGDEvent, epsilon_pld
from audit.errors import AuditInputError

DEFAULT_MARGIN = 0.10


class AccountantGrid(BaseModel):
    """The parameter grid; the default spans typical DP-SGD settings (ε from ~0.1 to ~20)."""

    model_config = ConfigDict(extra="forbid")
    noise_multipliers: list[float] = Field(default_factory=lambda: [0.8, 1.0, 2.0], min_length=1)
    sample_rates: list[float] = Field(default_factory=lambda: [0.004, 0.01, 0.05], min_length=1)
    steps: list[int] = Field(default_factory=lambda: [100, 1000, 4000], min_length=1)
    deltas: list[float] = Field(default_factory=lambda: [1e-5], min_length=1)

    def points(self) -> list[tuple[float, float, int, float]]:
        return list(itertools.product(self.noise_multipliers, self.sample_rates, self.steps, self.deltas))


def validate_dpsgd_parameters(noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> None:
    if not noise_multiplier > 0:
        raise AuditInputError("--noise-multiplier", f"must be > 0, got {noise_multiplier}")
    if not 0 < sample_rate <= 1:
        raise AuditInputError("--sample-rate", f"must be in (0, 1], got {sample_rate}")
    if steps < 1:
        raise AuditInputError("--steps", f"must be ≥ 1, got {steps}")
    if not 0 < delta < 1:
        raise AuditInputError("--delta", f"must be in (0, 1), got {delta}")


def load_grid(path: str | None) -> AccountantGrid:
    if path is None:
        return AccountantGrid()
    from audit.machinery.config import read_config_file

    try:
        grid = AccountantGrid.model_validate(read_config_file(path))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(map(str, first["loc"]))
        raise AuditInputError(f"grid file '{path}': field '{field}'", first["msg"]) from None
    for sigma, q, steps, delta in grid.points():
        try:
            validate_dpsgd_parameters(sigma, q, steps, delta)
        except AuditInputError as exc:
            raise AuditInputError(f"grid file '{path}'", f"{exc.where.lstrip('-')} {exc.message}") from None
    return grid


def pld_epsilon_interval(event: DPSGDEvent, delta: float) -> tuple[float, float]:
    """(optimistic, pessimistic) PLD ε: the true ε of the mechanism lies in between."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    logging.getLogger().setLevel(logging.ERROR)  # dp_accounting logs a notice for optimistic PLDs
    optimistic = pld.from_gaussian_mechanism(
        event.noise_multiplier, sampling_prob=event.sample_rate, pessimistic_estimate=False,
        value_discretization_interval=PLD_DISCRETIZATION, use_connect_dots=False,
    ).self_compose(event.steps)
    return float(optimistic.get_epsilon_for_delta(delta)), epsilon_pld(event, delta)


@dataclass(frozen=True)
class AccountantCheckPoint:
    noise_multiplier: float
    sample_rate: float
    steps: int
    delta: float
    reported: float | None
    pld_lower: float
    pld_upper: float
    label: str  # ok | loose | unsound | invalid
    message: str


def classify(reported: object, lower: float, upper: float, margin: float) -> tuple[str, str, float | None]:
    """Label one reported ε against the PLD interval [lower, upper]."""
    if isinstance(reported, bool) or not isinstance(reported, numbers.Real):
        return "invalid", f"returned {type(reported).__name__} {reported!r}, expected a float", None
    value = float(reported)
    if math.isnan(value):
        return "invalid", "returned NaN", None
    if value < 0:
        return "invalid", f"returned a negative ε ({value})", value
    if value < lower:
        return "unsound", f"ε {value:.4g} is below the PLD lower value {lower:.4g}: claims more privacy than the mechanism gives", value
    if value > (1 + margin) * upper:
        return "loose", f"ε {value:.4g} is more than {margin:.0%} above the PLD value {upper:.4g}", value
    return "ok", f"ε {value:.4g} within [{lower:.4g}, {(1 + margin) * upper:.4g}]", value


def check_accountant(
    accountant: Callable[[float, float, int, float], float],
    grid: AccountantGrid,
    margin: float = DEFAULT_MARGIN,
) -> list[AccountantCheckPoint]:
    """Evaluate `accountant(noise_multiplier, sample_rate, steps, delta) -> ε` on every grid point."""
    points = []
    for sigma, q, steps, delta in grid.points():
        event = DPSGDEvent(sigma, q, steps)
        lower, upper = pld_epsilon_interval(event, delta)
        try:
            reported = accountant(sigma, q, steps, delta)
        except Exception as exc:  # the accountant under test failing is a finding, not a crash
            label, message, value = "invalid", f"raised {type(exc).__name__}: {exc}", None
        else:
            label, message, value = classify(reported, lower, upper, margin)
        points.append(AccountantCheckPoint(sigma, q, steps, delta, value, lower, upper, label, message))
    return points


def summarize(points: Sequence[AccountantCheckPoint]) -> dict:
    counts = {label: sum(p.label == label for p in points) for label in ("ok", "loose", "unsound", "invalid")}
    return {"counts": counts, "passed": counts["unsound"] == 0 and counts["invalid"] == 0,
            "points": [asdict(p) for p in points]}


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
