"""The verdict's vocabulary and rows as types: `Check` (one thing the verdict looks at), `CheckRow` (a
decided check), `ClaimRow` (one status per claim), `RuleRow` (a policy rule) and `Verdict` (the whole
`results["verdict"]`), frozen dataclasses.

Built once (audit.machinery.verdict_decision.decide builds a `Verdict`), serialised once (`to_json`: the
dict results.json's schema describes, `$defs/verdict` of audit/schema/results.schema.json, key for key in
the order it has always been written), read back with `from_json` (a verdict from a file, an older one
included: a field it lacks takes its default; fields added beside the rows by a builder, such as a
single audit's `ceiling`, travel in `Verdict.extra`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

__all__ = [
    "BUILT_IN",
    "CLAIM_STATUSES",
    "DEFAULT_ALPHA",
    "POWER_KINDS",
    "RULE_STATUSES",
    "Check",
    "CheckRow",
    "ClaimRow",
    "RuleRow",
    "Verdict",
]

Status = Literal["pass", "fail", "inconclusive", "no_claim"]


# Every claim status, in the order outputs count them. "not_refuted": a check that could have refuted the
# claim ran and did not, but its mode has no proven or measured power against this violation.
CLAIM_STATUSES = ("held", "not_refuted", "refuted", "untestable")


POWER_KINDS = ("proven", "measured", "control", "none")


# A policy's rules are not claims: each is passed, failed or not applicable, and counted apart.
RULE_STATUSES = ("passed", "failed", "not_applicable")


BUILT_IN = "built-in checks"


DEFAULT_ALPHA = 0.05


@dataclass(frozen=True)
class Check:
    """One thing the verdict looks at (see the module docstring for the four kinds)."""

    subject: str
    name: str
    message: str
    p_value: float | None = None
    failed: bool = False
    inconclusive: bool = False
    decides: bool = True
    assumption: str = ""
    claim: str = ""  # the claim this check tests (checks of one claim decide it together)
    ceiling: float | None = None  # the most a perfect attack could show here (an ε), where computable
    needed: str = ""  # what would make an untestable claim testable ("needs ≥ 3,100 candidates")
    # Where this check's power against its claim comes from (docs/verdict.md "Power"): a dict
    # {"kind": "proven" | "measured" | "control" | "none", "detail": plain words, "figure": number or None,
    #  "decider": for "none", the mode / flag that would decide}. A passing check whose power is "none"
    # makes its claim "not refuted", never "held". None: not declared yet (legacy rows: read as proven).
    power: dict[str, Any] | None = None


Outcome = Literal["pass", "fail", "inconclusive", "shown"]
ClaimStatus = Literal["held", "not_refuted", "refuted", "untestable"]
RuleStatus = Literal["passed", "failed", "not_applicable"]


@dataclass(frozen=True)
class CheckRow(Check):
    """A `Check` with its outcome in the verdict: decided (pass / fail / inconclusive) or only shown.

    Attributes:
        outcome: "pass", "fail", "inconclusive" or "shown" (a check that never decides); the other
            attributes are the `Check`'s (subject, name, message, p_value, claim, ceiling, power, ...).
    """

    outcome: Outcome = "pass"

    def to_json(self) -> dict[str, Any]:
        """The row as results.json holds it (`verdict.checks[i]`)."""
        return asdict(self)

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> CheckRow:
        """A row read back (unknown keys dropped; absent ones take their defaults)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in row.items() if k in names})


@dataclass(frozen=True)
class ClaimRow:
    """One claim tested and its status (docs/verdict.md): held, not refuted, refuted or untestable here.

    Attributes:
        claim: the claim in words ("ε = 1 · loss: claimed (ε 1, δ 1e-05)").
        subject: what it is about (a target row, a file, a trainer).
        kind: "claim", or "policy rule" for a rule a policy states as a claim.
        status: one of `CLAIM_STATUSES`.
        reason: one line saying why, in the words of its deciding check.
        ceiling: the most a perfect attack could have shown here (an ε), where computable.
        needed: for an untestable claim, what would make it testable.
        p_value: the smallest p-value of its tests, where any.
        checks: the names of the checks that decided it.
        power: where its power comes from ({"kind", "detail", "figure", "decider"}), where declared.
    """

    claim: str
    subject: str | None = None
    kind: str = "claim"
    status: ClaimStatus = "untestable"
    reason: str = ""
    ceiling: float | None = None
    needed: str | None = None
    p_value: float | None = None
    checks: tuple[str, ...] = ()
    power: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The claim as results.json holds it (`verdict.claims[i]`)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["checks"] = list(self.checks)
        out["power"] = dict(self.power) if self.power is not None else None
        return out

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> ClaimRow:
        """A claim read back (unknown keys dropped; absent ones take their defaults)."""
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in row.items() if k in names}
        values["checks"] = tuple(values.get("checks") or ())
        return cls(**values)


@dataclass(frozen=True)
class RuleRow:
    """One rule of a policy (never a claim): passed, failed or not applicable, with its figure and threshold.

    Attributes:
        rule: the rule's name in the policy (`max_auc`, `max_epsilon_lb`, ...).
        subject: the row it was applied to; `attack` the attack, where one.
        status: "passed", "failed" or "not_applicable".
        figure: the measured value; `threshold` the policy's limit.
        message: one line in words.
    """

    rule: str
    subject: str | None = None
    attack: str | None = None
    status: RuleStatus = "not_applicable"
    figure: Any = None
    threshold: Any = None
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        """The rule as results.json holds it (`verdict.rules[i]`)."""
        return asdict(self)

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> RuleRow:
        """A rule read back (unknown keys dropped; absent ones take their defaults)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in row.items() if k in names})


# The keys `Verdict.to_json` writes itself, in the order results.json has always had them.
_OWN_KEYS = (
    "status",
    "passed",
    "reasons",
    "decided_by",
    "policy",
    "family_wise_error",
    "inconclusive",
    "notes",
    "claims",
    "counts",
    "leakage",
    "fail_on_leak",
    "checks",
    "rules",
    "rule_counts",
)


@dataclass(frozen=True)
class Verdict:
    """The verdict of one audit (results["verdict"]; its vocabulary: audit/machinery/verdict.py).

    Attributes:
        status: "pass" (every claim held), "fail", "inconclusive" or "no_claim".
        reasons: one line per refuted or open claim, failed rule or finding.
        decided_by: "built-in checks" or "policy <file>"; `policy` the file, None for the built-in checks.
        family_wise_error: how the tests that decide were corrected (method, alpha, n_tests, statement).
        inconclusive: the reasons of the open claims; `notes` what else the reader should know.
        claims: one `ClaimRow` per claim tested; `checks` every check and its outcome.
        leakage: the statements on subjects without a DP claim (LEAKS / NO SIGNIFICANT LEAKAGE FOUND).
        fail_on_leak: whether a LEAKS statement fails the verdict (`--fail-on-leak`).
        rules: a policy's rules (None without a policy): never claims, counted apart.
        extra: the fields a builder adds beside these (a single audit's `ceiling`, `built_in`, ...).
    """

    status: Literal["pass", "fail", "inconclusive", "no_claim"]
    reasons: tuple[str, ...] = ()
    decided_by: str = "built-in checks"
    policy: str | None = None
    family_wise_error: Mapping[str, Any] = field(default_factory=dict)
    inconclusive: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    claims: tuple[ClaimRow, ...] = ()
    leakage: tuple[Mapping[str, Any], ...] = ()
    fail_on_leak: bool = False
    checks: tuple[CheckRow, ...] = ()
    rules: tuple[RuleRow, ...] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True only for PASS (every claim held)."""
        return self.status == "pass"

    def counts(self) -> dict[str, int]:
        """Claims per status, every status named (`CLAIM_STATUSES` order)."""
        return {s: sum(1 for c in self.claims if c.status == s) for s in CLAIM_STATUSES}

    def rule_counts(self) -> dict[str, int]:
        """Rules per status (`RULE_STATUSES` order); empty without a policy."""
        return {s: sum(1 for r in self.rules or () if r.status == s) for s in RULE_STATUSES}

    def to_json(self) -> dict[str, Any]:
        """The verdict as results.json holds it: the one serialisation."""
        out: dict[str, Any] = {
            "status": self.status,
            "passed": self.passed,
            "reasons": list(self.reasons),
            "decided_by": self.decided_by,
            "policy": self.policy,
            "family_wise_error": dict(self.family_wise_error),
            "inconclusive": list(self.inconclusive),
            "notes": list(self.notes),
            "claims": [c.to_json() for c in self.claims],
            "counts": self.counts(),
            "leakage": [dict(e) for e in self.leakage],
            "fail_on_leak": self.fail_on_leak,
            "checks": [c.to_json() for c in self.checks],
        }
        if self.rules is not None:
            out["rules"] = [r.to_json() for r in self.rules]
            out["rule_counts"] = self.rule_counts()
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, verdict: Mapping[str, Any]) -> Verdict:
        """A verdict read back from results.json or `<kind>.json` (the one reader of its rows)."""
        rules = verdict.get("rules")
        return cls(
            status=verdict.get("status") or ("pass" if verdict.get("passed") else "fail"),
            reasons=tuple(verdict.get("reasons") or ()),
            decided_by=str(verdict.get("decided_by") or "built-in checks"),
            policy=verdict.get("policy"),
            family_wise_error=dict(verdict.get("family_wise_error") or {}),
            inconclusive=tuple(verdict.get("inconclusive") or ()),
            notes=tuple(verdict.get("notes") or ()),
            claims=tuple(ClaimRow.from_json(c) for c in verdict.get("claims") or () if isinstance(c, Mapping)),
            leakage=tuple(dict(e) for e in verdict.get("leakage") or () if isinstance(e, Mapping)),
            fail_on_leak=bool(verdict.get("fail_on_leak")),
            checks=tuple(CheckRow.from_json(c) for c in verdict.get("checks") or () if isinstance(c, Mapping)),
            rules=None if rules is None else tuple(RuleRow.from_json(r) for r in rules if isinstance(r, Mapping)),
            extra={k: v for k, v in verdict.items() if k not in _OWN_KEYS},
        )
