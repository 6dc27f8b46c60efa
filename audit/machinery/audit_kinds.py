"""The single-audit kinds: each declares, in one place, what every consumer needs to know about it.

A kind is what one pre-declared audit command writes: `canary-audit`, `mechanism-audit`,
`whitebox-audit`, `conformance`, `accountant-check`. Its name is the command, the result file
(`<name>.json`) and the definition in audit/schema/audit_result.schema.json (`$defs/<name>`). Every
consumer reads this table instead of repeating the names: `gate` and `report` finding and validating
the file (audit/cli/results_commands.py, audit/dp_validation/result_files.py: schema, recomputed
power, flags against numbers), the verdict (audit/machinery/single_audit_verdicts.py), the policy
rules that apply (audit/machinery/policy.py), the ledger (audit/ledger/sources.py) and the report's
method and result sections (reports/audit_report.py).

To add a kind: one `AuditKind` row (below, or `register_audit_kind` from a plug-in) and its command.
Its schema is the shipped `$defs/<name>` or, for a plug-in, the `schema` it declares inline. Data
only: nothing here imports a job; builders are named as "module:function" and imported by whoever
calls them (tests/test_audit_kind_plugin.py adds a kind this way and sees it in verdict, gate and
report).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from audit.errors import AuditInputError

__all__ = ["AUDIT_KINDS", "AuditKind", "audit_kind", "load", "register_audit_kind", "unregister_audit_kind"]

_VERDICTS = "audit.machinery.single_audit_verdicts"
_RESULT_FILES = "audit.dp_validation.result_files"
_REPORT = "reports.audit_report"


@dataclass(frozen=True)
class AuditKind:
    """One single-audit kind (see the module docstring): what every consumer reads about it.

    Attributes:
        name: the command, the result file `<name>.json`, the schema's `$defs/<name>`.
        title: what it is, in a few words.
        bounds_epsilon: its result holds a proven `epsilon_lower_bound` against `claimed_epsilon`.
        method: the report's "Method" text.
        verdict, report_section, numbers_check, power, ledger_source: its builders, "module:function"
            (see each field's comment); None where the kind has none.
        result_type: the typed result, "module:Class" (`from_json` / `to_json`); None: still a dict.
        schema: a plug-in's JSON schema, inline; None: the shipped schema's `$defs/<name>`.
    """

    name: str  # the command, the result file `<name>.json`, the schema's `$defs/<name>`
    title: str  # what it is, in a few words
    bounds_epsilon: bool  # its result holds a proven `epsilon_lower_bound` against `claimed_epsilon`
    method: str  # the report's "Method" section (reports/audit_report.py)
    # Builders, each "module:function", imported by the consumer that calls it:
    # the verdict: (kind, result) -> verdict dict (audit.machinery.verdict's vocabulary)
    verdict: str = f"{_VERDICTS}:bound_verdict"
    # the report's result section: (kind, result, verdict) -> reports.audit_report.Section
    report_section: str = f"{_REPORT}:bound_section"
    # `gate`'s check of the flags the verdict reads against the numbers: (result, where) -> None, raising
    # AuditInputError; None: nothing beyond the schema
    numbers_check: str | None = f"{_RESULT_FILES}:check_bound_flags"
    # the power a result of this mode and size may claim, recomputed: (result) -> power dict or None
    power: str | None = None
    # "module:function" (result, where) -> (releases, notes) or None; None: not recorded in the ledger
    ledger_source: str | None = None
    # "module:Class": the frozen dataclass its job builds and its consumers read back (`from_json` / `to_json`,
    # audit/machinery/audit_results.py, audit/machinery/bound_results.py); None: the result travels as a dict
    result_type: str | None = None
    # A plug-in kind's JSON schema (one object definition); None: the shipped schema's `$defs/<name>`
    schema: Mapping[str, Any] | None = field(default=None, compare=False)

    @property
    def result_file(self) -> str:
        return f"{self.name}.json"

    @property
    def schema_def(self) -> str:
        return self.name


def load(target: str) -> Callable[..., Any]:
    """The function (or class) a "module:function" string names (a builder or result type of this table)."""
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


AUDIT_KINDS: dict[str, AuditKind] = {
    kind.name: kind
    for kind in (
        AuditKind(
            "canary-audit",
            "canary audit of training code",
            bounds_epsilon=True,
            method=(
                "Canary audit of training code, run in isolated worker processes. Default (profile): many independent "
                "training runs, each with one canary in a feature column of its own included by a fair coin; one "
                "threshold rule on the canary's score (chosen on pilot runs) is applied to the audited runs, and the "
                "claim is refuted when an exact binomial test of its weighted error FNR + s·FPR (s: the curve's slope "
                "there) rejects the trade-off curve the claim's accountant implies (Dong, Roth, Su 2019; pessimistic "
                "PLD, so conservative; p-value = the supremum over the curve). Multi-canary mode: the training "
                "function is run many times, each run with several canaries that each have a feature column of their "
                "own and are included by independent fair coin flips; each canary's score (its label's scaled-logit "
                "gain over the data mean, standardised per canary) is ranked over all runs and the one-run bound of "
                "Steinke et al. 2023 turns the correct guesses into an ε lower bound. Multi mode: runs with and "
                "without one canary; the threshold is chosen on one half of the runs and a Clopper-Pearson bound on "
                "the error rates of the other half gives the bound (Jagielski et al. 2020; Nasr et al. 2021/2023). A "
                "bound above the claimed ε proves the implementation does not meet its claim; a bound below it proves "
                "nothing. The ceiling is the largest bound a perfect attack could reach with this many runs (or "
                "canaries) at this confidence: when it is at or below the claim, the claim is untestable here (the "
                "audit could not have refuted it) and the verdict INCONCLUSIVE."
            ),
            ledger_source="audit.ledger.sources:canary_releases",
            verdict=f"{_VERDICTS}:canary_audit_verdict",
            power=f"{_RESULT_FILES}:canary_power",
            result_type="audit.machinery.bound_results:CanaryAuditResult",
        ),
        AuditKind(
            "mechanism-audit",
            "black-box audit of a randomized function",
            bounds_epsilon=True,
            method=(
                "Black-box audit of a randomized function: it is run N times on each of two neighbouring datasets; a "
                "threshold on its output chosen on half of the trials, a Clopper-Pearson bound on the other half "
                "gives an ε lower bound. A bound above the claimed ε refutes the claim; when even a perfect test's "
                "bound (the ceiling) is at or below the claim, the claim is untestable here (INCONCLUSIVE)."
            ),
            power=f"{_RESULT_FILES}:mechanism_power",
            result_type="audit.machinery.bound_results:MechanismAuditResult",
        ),
        AuditKind(
            "whitebox-audit",
            "white-box audit of DP-SGD code",
            bounds_epsilon=True,
            method=(
                "White-box audit of DP-SGD code with a Dirac gradient canary (Nasr et al. 2023, hidden state "
                "visible): in every step of an 'in' run one extra per-sample gradient of norm far above C on one "
                "coordinate that no real record touches joins the batch with the claimed sampling rate, and passes "
                "through the audited optimizer's clipping, noise and scaling; 'out' runs never get it. The canary "
                "coordinate of every iterate (or of the final model) scores each run; a threshold chosen on a pilot "
                "split and Clopper-Pearson bounds on the evaluation split give (a) a test of the claimed trade-off "
                "curve — at q = 1 DP-SGD is exactly μ-GDP, μ = √T/σ, and a point below that curve refutes the claim "
                "given independent runs (at q < 1 the claim's PLD trade-off curve is tested) — and (b) the GDP-family "
                "bound μ ≥ Φ⁻¹(1 − FPR) − Φ⁻¹(FNR), which assumes a Gaussian trade-off curve (true at q = 1 with a "
                "Dirac canary, not at q < 1, where it is an estimate). A second rule from the same pilot, chosen for "
                "the tail, gives the Clopper-Pearson (ε, δ) bound (sound for any mechanism), which decides too: the "
                "two tests split the error rate alpha (Bonferroni). The ceiling is what an attack without any error "
                "would show with these runs: at or below the claim the audit is INCONCLUSIVE."
            ),
            ledger_source="audit.ledger.sources:whitebox_releases",
            verdict=f"{_VERDICTS}:whitebox_audit_verdict",
            numbers_check=f"{_RESULT_FILES}:check_whitebox_flags",
            power=f"{_RESULT_FILES}:whitebox_power",
            result_type="audit.machinery.bound_results:WhiteboxAuditResult",
        ),
        AuditKind(
            "conformance",
            "conformance checks of a DP-SGD implementation",
            bounds_epsilon=False,
            method=(
                "Conformance checks of a step-function DP-SGD implementation: its sampler and its noisy-clipping step "
                "are called directly and compared with what the accountant was told: steps, mean batch size (q), "
                "Poisson batch-size dispersion, each record's batch count over a training (Binomial(T, q): "
                "independent inclusion at every step), the noise's standard deviation at every step, independence of "
                "the noise from the generator, and per-example clipping (one huge gradient may move the sum by at "
                "most C). Each check is a statistical test; their family-wise false-alarm rate is alpha."
            ),
            verdict=f"{_VERDICTS}:conformance_checks_verdict",
            report_section=f"{_REPORT}:conformance_section",
            numbers_check=f"{_RESULT_FILES}:check_conformance_flags",
            result_type="audit.machinery.audit_results:ConformanceResult",
        ),
        AuditKind(
            "accountant-check",
            "cross-check of an accountant",
            bounds_epsilon=False,
            method=(
                "Numeric cross-check of an accountant on a grid of DP-SGD parameters against dp_accounting's PLD "
                "accountant (optimistic and pessimistic estimates bracket the true ε of the Poisson-subsampled "
                "Gaussian mechanism). unsound = below the optimistic value; loose = above the pessimistic value by "
                "more than the margin."
            ),
            verdict=f"{_VERDICTS}:accountant_check_verdict",
            report_section=f"{_REPORT}:accountant_section",
            result_type="audit.machinery.audit_results:AccountantCheckResult",
            numbers_check=f"{_RESULT_FILES}:check_accountant_flags",
        ),
    )
}


def register_audit_kind(kind: AuditKind) -> AuditKind:
    """Add a kind (a plug-in's): every consumer sees it from now on. A name already taken is refused.

    Args:
        kind: the kind's declaration; its builders are "module:function" strings loaded on use.

    Returns:
        The registered kind.
    """
    if kind.name in AUDIT_KINDS:
        raise ValueError(f"audit kind {kind.name!r} is already registered")
    if not kind.name or not all(c.isalnum() or c == "-" for c in kind.name):
        raise ValueError(f"audit kind name {kind.name!r}: letters, digits and '-' only (it names a file)")
    AUDIT_KINDS[kind.name] = kind
    return kind


def unregister_audit_kind(name: str) -> None:
    """Remove a kind added by `register_audit_kind` (tests undo their plug-ins with it)."""
    AUDIT_KINDS.pop(name, None)


def audit_kind(name: str, where: str = "results") -> AuditKind:
    """The kind `name`; exit 2 naming `where` when it is not one."""
    if name not in AUDIT_KINDS:
        raise AuditInputError(where, f"unknown audit kind {name!r} (expected one of {', '.join(AUDIT_KINDS)})")
    return AUDIT_KINDS[name]
