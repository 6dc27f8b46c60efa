"""Typed results of the audits that test a claimed ε with an empirical ε lower bound: `canary-audit`,
`mechanism-audit`, `whitebox-audit` (both modes), and any plug-in kind with the same block.

`EpsilonBoundTest` is the block they share: the claimed (ε, δ), the confidence, the empirical ε lower bound,
the ceiling a perfect attack could reach, the power of the mode against the claim, the sequential looks, the
runs a test would need, the violation flag and the audit's own verdict. `BoundAuditResult` holds that block,
the kind's typed identity fields (`CanaryAuditResult`, `MechanismAuditResult`, `WhiteboxAuditResult`), and the
mode's own figures (the error counts, scores, seeds, settings: shown as found, decided on nowhere but in the
job that computed them) in `figures`.

A result keeps its file's field order (`layout`): the modes interleave the block with their figures, and
results files keep their bytes (`from_json(d).to_json() == d`, key order included; tests/test_typed_results.py).
The job serialises once (`to_json`); the verdict builders, report sections, `gate`'s flag checks and the
ledger's sources read the typed fields back through `from_json`, which accepts whatever a file holds (a field
of the wrong type reads as absent where a consumer guards it, as the dict readers did).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, TypeVar

__all__ = [
    "BOUND_FIELDS",
    "BoundAuditResult",
    "CanaryAuditResult",
    "EpsilonBoundTest",
    "MechanismAuditResult",
    "WhiteboxAuditResult",
    "read_bound_result",
]

_Result = TypeVar("_Result", bound="BoundAuditResult")


def _mapping(value: Any) -> Mapping[str, Any]:
    """`value` where it is an object, else an empty one (a hand-edited file may hold anything)."""
    return value if isinstance(value, Mapping) else {}


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class EpsilonBoundTest:
    """The block every bound audit writes: one claim tested against one empirical ε lower bound.

    Values are kept as the file holds them (an integer stays an integer: the bytes are the contract).

    Attributes:
        claimed_epsilon, delta: the claim under test.
        confidence: the family-wise confidence of the test (over the sequential looks where there were several).
        epsilon_lower_bound: the empirical ε lower bound at `delta` (sound for the mode's assumption).
        ceiling: the largest bound a perfect attack could reach with this audit's size; at or below the claim
            the claim is untestable here. None where the audit writes none at the top (the own verdict may).
        violation: the bound (or the audit's deciding checks) refuted the claim.
        power: the mode's power against the claim (audit.dp_validation.mode_power: proven, measured, control,
            none), as {"kind", "figure", "detail", "decider"}.
        sequential: the group-sequential looks (declared design, the look that stopped, the size used).
        needed, needed_unit: how many runs (or canaries, trials) would make the claim testable, and their unit.
        status, status_reason: a plug-in's own status word and its reason (the shipped kinds write neither).
        profile_test: the canary profile mode's exact test against the claim's whole trade-off curve.
        verdict: the audit's own verdict block (status, reasons, ceiling, needed, claim_status, checks); a
            recorded file holds the full verdict there instead.
    """

    claimed_epsilon: float | None = None
    delta: float | None = None
    confidence: float | None = None
    epsilon_lower_bound: float | None = None
    ceiling: float | None = None
    violation: bool | None = None
    power: Mapping[str, Any] | None = None
    sequential: Mapping[str, Any] | None = None
    needed: int | None = None
    needed_unit: str | None = None
    status: str | None = None
    status_reason: str | None = None
    profile_test: Mapping[str, Any] | None = None
    verdict: Mapping[str, Any] | None = None

    @property
    def own(self) -> Mapping[str, Any]:
        """The audit's own verdict block ({} where the result holds none, or not an object)."""
        return _mapping(self.verdict)

    @property
    def claim_not_refuted(self) -> bool:
        """The audit's own verdict says its mode ran without power against the claim: "not refuted"."""
        own = self.own
        return own.get("claim_status") == "not_refuted" or any(
            isinstance(c, Mapping) and c.get("status") == "not_refuted" for c in own.get("claims") or []
        )

    @property
    def declared_power(self) -> dict[str, Any] | None:
        """The power the audit declared (a copy), None where it declares none."""
        return dict(self.power) if isinstance(self.power, Mapping) and self.power.get("kind") else None

    @property
    def tests_profile(self) -> bool:
        """The claim is tested against its whole trade-off curve (profile mode), not one (ε, δ) point."""
        return isinstance(self.profile_test, Mapping)

    @property
    def looks(self) -> list[Any] | None:
        """The sequential design's looks, None for a fixed-size audit."""
        looks = _mapping(self.sequential).get("looks")
        return looks if isinstance(looks, list) else None

    @property
    def spending(self) -> Any:
        """The sequential design's α spending (None for a fixed-size audit)."""
        return _mapping(self.sequential).get("spending")


BOUND_FIELDS = tuple(f.name for f in fields(EpsilonBoundTest))
_BASE_FIELDS = ("bound", "figures", "layout")


@dataclass(frozen=True)
class BoundAuditResult:
    """A bound audit's result: the shared block, the kind's typed fields (a subclass declares them), the mode's
    other figures as found, and the file's field order.

    Attributes:
        bound: the claim, the bound and how it was decided (`EpsilonBoundTest`).
        figures: every field neither the block nor the kind types: the mode's counts, scores, seeds, settings
            and what recording adds (MLflow, digest), as found.
        layout: the field order of the result (the order `to_json` writes).
    """

    bound: EpsilonBoundTest = field(default_factory=EpsilonBoundTest)
    figures: Mapping[str, Any] = field(default_factory=dict)
    layout: tuple[str, ...] = ()
    kind_name: ClassVar[str] = ""

    @classmethod
    def _kind_fields(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls) if f.name not in _BASE_FIELDS)

    @classmethod
    def from_json(cls: type[_Result], data: Mapping[str, Any]) -> _Result:
        """A result read back (the job's own dict, a results file, a re-rendered report): nothing is required;
        what the result holds is typed where this kind types it, the rest kept as found, in its order."""
        typed = cls._kind_fields()
        return cls(
            bound=EpsilonBoundTest(**{k: data[k] for k in BOUND_FIELDS if k in data}),
            figures={k: v for k, v in data.items() if k not in BOUND_FIELDS and k not in typed},
            layout=tuple(data),
            **{k: data[k] for k in typed if k in data},
        )

    def to_json(self) -> dict[str, Any]:
        """The result as results files hold it, in its layout."""
        return {key: self._value(key) for key in self.layout}

    def _value(self, key: str) -> Any:
        if key in BOUND_FIELDS:
            return getattr(self.bound, key)
        if key in self._kind_fields():
            return getattr(self, key)
        return self.figures[key]

    def with_fields(self: _Result, **changes: Any) -> _Result:
        """The result with `changes` set, as a dict update would: a field it holds keeps its place, a new one
        goes last."""
        typed = self._kind_fields()
        bound = {k: v for k, v in changes.items() if k in BOUND_FIELDS}
        own = {k: v for k, v in changes.items() if k in typed}
        figures = {k: v for k, v in changes.items() if k not in bound and k not in own}
        return replace(
            self,
            bound=replace(self.bound, **bound),
            figures={**self.figures, **figures},
            layout=self.layout + tuple(k for k in changes if k not in self.layout),
            **own,
        )

    def holds(self, key: str) -> bool:
        """The result has the field `key` (present, even when null)."""
        return key in self.layout

    def found(self, key: str) -> Any:
        """The value of field `key` as the result holds it, None where absent (for the generic readers of any
        bound kind, plug-ins included)."""
        return self._value(key) if self.holds(key) else None

    @property
    def deciding_ceiling(self) -> Any:
        """The ceiling the verdict reads: the result's own field where it holds one, else its verdict's."""
        return self.bound.ceiling if self.holds("ceiling") else self.bound.own.get("ceiling")

    @property
    def deciding_needed(self) -> Any:
        """How many runs would make the claim testable: the result's field where it holds one, else its verdict's."""
        return self.bound.needed if self.holds("needed") else self.bound.own.get("needed")

    @property
    def deciding_needed_unit(self) -> Any:
        return self.bound.needed_unit if self.holds("needed_unit") else self.bound.own.get("needed_unit")

    @property
    def mode_name(self) -> str:
        """The audit's mode ("" where it writes none)."""
        return str(self.found("mode") or "")

    def subject_name(self, kind: str) -> str:
        """What was audited, in words: the trainer, the mechanism, else the kind's name."""
        return str(self.found("trainer") or self.found("mechanism") or kind)


@dataclass(frozen=True)
class CanaryAuditResult(BoundAuditResult):
    """What `privacy-audit canary-audit` found (kind `canary-audit`, every mode: profile, multi-canary, multi,
    one-run).

    Attributes:
        mode: profile | multi-canary | multi | one-run.
        trainer: the trainer as the user named it (`module:function`).
        claim: the claim as built once at the boundary (`PrivacyClaim.to_dict()`: ε, δ, where they came from,
            and (σ, q, T) where the accountant's profile was declared).
        n_runs, n_runs_planned, n_models_per_side, n_canaries: the audit's size (which ones depend on the mode).
    """

    kind_name: ClassVar[str] = "canary-audit"
    mode: str | None = None
    trainer: str | None = None
    claim: Mapping[str, Any] | None = None
    n_runs: int | None = None
    n_runs_planned: int | None = None
    n_models_per_side: int | None = None
    n_canaries: int | None = None

    @property
    def planned_size(self) -> int:
        """The size its power is judged at: canaries for one-run, else the planned runs (0 where none is written)."""
        if self.mode == "one-run":
            return _count(self.n_canaries) or 0
        for size in (self.n_runs_planned, self.n_runs, self.n_models_per_side):
            if _count(size) is not None:
                return int(size)  # type: ignore[arg-type]  # checked just above
        return 0

    def subject_name(self, kind: str) -> str:
        return str(self.trainer or self.found("mechanism") or kind)


@dataclass(frozen=True)
class MechanismAuditResult(BoundAuditResult):
    """What `privacy-audit mechanism-audit` found (kind `mechanism-audit`).

    Attributes:
        mechanism: the randomized function audited (`module:function`).
        claim: the claim as built once at the boundary (`PrivacyClaim.to_dict()`).
        n_trials: the planned draws per dataset (its power is judged at this size).
    """

    kind_name: ClassVar[str] = "mechanism-audit"
    mechanism: str | None = None
    claim: Mapping[str, Any] | None = None
    n_trials: int | None = None

    def subject_name(self, kind: str) -> str:
        return str(self.found("trainer") or self.mechanism or kind)


@dataclass(frozen=True)
class WhiteboxAuditResult(BoundAuditResult):
    """What `privacy-audit whitebox-audit` found (kind `whitebox-audit`: the runs mode with a Dirac canary, and
    `--mode one-run` with gradient canaries in one run; the in-script `audit.one_run` writes the same).

    Attributes:
        audit: the method, in words (its paper).
        mode: "one-run" for one training run; absent for the runs mode.
        subject: the DP-SGD audited, in words.
        observe: all (every iterate) | final (the final model only).
        settings: the DP-SGD settings read from the optimizer and the accountant (σ, q, T, C, the history).
        claim: where the claimed ε came from (and the runs mode's μ).
        canary: the runs mode's Dirac canary; canaries: the one-run mode's (their kind, number, clipping).
        accountant_disagreements: where the accountant disagrees with the training (each a finding).
        one_run: the one-run mode's tests (Steinke et al., f-DP, estimates).
        gdp_bound, refutation: the runs mode's GDP-family bound and its test of the claimed curve.
    """

    kind_name: ClassVar[str] = "whitebox-audit"
    audit: str | None = None
    mode: str | None = None
    subject: str | None = None
    observe: str | None = None
    settings: Mapping[str, Any] | None = None
    claim: Mapping[str, Any] | None = None
    canary: Mapping[str, Any] | None = None
    canaries: Mapping[str, Any] | None = None
    accountant_disagreements: list[str] | None = None
    one_run: Mapping[str, Any] | None = None
    gdp_bound: Mapping[str, Any] | None = None
    refutation: Mapping[str, Any] | None = None

    @property
    def canary_kind(self) -> str:
        """The canaries' kind ("dirac", "random"; "" where the result names none)."""
        found = self.canaries or self.canary
        return str(found.get("kind") or "") if isinstance(found, Mapping) else ""

    @property
    def dirac(self) -> bool:
        """Worst-case Dirac gradient canaries (named so, or the runs mode's Dirac audit)."""
        return self.canary_kind == "dirac" or "Dirac" in str(self.audit or "")


def read_bound_result(kind: str, result: Mapping[str, Any]) -> BoundAuditResult:
    """`result` as its kind's typed result (`AuditKind.result_type`) where that is a bound result, else as the
    generic `BoundAuditResult` (a plug-in kind that still writes a dict with the shared block)."""
    from audit.machinery.audit_kinds import AUDIT_KINDS, load

    declared = AUDIT_KINDS.get(kind)
    typed: Any = load(declared.result_type) if declared is not None and declared.result_type else None
    if isinstance(typed, type) and issubclass(typed, BoundAuditResult):
        return typed.from_json(result)
    return BoundAuditResult.from_json(result)
