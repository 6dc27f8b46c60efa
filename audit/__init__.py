"""privacy-audit's Python API: run an audit, bound ε from scores, check an accountant, keep a ledger.

    import audit

    result = audit.audit_scores("scores.csv", claimed_epsilon=2.0, membership_randomized=True)
    print(result.headline, result.epsilon_lower_bound)   # the top line in words, the best sound ε bound
    print(result)                                        # the verdict: one line per claim

The jobs (`run`, `audit_scores`, `audit_model`, `synth_check`, `canary_audit`, `whitebox_audit`,
`one_run_whitebox_audit`, `accountant_check`) are the CLI's commands as functions: each returns an
`AuditResult` (the verdict's figures, and `.to_dict()` the full results.json). `OpacusAudit` audits
the user's own Opacus loop from inside their script (`with OpacusAudit(engine, optimizer, model,
data_loader=loader): ...`). The estimators take
membership scores and fair-coin membership labels and return an ε lower bound or estimate, each
citing its paper. `Ledger` records DP releases of a dataset and composes their ε. Bad input raises
`AuditInputError` naming the field. `AuditResult.typed_verdict` is the verdict as frozen types
(`Verdict`, `ClaimRow`, `CheckRow`, `RuleRow`), and `AuditResult.typed_results` a single audit's result
(`CanaryAuditResult`, `MechanismAuditResult`, `WhiteboxAuditResult` on their shared `EpsilonBoundTest`,
`ConformanceResult`, `AccountantCheckResult`); `Estimator` and `AuditKind` / `register_audit_kind`
are the registries plug-ins extend. docs/api.md is this API's reference page.

Importing `audit` is cheap: each name is imported from its module when first used. Inside the
package, rooms go lowest first: `errors` (leaf) → `statistics` → `machinery` → jobs (`sweep`,
`model_audits`, `synthetic`, `dp_validation`) → `api`, `cli`; see docs/architecture.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name → the module that defines it. Only names listed here are public; everything else in the
# package may change between versions.
_EXPORTS: dict[str, str] = {
    # The jobs, as functions returning an AuditResult (audit/api.py).
    "AuditResult": "audit.api",
    "load_config": "audit.api",
    "run": "audit.api",
    "audit_scores": "audit.api",
    "audit_model": "audit.api",
    "synth_check": "audit.api",
    "canary_audit": "audit.api",
    "whitebox_audit": "audit.api",
    "one_run_whitebox_audit": "audit.api",
    "accountant_check": "audit.api",
    # --- In-script one-run audit (a context manager around the user's own Opacus loop). ---
    "OpacusAudit": "audit.dp_validation.in_script",
    # --- The verdict as types (audit/machinery/verdict_rows.py): AuditResult.typed_verdict returns a Verdict. ---
    "Verdict": "audit.machinery.verdict_rows",
    "ClaimRow": "audit.machinery.verdict_rows",
    "CheckRow": "audit.machinery.verdict_rows",
    "RuleRow": "audit.machinery.verdict_rows",
    # --- A single audit's result as types: AuditResult.typed_results returns its kind's (AuditKind.result_type). ---
    "EpsilonBoundTest": "audit.machinery.bound_results",
    "CanaryAuditResult": "audit.machinery.bound_results",
    "MechanismAuditResult": "audit.machinery.bound_results",
    "WhiteboxAuditResult": "audit.machinery.bound_results",
    "ConformanceResult": "audit.machinery.audit_results",
    "AccountantCheckResult": "audit.machinery.audit_results",
    # --- The registries plug-ins extend: estimators, single-audit kinds. ---
    "Estimator": "audit.statistics.estimators",
    "AuditKind": "audit.machinery.audit_kinds",
    "register_audit_kind": "audit.machinery.audit_kinds",
    # --- The claim and the input error. ---
    "PrivacyClaim": "audit.dp_validation.claims",
    "AuditInputError": "audit.errors",
    # --- Estimators: pure functions of (scores, members) or counts; each docstring cites its paper. ---
    "EpsilonLowerBound": "audit.statistics.bound_types",
    "HeldOut": "audit.statistics.bound_types",
    "Bonferroni": "audit.statistics.bound_types",
    "epsilon_lower_bound_one_run": "audit.statistics.one_run_bounds",
    "one_run_epsilon_from_counts": "audit.statistics.one_run_bounds",
    "one_run_ceiling": "audit.statistics.one_run_bounds",
    "epsilon_lower_bound_clopper_pearson": "audit.statistics.clopper_pearson_bounds",
    "clopper_pearson_upper": "audit.statistics.clopper_pearson_bounds",
    "epsilon_from_error_rates": "audit.statistics.clopper_pearson_bounds",
    "fdp_one_run_audit": "audit.statistics.fdp_one_run",
    "epsilon_estimate_gdp": "audit.statistics.gdp_estimate",
    "gdp_mu_lower_bound": "audit.statistics.gdp_conversions",
    "epsilon_from_gdp_mu": "audit.statistics.gdp_conversions",
    "auc_with_ci": "audit.statistics.attack_metrics",
    "tpr_at_fpr": "audit.statistics.attack_metrics",
    "membership_advantage": "audit.statistics.attack_metrics",
    "DPSGDEvent": "audit.statistics.accountants",
    "epsilon_pld": "audit.statistics.accountants",
    # --- The privacy-budget ledger (docs/ledger.md). ---
    "Ledger": "audit.ledger.store",
    "ReleaseInput": "audit.ledger.store",
    "Provenance": "audit.ledger.store",
    "BudgetExceeded": "audit.ledger.store",
}

__all__ = [  # a literal list: linters and IDEs read it; tests/test_public_api.py keeps it equal to _EXPORTS
    "AuditResult",
    "load_config",
    "run",
    "audit_scores",
    "audit_model",
    "synth_check",
    "canary_audit",
    "whitebox_audit",
    "one_run_whitebox_audit",
    "accountant_check",
    "Verdict",
    "ClaimRow",
    "CheckRow",
    "RuleRow",
    "EpsilonBoundTest",
    "CanaryAuditResult",
    "MechanismAuditResult",
    "WhiteboxAuditResult",
    "ConformanceResult",
    "AccountantCheckResult",
    "Estimator",
    "AuditKind",
    "register_audit_kind",
    "OpacusAudit",
    "PrivacyClaim",
    "AuditInputError",
    "EpsilonLowerBound",
    "HeldOut",
    "Bonferroni",
    "epsilon_lower_bound_one_run",
    "one_run_epsilon_from_counts",
    "one_run_ceiling",
    "epsilon_lower_bound_clopper_pearson",
    "clopper_pearson_upper",
    "epsilon_from_error_rates",
    "fdp_one_run_audit",
    "epsilon_estimate_gdp",
    "gdp_mu_lower_bound",
    "epsilon_from_gdp_mu",
    "auc_with_ci",
    "tpr_at_fpr",
    "membership_advantage",
    "DPSGDEvent",
    "epsilon_pld",
    "Ledger",
    "ReleaseInput",
    "Provenance",
    "BudgetExceeded",
]

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports on first use
    from audit.api import (
        AuditResult,
        accountant_check,
        audit_model,
        audit_scores,
        canary_audit,
        load_config,
        one_run_whitebox_audit,
        run,
        synth_check,
        whitebox_audit,
    )
    from audit.dp_validation.claims import PrivacyClaim
    from audit.dp_validation.in_script import OpacusAudit
    from audit.errors import AuditInputError
    from audit.ledger.store import BudgetExceeded, Ledger, Provenance, ReleaseInput
    from audit.machinery.audit_kinds import AuditKind, register_audit_kind
    from audit.machinery.audit_results import AccountantCheckResult, ConformanceResult
    from audit.machinery.bound_results import (
        CanaryAuditResult,
        EpsilonBoundTest,
        MechanismAuditResult,
        WhiteboxAuditResult,
    )
    from audit.machinery.verdict_rows import CheckRow, ClaimRow, RuleRow, Verdict
    from audit.statistics.accountants import DPSGDEvent, epsilon_pld
    from audit.statistics.attack_metrics import auc_with_ci, membership_advantage, tpr_at_fpr
    from audit.statistics.bound_types import Bonferroni, EpsilonLowerBound, HeldOut
    from audit.statistics.clopper_pearson_bounds import (
        clopper_pearson_upper,
        epsilon_from_error_rates,
        epsilon_lower_bound_clopper_pearson,
    )
    from audit.statistics.estimators import Estimator
    from audit.statistics.fdp_one_run import fdp_one_run_audit
    from audit.statistics.gdp_conversions import epsilon_from_gdp_mu, gdp_mu_lower_bound
    from audit.statistics.gdp_estimate import epsilon_estimate_gdp
    from audit.statistics.one_run_bounds import (
        epsilon_lower_bound_one_run,
        one_run_ceiling,
        one_run_epsilon_from_counts,
    )


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value  # looked up once
        return value
    raise AttributeError(f"module 'audit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
