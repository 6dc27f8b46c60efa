"""Typed single-audit results: what a kind's command returns, as a frozen dataclass, serialised once.

Each type is the one place that knows its kind's result layout: the job builds it and writes `to_json()` (the
field order of the JSON schema's `$defs/<kind>`, so results files keep their bytes), and every consumer that
reads a result back (the verdict builder, the report section, `gate`'s check of the flags) reads it through
`from_json`, which accepts whatever the schema allows (optional fields absent, extra fields ignored).
The kind registry names the type (`AuditKind.result_type`, audit/machinery/audit_kinds.py).

Here: `conformance` (both modes: a step-function trainer, `--factory`) and `accountant-check`. The bound audits
(`canary-audit`, `mechanism-audit`, `whitebox-audit`) are typed in audit/machinery/bound_results.py, on one shared
block (`EpsilonBoundTest`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = ["AccountantCheckPoint", "AccountantCheckResult", "ConformanceCheck", "ConformanceResult"]


@dataclass(frozen=True)
class ConformanceCheck:
    """One conformance check: a statistical test (or an exact comparison) of what the mechanism does against
    what its accountant was told.

    Attributes:
        check: its name (audit.conformance.opacus_objects.FACTORY_CHECKS, audit.dp_validation.conformance.CHECKS).
        passed: the test did not reject at its share of the family-wise α.
        value: what was measured (number, list or text).
        expected: what the claim implies.
        p_value: the test's p-value; None for an exact comparison.
        detail: what was compared, in words.
    """

    check: str
    passed: bool
    value: Any = None
    expected: Any = None
    p_value: float | None = None
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "passed": self.passed,
            "value": self.value,
            "expected": self.expected,
            "p_value": self.p_value,
            "detail": self.detail,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ConformanceCheck:
        return cls(
            check=str(data.get("check")),
            passed=bool(data.get("passed")),
            value=data.get("value"),
            expected=data.get("expected"),
            p_value=data.get("p_value"),
            detail=data.get("detail"),
        )


@dataclass(frozen=True)
class ConformanceResult:
    """What `privacy-audit conformance` found (kind `conformance`).

    Attributes:
        audit: what was checked, in words.
        trainer: the trainer as the user named it (`--trainer module:function`, or `--factory module:function`).
        seed: the seed of every probe.
        alpha: the family-wise false-alarm rate of the checks (Bonferroni over the statistical ones).
        checks: one row per check, in the order they ran.
        factory: `--factory` mode: the user's factory whose own Opacus objects were stepped; None for a
            step-function trainer.
        not_checked: `--factory` mode: the checks these objects cannot reach, each {"check", "why"}.
        verdict: the result's own verdict block as written ({"status", "passed", "decided_by", "reasons"});
            a recorded file holds the full verdict there instead.
    """

    audit: str
    trainer: str | None
    seed: int | None
    alpha: float | None
    checks: tuple[ConformanceCheck, ...]
    factory: str | None = None
    not_checked: tuple[Mapping[str, Any], ...] | None = None
    verdict: Mapping[str, Any] | None = None

    @classmethod
    def decided(
        cls,
        audit: str,
        *,
        trainer: str,
        seed: int,
        alpha: float,
        checks: Sequence[Mapping[str, Any]],
        factory: str | None = None,
        not_checked: Sequence[Mapping[str, Any]] | None = None,
    ) -> ConformanceResult:
        """The result of a run of the checks, with its own verdict: fail if any check failed."""
        rows = tuple(ConformanceCheck.from_json(c) for c in checks)
        failed = [c for c in rows if not c.passed]
        verdict = {
            "status": "fail" if failed else "pass",
            "passed": not failed,
            "decided_by": "built-in checks",
            "reasons": [f"{c.check} failed: {c.detail} (measured {c.value}, expected {c.expected})" for c in failed]
            or [f"all {len(rows)} checks passed (family-wise α = {alpha:g})"],
        }
        return cls(
            audit,
            trainer,
            int(seed),
            float(alpha),
            rows,
            factory=factory,
            not_checked=None if not_checked is None else tuple(not_checked),
            verdict=verdict,
        )

    @property
    def passed(self) -> bool:
        """Every check passed."""
        return all(c.passed for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        """The result as results files hold it ($defs/conformance); `--factory` mode adds `not_checked` and
        `factory` where the schema puts them."""
        plain: dict[str, Any] = {"audit": self.audit}
        if self.not_checked is not None:
            plain["not_checked"] = [dict(row) for row in self.not_checked]
        plain["trainer"] = self.trainer
        if self.factory is not None:
            plain["factory"] = self.factory
        plain.update(
            seed=self.seed,
            alpha=self.alpha,
            checks=[c.to_json() for c in self.checks],
            passed=self.passed,
            violation=not self.passed,
        )
        if self.verdict is not None:
            plain["verdict"] = dict(self.verdict)
        return plain

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ConformanceResult:
        """A conformance result read back (a results file, a re-rendered report): what the schema requires
        (`checks`, `alpha`) and what it allows; rows that are not objects are skipped (the schema refuses them
        where `gate` validates first)."""
        not_checked = data.get("not_checked")
        return cls(
            audit=str(data.get("audit", "")),
            trainer=data.get("trainer"),
            seed=data.get("seed"),
            alpha=data.get("alpha"),
            checks=tuple(ConformanceCheck.from_json(c) for c in data.get("checks") or [] if isinstance(c, Mapping)),
            factory=data.get("factory"),
            not_checked=tuple(not_checked) if isinstance(not_checked, list) else None,
            verdict=data.get("verdict") if isinstance(data.get("verdict"), Mapping) else None,
        )


ACCOUNTANT_LABELS = ("ok", "loose", "unsound", "invalid")


@dataclass(frozen=True)
class AccountantCheckPoint:
    """One grid point of an accountant check: the user's ε against the tight PLD interval of the same σ, q, T, δ.

    Attributes:
        noise_multiplier, sample_rate, steps, delta: the DP-SGD parameters asked about.
        reported: the accountant's ε; None when it gave none (label invalid, or loose for an infinite ε).
        pld_lower, pld_upper: dp_accounting's optimistic and pessimistic PLD ε (the true ε lies between).
        label: ok | loose | unsound (below the lower end) | invalid (raised or returned a non-number).
        message: the comparison in words.
        pld_tight: False when the time budget ended the PLD refinement (`pld_note` says how wide).
        pld_discretization: the PLD's last discretisation interval.
        pld_note: how tight the reference is, in words.
    """

    noise_multiplier: float
    sample_rate: float
    steps: int
    delta: float
    reported: float | None
    pld_lower: float
    pld_upper: float
    label: str  # ok | loose | unsound | invalid
    message: str
    pld_tight: bool = True  # False: the time budget ended the refinement; `pld_note` says how wide
    pld_discretization: float | None = None
    pld_note: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AccountantCheckPoint:
        """A point read back: the schema's required fields, the optional ones where present."""
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        values.setdefault("message", "")
        return cls(**values)


@dataclass(frozen=True)
class AccountantCheckResult:
    """What `privacy-audit accountant-check` found (kind `accountant-check`).

    Attributes:
        accountant: the accountant as the user named it (`module:function`, or a function's qualified name).
        margin: how far above the pessimistic PLD ε a reported ε is called loose (a fraction).
        points: one per grid point, in grid order.
    """

    accountant: str | None
    margin: float
    points: tuple[AccountantCheckPoint, ...]

    @property
    def counts(self) -> dict[str, int]:
        """How many points carry each label."""
        return {label: sum(p.label == label for p in self.points) for label in ACCOUNTANT_LABELS}

    @property
    def passed(self) -> bool:
        """No point unsound or invalid."""
        return not any(p.label in ("unsound", "invalid") for p in self.points)

    def to_json(self) -> dict[str, Any]:
        """The result as results files hold it ($defs/accountant-check), before recording adds the verdict."""
        from audit.statistics.accountants import PLD_RELATIVE_TOLERANCE

        return {
            "accountant": self.accountant,
            "margin": self.margin,
            "counts": self.counts,
            "passed": self.passed,
            "reference": f"dp_accounting PLD interval refined until upper − lower ≤ {PLD_RELATIVE_TOLERANCE:.0%} of ε",
            "reference_not_tight": sum(not p.pld_tight for p in self.points),
            "points": [p.to_json() for p in self.points],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AccountantCheckResult:
        """An accountant check read back (a results file, a re-rendered report); points that are not objects are
        skipped (the schema refuses them where `gate` validates first)."""
        points = data.get("points") or []
        return cls(
            accountant=data.get("accountant"),
            margin=data.get("margin"),  # type: ignore[arg-type]  # required by the schema; shown as found
            points=tuple(AccountantCheckPoint.from_json(p) for p in points if isinstance(p, Mapping)),
        )
