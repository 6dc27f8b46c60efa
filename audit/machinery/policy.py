"""Policy gate: a YAML file of limits, checked against a results.json.

A policy states what a release must satisfy, e.g.

    rules:
      max_auc: 0.6                 # every attack on every target
      max_tpr_at_fpr: {0.001: 0.01}
      max_canary_tpr_at_fpr: {0.01: 0.05}  # planted canaries (run --preset llm): share found at FPR 1 %
      max_epsilon_lb: 2.0          # best sound empirical ε lower bound of a target
      fail_on_violation: true      # default true: a lower bound above the accountant's ε fails
      fail_on_inconclusive: false  # default false: a claim the audit could not have refuted exits 0
      required_accountant: prv
      max_dcr_share: 0.6           # synthetic data
      min_nndr_p10: 0.5            # synthetic data
      max_total_epsilon: 8.0       # privacy ledger: composed ε a dataset may spend (or {adult: 8.0, ...})
    overrides:                     # per target ε (.inf / "inf" = the non-private target)
      - epsilon: .inf
        rules: {max_auc: 0.75}

`load_policy` validates the file at the boundary (AuditInputError naming file and field);
`evaluate_policy` is a pure function of (policy, results) returning one `RuleCheck` per rule ×
target (× attack / FPR level) it applies to; `audit.machinery.verdict.verdict_for_results` folds
that into the one `results["verdict"]` dict every command writes. A rule without the data to
evaluate it (synthetic rules on a results file without synthetic data, a TPR level the results do
not report) gives a check marked not applicable, which never fails the gate but is listed (and is
a skipped test case in JUnit).

Which numbers the rules read (results.json schema_version 1, 2 or 3):
- max_auc, max_tpr_at_fpr: every `targets[].attacks[]` entry that scores the training records, and the
  distance attack of every `synthetic[].mia` entry when present;
- max_canary_tpr_at_fpr: every `targets[].attacks[]` entry of planted canaries (`kind` in
  audit.machinery.leakage.PLANTED_CANARY_KINDS), which max_auc and max_tpr_at_fpr leave out;
- max_epsilon_lb: `targets[].epsilon_lb_best` (the bound proven for one model: one-run with coin-flip
  membership; null when none is proven, and the rule is then not applicable, which the verdict
  reports as inconclusive), and for synthetic entries the one-run bound in `mia.epsilon_lb`;
- fail_on_violation: `targets[].violation` against `epsilon_accountant`;
- required_accountant: `targets[].accountant` of private targets;
- max_dcr_share: `synthetic[].dcr.dcr_share`; min_nndr_p10: `synthetic[].nndr.p10`;
- max_total_epsilon: the `ledger` section a recording command (`--ledger URI --dataset NAME`) wrote:
  the dataset's composed ε after the release (or the figure it would have reached when refused); a
  number applies to every dataset, a mapping to the datasets it names. The gate reads the figure
  in the file and never opens the ledger a file names.
An override replaces a rule's value (a whole `max_tpr_at_fpr` map included) for targets and
synthetic entries whose `epsilon_target` equals the override's ε.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from audit.errors import AuditInputError
from audit.machinery.audit_kinds import AUDIT_KINDS, audit_kind
from audit.machinery.input_files import clip, shorten
from audit.machinery.policy_model import (
    Policy,
    PolicyEvaluation,
    PolicyOverride,
    PolicyRules,
    RuleCheck,
    _eps_text,
    _number_from_key,
    _same_epsilon,
)
from audit.machinery.policy_rules import (
    _check_synthetic,
    _check_target,
    _compare,
    _eps_label,
    _not_applicable,
    _Reader,
    _rule_anywhere,
    _target_epsilon,
)
from audit.machinery.results_validation import (
    RESULTS_SCHEMA_PATH,
    load_results,
    validate_results,
)

__all__ = [
    "Policy",
    "PolicyRules",
    "PolicyOverride",
    "RuleCheck",
    "PolicyEvaluation",
    "load_policy",
    "policy_from_dict",
    "evaluate_policy",
    "evaluate_policy_on_audit",
    "SINGLE_AUDIT_KINDS",
    "load_results",
    "validate_results",
    "RESULTS_SCHEMA_PATH",
]


# ---------------------------------------------------------------------------------------------
# Loading


def load_policy(path: str | Path) -> Policy:
    """Read and validate a policy file (`yaml.safe_load`); AuditInputError names file and field."""
    from audit.machinery.input_files import load_yaml_file

    path = Path(path)
    where = f"policy file '{path}'"
    content = load_yaml_file(path, where)  # duplicate keys, alias bombs, deep nesting refused
    return policy_from_dict(content, source=where, path=str(path))


def policy_from_dict(content: Any, *, source: str = "policy", path: str | None = None) -> Policy:
    """Validate an already-parsed policy mapping; `source` names it in error messages."""
    if content is None:
        raise AuditInputError(source, "is empty; expected a mapping with 'rules' (and optionally 'overrides')")
    if not isinstance(content, dict):
        raise AuditInputError(source, "must be a YAML mapping with 'rules' (and optionally 'overrides')")
    if "path" in content:  # set from the file name below, never from the file
        raise AuditInputError(f"{source}: field 'path'", "unknown field (known: name, description, rules, overrides)")
    try:
        policy = Policy.model_validate({**content, "path": path})
    except ValidationError as exc:
        raise _policy_error(exc, source) from None
    if not policy.rules.set_rules() and not any(o.rules.set_rules() for o in policy.overrides):
        raise AuditInputError(f"{source}: field 'rules'", "sets no rule, so the gate would check nothing")
    return policy


def _policy_error(error: ValidationError, source: str) -> AuditInputError:
    first = error.errors()[0]
    parts: list[str] = []
    for part in first["loc"]:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        elif part == "[key]":
            continue
        else:
            parts.append(("." if parts else "") + str(part))
    field_name = clip("".join(parts) or "(top level)", 80)
    message = clip(first["msg"].removeprefix("Value error, "))
    if first["type"] == "extra_forbidden":
        known = (
            ", ".join(PolicyRules.model_fields) if "rules" in first["loc"] else "name, description, rules, overrides"
        )
        message = f"unknown field (known: {known})"
    elif first["type"] in (
        "float_type",
        "bool_type",
        "int_type",
        "string_type",
        "dict_type",
        "list_type",
        "model_type",
        "literal_error",
    ):
        received = first.get("input")
        message = f"{message} (got {shorten(received, 80)})"
        if isinstance(received, str) and _number_from_key(received) is not None:
            message += "; write numbers unquoted, with a dot before an exponent (1.0e-3: YAML reads 1e-3 as text)"
    extra = f" (and {len(error.errors()) - 1} more problem(s))" if len(error.errors()) > 1 else ""
    return AuditInputError(f"{source}: field '{field_name}'", message + extra)


# ---------------------------------------------------------------------------------------------
# Evaluation


def evaluate_policy(policy: Policy, results: dict[str, Any], *, source: str = "results") -> PolicyEvaluation:
    """Check every rule of `policy` against `results` (pure; no I/O).

    Raises AuditInputError naming e.g. `targets[2].attacks[0].auc` when a rule needs a field the
    results lack or hold with the wrong type.
    """
    if not isinstance(results, dict):
        raise AuditInputError(source, "must be a results mapping")
    reader = _Reader(source)
    targets = reader.sequence(results, "targets", "")
    synthetic = results.get("synthetic") or []
    if not isinstance(synthetic, list):
        raise AuditInputError(f"{source}: field 'synthetic'", f"expected a list, got {type(synthetic).__name__}")

    checks: list[RuleCheck] = []
    model_rules = (
        "max_auc",
        "max_tpr_at_fpr",
        "max_canary_tpr_at_fpr",
        "max_epsilon_lb",
        "fail_on_violation",
        "required_accountant",
    )
    for index, target in enumerate(targets):
        checks += _check_target(policy, target, f"targets[{index}]", reader)
    if not targets:
        for rule in model_rules:
            if rule != "fail_on_violation" and _rule_anywhere(policy, rule):
                checks.append(_not_applicable(rule, "models", "the results hold no trained targets"))

    for index, entry in enumerate(synthetic):
        checks += _check_synthetic(policy, entry, f"synthetic[{index}]", reader)
    if not synthetic:
        for rule in ("max_dcr_share", "min_nndr_p10"):
            if _rule_anywhere(policy, rule):
                checks.append(_not_applicable(rule, "synthetic data", "the results hold no synthetic-data checks"))

    epsilons = [_target_epsilon(t, f"targets[{i}]", reader) for i, t in enumerate(targets)]
    epsilons += [
        _target_epsilon(s, f"synthetic[{i}]", reader) if "epsilon_target" in s else None
        for i, s in enumerate(synthetic)
    ]
    for override in policy.overrides:
        if not any(_same_epsilon(override.epsilon, e) for e in epsilons):
            checks.append(
                _not_applicable(
                    f"overrides[ε = {_eps_text(override.epsilon)}]",
                    _eps_label(override.epsilon),
                    "this override matches no target or synthetic entry in the results",
                )
            )

    checks += _ledger_checks(policy, results, reader)
    checks += _signature_checks(policy, results)
    passed = all(check.passed for check in checks)
    return PolicyEvaluation(passed=passed, checks=checks, policy_name=policy.display_name, policy_path=policy.path)


def _ledger_checks(policy: Policy, results: dict[str, Any], reader: _Reader) -> list[RuleCheck]:
    """max_total_epsilon against the `ledger` section a recording command wrote (audit/ledger)."""
    if policy.rules.max_total_epsilon is None:
        return []
    section = results.get("ledger")
    if not isinstance(section, dict):
        return [
            _not_applicable(
                "max_total_epsilon",
                "privacy ledger",
                "nothing was recorded in a ledger (run with --ledger URI --dataset NAME)",
            )
        ]
    dataset = reader.text(section, "dataset", "ledger")
    label = f"dataset '{clip(dataset, 100)}'"
    limit = policy.rules.total_epsilon_limit(dataset)
    if limit is None:
        return [_not_applicable("max_total_epsilon", label, "the policy sets no limit for this dataset")]
    if section.get("epsilon_spent") is None and not section.get("epsilon_spent_unbounded"):
        return [_not_applicable("max_total_epsilon", label, clip(str(section.get("reason") or "no spent figure")))]
    spent = math.inf if section.get("epsilon_spent_unbounded") else reader.number(section, "epsilon_spent", "ledger")
    what = "composed ε " + (
        "after the release" if section.get("recorded") else "the refused release would have reached"
    )
    check = _compare(
        "max_total_epsilon",
        label,
        None,
        spent,
        limit,
        at_most=True,
        what=what,
        detail=f"{section.get('method')}, δ {section.get('delta')}",
    )
    # JSON has no infinity: an exhausted (unbounded) budget is a finding written as "unbounded", not a crash.
    return [replace(check, measured="unbounded") if math.isinf(spent) else check]


def _signature_checks(policy: Policy, results: dict[str, Any]) -> list[RuleCheck]:
    """require_signature against what the reader found (`integrity_check`, set by
    audit.dp_validation.result_files.read_result_file, never read from the file): on when the policy
    says so, or when a key is configured and the policy does not say `require_signature: false`."""
    required = policy.rules.require_signature
    found = results.get("integrity_check")
    if required is False or not isinstance(found, dict) or (required is None and not found.get("key_configured")):
        return []
    signature = str(found.get("signature"))
    why = {
        "valid": "signed by the configured key",
        "unsigned": "not signed: not written by a runner holding the key",
        "invalid": "signed, but not by the configured key (or the signature is forged)",
        "not checked": "no key is configured here to check a signature (set PRIVACY_AUDIT_SIGNING_KEY or "
        "PRIVACY_AUDIT_VERIFY_KEY)",
    }.get(signature, signature)
    return [
        RuleCheck(
            "require_signature", "result file", None, signature, "valid", signature == "valid", f"result file: {why}"
        )
    ]


SINGLE_AUDIT_KINDS = tuple(AUDIT_KINDS)  # declared in audit/machinery/audit_kinds.py
_MODEL_AND_DATA_RULES = (
    "max_auc",
    "max_tpr_at_fpr",
    "max_canary_tpr_at_fpr",
    "required_accountant",
    "max_dcr_share",
    "min_nndr_p10",
)


def evaluate_policy_on_audit(
    policy: Policy, kind: str, result: dict[str, Any], built_in: dict[str, Any], *, source: str = "results"
) -> PolicyEvaluation:
    """The rules of `policy` that apply to one pre-declared audit (pure; no I/O).

    For the results of the single-audit kinds (audit/machinery/audit_kinds.py)
    (`<kind>.json`):
    - max_epsilon_lb: the audit's `epsilon_lower_bound` (canary, mechanism and white-box audits; a proven
      bound at the stated confidence: over independent runs, or one run with coin-flip canaries; the
      white-box audit's GDP-family bound rests on an assumption and is not what this rule reads);
    - fail_on_violation (default true): the audit's built-in verdict `built_in` failed (bound above
      the claim, a failed conformance check, an unsound or invalid accountant point);
    - fail_on_inconclusive: applied by the verdict (audit.machinery.verdict), not here.
    The rules on attacks, accountants of trained targets and synthetic data are listed as not applicable.
    An override applies when its ε equals the audit's `claimed_epsilon`.
    """
    declared = audit_kind(kind, source)
    if not isinstance(result, dict):
        raise AuditInputError(source, f"must be a JSON object (a {kind}.json written by privacy-audit)")
    reader = _Reader(source)
    claim = result.get("claimed_epsilon")
    claim = claim if isinstance(claim, (int, float)) and not isinstance(claim, bool) and claim > 0 else None
    rules = policy.rules_for(claim)
    label = kind if claim is None else f"{kind}, claimed ε = {_eps_text(claim)}"
    checks: list[RuleCheck] = []
    if rules.max_epsilon_lb is not None:
        if declared.bounds_epsilon:
            bound = reader.number(result, "epsilon_lower_bound", "")
            checks.append(
                _compare(
                    "max_epsilon_lb",
                    label,
                    None,
                    bound,
                    rules.max_epsilon_lb,
                    at_most=True,
                    what="proven empirical ε lower bound",
                    detail=str(result.get("mode") or ""),
                )
            )
        else:
            checks.append(_not_applicable("max_epsilon_lb", label, f"a {kind} result has no ε lower bound"))
    if rules.fail_on_violation is not False:
        failed = built_in.get("status") == "fail"
        reasons = "; ".join(map(str, built_in.get("reasons") or []))
        checks.append(
            RuleCheck(
                "fail_on_violation",
                label,
                None,
                str(built_in.get("status")),
                "not fail",
                not failed,
                f"{label}: built-in verdict {built_in.get('status')}" + (f": {reasons}" if reasons else ""),
            )
        )
    for rule in _MODEL_AND_DATA_RULES:
        if _rule_anywhere(policy, rule):
            checks.append(
                _not_applicable(rule, label, f"a {kind} result has no attacks on trained targets or synthetic data")
            )
    checks += _ledger_checks(policy, result, reader)
    checks += _signature_checks(policy, result)
    passed = all(check.passed for check in checks)
    return PolicyEvaluation(passed=passed, checks=checks, policy_name=policy.display_name, policy_path=policy.path)
