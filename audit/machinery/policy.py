"""Policy gate: a YAML file of limits, checked against a results.json.

A policy states what a release must satisfy, e.g.

    rules:
      max_auc: 0.6                 # every attack on every target
      max_tpr_at_fpr: {0.001: 0.01}
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
that into the one `results["verdict"]` dict every command writes. A rule without the data to evaluate it (synthetic rules on a results
file without synthetic data, a TPR level the results do not report) gives a check marked not
applicable, which never fails the gate but is listed (and is a skipped test case in JUnit).

Which numbers the rules read (results.json schema_version 1, 2 or 3):
- max_auc, max_tpr_at_fpr: every `targets[].attacks[]` entry, and the distance attack of every
  `synthetic[].mia` entry when present;
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

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from audit.errors import AuditInputError
from audit.machinery.audit_kinds import AUDIT_KINDS, audit_kind
from audit.machinery.input_files import clip, shorten

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

# Shipped inside the package (package-data), so an installed wheel validates like a checkout.
RESULTS_SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schema" / "results.schema.json"
# Sound estimators only: the GDP number is an estimate under an assumption and never gates.
# Proven for one model / one release (coin-flip membership); Clopper-Pearson over one model's
# candidates assumes independent trials and never gates (audit.statistics.attack_evaluation).
_SOUND_BOUNDS = ("one_run",)
RESULTS_SCHEMA_VERSION = 3
READABLE_SCHEMA_VERSIONS = (1, 2, 3)
_INF_WORDS = ("inf", ".inf", "+inf", "infinity", "∞")


class _Strict(BaseModel):
    # Unknown keys are typos of real rules; wrong types must not be coerced ("0.6" is not 0.6).
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _unit(description: str) -> Any:
    return Field(None, ge=0, le=1, allow_inf_nan=False, description=description)


class PolicyRules(_Strict):
    """Limits; a rule left out (None) is not checked. `fail_on_violation` defaults to true."""

    max_auc: float | None = _unit("largest allowed attack AUC, per attack and target")
    max_tpr_at_fpr: dict[float, float] | None = Field(
        None, description="FPR level in (0, 1) → largest allowed TPR at that FPR, per attack and target"
    )
    max_epsilon_lb: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="largest allowed sound empirical ε lower bound"
    )
    fail_on_violation: bool | None = Field(
        None, description="fail when a sound lower bound exceeds the accountant's ε (default true)"
    )
    fail_on_inconclusive: bool | None = Field(
        None, description="fail when the audit could not have refuted a claim (ceiling ≤ claim; default false)"
    )
    required_accountant: Literal["prv", "rdp", "gdp"] | None = Field(
        None, description="accountant the claimed ε of private targets must come from"
    )
    max_dcr_share: float | None = _unit("largest allowed share of synthetic rows closer to train than holdout")
    min_nndr_p10: float | None = _unit("smallest allowed 10th percentile of the synthetic rows' NNDR")
    max_total_epsilon: float | dict[str, float] | None = Field(
        None, description="privacy ledger: largest composed ε a dataset may spend (a number, or dataset → number)"
    )
    require_signature: bool | None = Field(
        None, description="the result file must be signed by the key configured here (PRIVACY_AUDIT_SIGNING_KEY / "
                          "PRIVACY_AUDIT_VERIFY_KEY; docs/gate.md 'Integrity'); default: required when a key is configured"
    )

    @field_validator("max_total_epsilon")
    @classmethod
    def _total_epsilon(cls, value: Any) -> Any:
        limits = value.values() if isinstance(value, dict) else [] if value is None else [value]
        for limit in limits:
            if not (math.isfinite(limit) and limit > 0):
                raise ValueError(f"max_total_epsilon must be a finite number > 0, got {limit!r}")
        return value

    def total_epsilon_limit(self, dataset: str) -> float | None:
        """The policy's max_total_epsilon for `dataset` (None: no limit for it)."""
        if isinstance(self.max_total_epsilon, dict):
            return self.max_total_epsilon.get(dataset)
        return self.max_total_epsilon

    @field_validator("max_tpr_at_fpr", mode="before")
    @classmethod
    def _fpr_levels(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        levels: dict[float, Any] = {}
        for key, limit in value.items():
            level = _number_from_key(key)
            if level is None:
                raise ValueError(f"FPR level {key!r} is not a number")
            if not 0 < level < 1:
                raise ValueError(f"FPR level {key!r} must be in (0, 1)")
            if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not 0 <= limit <= 1:
                raise ValueError(f"TPR limit at FPR {key!r} must be a number in [0, 1], got {limit!r}")
            levels[level] = float(limit)
        return levels

    def merged_with(self, override: "PolicyRules") -> "PolicyRules":
        """These rules with every rule the override sets replaced by its value."""
        return self.model_copy(update=override.model_dump(exclude_none=True))

    def set_rules(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class PolicyOverride(_Strict):
    epsilon: float = Field(description="target ε the override applies to; inf (.inf, 'inf') = non-private")
    rules: PolicyRules

    @field_validator("rules")
    @classmethod
    def _no_dataset_rules(cls, value: PolicyRules) -> PolicyRules:
        if value.max_total_epsilon is not None:
            raise ValueError("max_total_epsilon is per dataset, not per target ε: set it under 'rules'")
        return value

    @field_validator("epsilon", mode="before")
    @classmethod
    def _epsilon(cls, value: Any) -> Any:
        if value is None:  # results.json writes the non-private target as null
            return math.inf
        if isinstance(value, str) and value.strip().lower() in _INF_WORDS:
            return math.inf
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not value > 0:
            raise ValueError(f"ε must be > 0 or inf, got {value!r}")
        return value


class Policy(_Strict):
    name: str | None = Field(None, description="shown in reports; defaults to the file name")
    description: str | None = None
    rules: PolicyRules = Field(default_factory=PolicyRules)
    overrides: list[PolicyOverride] = Field(default_factory=list)
    path: str | None = Field(None, exclude=True, description="file it was read from (set by load_policy)")

    @field_validator("overrides")
    @classmethod
    def _distinct_epsilons(cls, value: list[PolicyOverride]) -> list[PolicyOverride]:
        seen: list[float] = []
        for override in value:
            if any(_same_epsilon(override.epsilon, other) for other in seen):
                raise ValueError(f"two overrides for ε = {_eps_text(override.epsilon)}")
            seen.append(override.epsilon)
        return value

    @property
    def display_name(self) -> str:
        return self.name or (Path(self.path).stem if self.path else "policy")

    def rules_for(self, epsilon_target: float | None) -> PolicyRules:
        epsilon = math.inf if epsilon_target is None else float(epsilon_target)
        for override in self.overrides:
            if _same_epsilon(override.epsilon, epsilon):
                return self.rules.merged_with(override.rules)
        return self.rules


@dataclass(frozen=True)
class RuleCheck:
    """One rule applied to one target (and attack / FPR level). Not applicable ⇒ passed, never a failure."""

    rule: str
    target_label: str
    attack: str | None
    measured: float | bool | str | None
    limit: float | bool | str | None
    passed: bool
    message: str
    applicable: bool = True

    @property
    def status(self) -> Literal["pass", "fail", "not applicable"]:
        if not self.applicable:
            return "not applicable"
        return "pass" if self.passed else "fail"

    def as_rule(self) -> dict[str, Any]:
        """This check as an entry of `verdict.rules` (passed / failed / not_applicable, with its figure and
        threshold): a rule is never a claim, so it is counted apart from the claims (docs/verdict.md)."""
        def plain(value: Any) -> Any:
            return None if isinstance(value, float) and not math.isfinite(value) else value
        return {"rule": self.rule, "subject": self.target_label, "attack": self.attack,
                "status": "not_applicable" if not self.applicable else "passed" if self.passed else "failed",
                "figure": plain(self.measured), "threshold": plain(self.limit), "message": self.message}


@dataclass(frozen=True)
class PolicyEvaluation:
    passed: bool
    checks: list[RuleCheck]
    policy_name: str
    policy_path: str | None = None
    failures: list[RuleCheck] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "failures", [c for c in self.checks if c.applicable and not c.passed])

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (e.g. `results["policy_evaluation"]`, which the HTML report renders)."""
        return {
            "policy_name": self.policy_name,
            "policy_path": self.policy_path,
            "passed": self.passed,
            "checks": [{**asdict(c), "status": c.status} for c in self.checks],
        }


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
        known = ", ".join(PolicyRules.model_fields) if "rules" in first["loc"] else "name, description, rules, overrides"
        message = f"unknown field (known: {known})"
    elif first["type"] in ("float_type", "bool_type", "int_type", "string_type", "dict_type", "list_type",
                           "model_type", "literal_error"):
        received = first.get("input")
        message = f"{message} (got {shorten(received, 80)})"
        if isinstance(received, str) and _number_from_key(received) is not None:
            message += "; write numbers unquoted, with a dot before an exponent (1.0e-3: YAML reads 1e-3 as text)"
    extra = f" (and {len(error.errors()) - 1} more problem(s))" if len(error.errors()) > 1 else ""
    return AuditInputError(f"{source}: field '{field_name}'", message + extra)


def load_results(path: str | Path, *, follow: bool = True) -> dict[str, Any]:
    """Read a results.json and validate it against audit/schema/results.schema.json.

    AuditInputError names the file and the JSON path of the first problem (e.g. a missing
    `targets[0].attacks[0].auc`).
    """
    from audit.machinery.input_files import load_json_file

    path = Path(path)
    where = f"results file '{path}'"
    results = load_json_file(path, where, follow=follow)  # NaN/Infinity, duplicate keys, deep nesting, FIFOs refused
    validate_results(results, source=where)
    return results


def validate_results(results: Any, *, source: str = "results") -> None:
    """Raise AuditInputError when `results` does not follow results.json schema_version 1, 2 or 3.

    Version 2 (this version) adds the verdict status, each bound's assumption and scope and the PLD
    interval; version 1 files are still read (their verdict is recomputed from their numbers).
    """
    if not isinstance(results, dict):
        raise AuditInputError(source, "must be a JSON object (a results.json written by privacy-audit)")
    version = results.get("schema_version")
    if isinstance(version, bool) or version not in READABLE_SCHEMA_VERSIONS:
        raise AuditInputError(
            f"{source}: field 'schema_version'",
            f"expected 1, 2 or 3, got {version!r} (written by another privacy-audit version?)",
        )
    import jsonschema

    schema = json.loads(RESULTS_SCHEMA_PATH.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    try:
        errors = sorted(validator.iter_errors(results), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    except RecursionError:
        raise AuditInputError(source, "is nested too deeply to be a results file") from None
    if errors:
        first = errors[0]
        location = clip(_json_path(first.absolute_path) or "(top level)", 80)
        extra = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        # jsonschema's message quotes the offending value whole: cut it (it can be megabytes).
        raise AuditInputError(f"{source}: field '{location}'", clip(first.message) + extra)


def _json_path(parts) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (("." if out else "") + str(part))
    return out


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
    model_rules = ("max_auc", "max_tpr_at_fpr", "max_epsilon_lb", "fail_on_violation", "required_accountant")
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
    epsilons += [_target_epsilon(s, f"synthetic[{i}]", reader) if "epsilon_target" in s else None
                 for i, s in enumerate(synthetic)]
    for override in policy.overrides:
        if not any(_same_epsilon(override.epsilon, e) for e in epsilons):
            checks.append(_not_applicable(
                f"overrides[ε = {_eps_text(override.epsilon)}]", _eps_label(override.epsilon),
                "this override matches no target or synthetic entry in the results",
            ))

    checks += _ledger_checks(policy, results, reader)
    checks += _signature_checks(policy, results)
    passed = all(check.passed for check in checks)
    return PolicyEvaluation(passed=passed, checks=checks, policy_name=policy.display_name, policy_path=policy.path)


def _ledger_checks(policy: Policy, results: dict[str, Any], reader: "_Reader") -> list[RuleCheck]:
    """max_total_epsilon against the `ledger` section a recording command wrote (audit/ledger)."""
    if policy.rules.max_total_epsilon is None:
        return []
    section = results.get("ledger")
    if not isinstance(section, dict):
        return [_not_applicable("max_total_epsilon", "privacy ledger", "nothing was recorded in a ledger "
                                "(run with --ledger URI --dataset NAME)")]
    dataset = reader.text(section, "dataset", "ledger")
    label = f"dataset '{clip(dataset, 100)}'"
    limit = policy.rules.total_epsilon_limit(dataset)
    if limit is None:
        return [_not_applicable("max_total_epsilon", label, "the policy sets no limit for this dataset")]
    if section.get("epsilon_spent") is None and not section.get("epsilon_spent_unbounded"):
        return [_not_applicable("max_total_epsilon", label, clip(str(section.get("reason") or "no spent figure")))]
    spent = math.inf if section.get("epsilon_spent_unbounded") else reader.number(section, "epsilon_spent", "ledger")
    what = "composed ε " + ("after the release" if section.get("recorded") else "the refused release would have reached")
    check = _compare("max_total_epsilon", label, None, spent, limit, at_most=True, what=what,
                     detail=f"{section.get('method')}, δ {section.get('delta')}")
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
    why = {"valid": "signed by the configured key",
           "unsigned": "not signed: not written by a runner holding the key",
           "invalid": "signed, but not by the configured key (or the signature is forged)",
           "not checked": "no key is configured here to check a signature (set PRIVACY_AUDIT_SIGNING_KEY or "
                          "PRIVACY_AUDIT_VERIFY_KEY)"}.get(signature, signature)
    return [RuleCheck("require_signature", "result file", None, signature, "valid", signature == "valid",
                      f"result file: {why}")]


SINGLE_AUDIT_KINDS = tuple(AUDIT_KINDS)  # declared in audit/machinery/audit_kinds.py
_MODEL_AND_DATA_RULES = ("max_auc", "max_tpr_at_fpr", "required_accountant", "max_dcr_share", "min_nndr_p10")


def evaluate_policy_on_audit(policy: Policy, kind: str, result: dict[str, Any], built_in: dict[str, Any], *,
                             source: str = "results") -> PolicyEvaluation:
    """The rules of `policy` that apply to one pre-declared audit (pure; no I/O).

    For `canary-audit`, `mechanism-audit`, `whitebox-audit`, `conformance` and `accountant-check` results
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
            checks.append(_compare("max_epsilon_lb", label, None, bound, rules.max_epsilon_lb, at_most=True,
                                   what="proven empirical ε lower bound", detail=str(result.get("mode") or "")))
        else:
            checks.append(_not_applicable("max_epsilon_lb", label, f"a {kind} result has no ε lower bound"))
    if rules.fail_on_violation is not False:
        failed = built_in.get("status") == "fail"
        reasons = "; ".join(map(str, built_in.get("reasons") or []))
        checks.append(RuleCheck("fail_on_violation", label, None, str(built_in.get("status")), "not fail", not failed,
                                f"{label}: built-in verdict {built_in.get('status')}" + (f": {reasons}" if reasons else "")))
    for rule in _MODEL_AND_DATA_RULES:
        if _rule_anywhere(policy, rule):
            checks.append(_not_applicable(rule, label, f"a {kind} result has no attacks on trained targets or "
                                          "synthetic data"))
    checks += _ledger_checks(policy, result, reader)
    checks += _signature_checks(policy, result)
    passed = all(check.passed for check in checks)
    return PolicyEvaluation(passed=passed, checks=checks, policy_name=policy.display_name, policy_path=policy.path)


def _check_target(policy: Policy, target: Any, where: str, reader: "_Reader") -> list[RuleCheck]:
    if not isinstance(target, dict):
        raise AuditInputError(f"{reader.source}: field '{where}'", "expected an object")
    epsilon = _target_epsilon(target, where, reader)
    rules = policy.rules_for(epsilon)
    label = _eps_label(epsilon)
    checks: list[RuleCheck] = []

    if rules.max_auc is not None or rules.max_tpr_at_fpr:
        for a_index, attack in enumerate(reader.sequence(target, "attacks", where)):
            checks += _check_attack(rules, attack, f"{where}.attacks[{a_index}]", label, reader)

    if rules.max_epsilon_lb is not None and reader.optional_number(target, "epsilon_lb_best", where) is None:
        checks.append(_not_applicable(
            "max_epsilon_lb", label, "no ε lower bound is proven for this setting (membership not a fair coin flip)",
        ))
    elif rules.max_epsilon_lb is not None:
        best = reader.number(target, "epsilon_lb_best", where)
        checks.append(_compare(
            "max_epsilon_lb", label, None, best, rules.max_epsilon_lb, at_most=True,
            what="best sound empirical ε lower bound", detail=str(target.get("epsilon_lb_best_method") or ""),
        ))

    if rules.fail_on_violation is not False:  # default on: a violation means the DP claim is false
        accountant_eps = reader.optional_number(target, "epsilon_accountant", where)
        violation = reader.boolean(target, "violation", where)
        best = reader.optional_number(target, "epsilon_lb_best", where)
        method = target.get("epsilon_lb_best_method")
        how = f" ({method})" if method else ""
        if accountant_eps is None and not violation:
            checks.append(_not_applicable(
                "fail_on_violation", label, "no accountant ε to compare with (non-private target)",
            ))
        else:
            relation = "exceeds" if violation else "does not exceed"
            text = (f"{label}: proven empirical ε lower bound {_fmt(best)}{how} {relation} the accountant's "
                    f"ε {_fmt(accountant_eps)} (Holm-corrected one-run tests)")
            checks.append(RuleCheck(
                "fail_on_violation", label, None, best, accountant_eps, not violation,
                text + (" (violation: the claimed ε is contradicted)" if violation else ""),
            ))

    if rules.required_accountant is not None:
        used = target.get("accountant")
        if epsilon is None or math.isinf(epsilon):
            checks.append(_not_applicable(
                "required_accountant", label, "non-private target: no accountant applies",
            ))
        elif used is None or used == "claimed":
            # audit-scores / audit-model: the ε is the user's claim, no accountant of this tool computed it.
            checks.append(_not_applicable(
                "required_accountant", label, "the claimed ε was given by the user, not computed by an accountant",
            ))
        else:
            used = reader.text(target, "accountant", where)
            ok = used == rules.required_accountant
            checks.append(RuleCheck(
                "required_accountant", label, None, used, rules.required_accountant, ok,
                f"{label}: claimed ε accounted with '{used}'"
                + ("" if ok else f", the policy requires '{rules.required_accountant}'"),
            ))
    return checks


def _check_attack(rules: PolicyRules, attack: Any, where: str, label: str, reader: "_Reader") -> list[RuleCheck]:
    if not isinstance(attack, dict):
        raise AuditInputError(f"{reader.source}: field '{where}'", "expected an object")
    name = reader.text(attack, "name", where)
    return _attack_limits(rules, attack, where, label, name, reader)


def _attack_limits(
    rules: PolicyRules, attack: dict[str, Any], where: str, label: str, name: str, reader: "_Reader"
) -> list[RuleCheck]:
    checks = []
    if rules.max_auc is not None:
        auc = reader.number(attack, "auc", where)
        checks.append(_compare("max_auc", label, name, auc, rules.max_auc, at_most=True, what="AUC"))
    for level, limit in sorted((rules.max_tpr_at_fpr or {}).items()):
        rule = f"max_tpr_at_fpr[{level:g}]"
        table = reader.mapping(attack, "tpr_at_fpr", where)
        key = next((k for k in table if _number_from_key(k) is not None
                    and math.isclose(_number_from_key(k), level, rel_tol=1e-9)), None)
        if key is None:
            reported = ", ".join(sorted(map(str, table), key=lambda k: _number_from_key(k) or 0)) or "none"
            checks.append(_not_applicable(
                rule, label, f"the results report TPR at FPR {reported} only, not at {level:g}", attack=name,
            ))
            continue
        tpr = reader.number(table, key, f"{where}.tpr_at_fpr")
        checks.append(_compare(rule, label, name, tpr, limit, at_most=True, what=f"TPR at FPR {level:g}"))
    return checks


def _check_synthetic(policy: Policy, entry: Any, where: str, reader: "_Reader") -> list[RuleCheck]:
    if not isinstance(entry, dict):
        raise AuditInputError(f"{reader.source}: field '{where}'", "expected an object")
    generator = entry.get("generator")
    if generator is not None and not isinstance(generator, str):
        raise reader._wrong(where, "generator", "a string", generator)
    # No epsilon_target (or null): a generator without a DP claim, matched by an ε = ∞ override.
    epsilon = _target_epsilon(entry, where, reader) if "epsilon_target" in entry else None
    rules = policy.rules_for(epsilon)
    label = f"synthetic '{generator or where}', {_eps_label(epsilon)}"
    checks: list[RuleCheck] = []

    for rule, block, key, what, at_most in (
        ("max_dcr_share", "dcr", "dcr_share", "DCR share (synthetic rows closer to train than to holdout)", True),
        ("min_nndr_p10", "nndr", "p10", "NNDR 10th percentile", False),
    ):
        limit = getattr(rules, rule)
        if limit is None:
            continue
        section = entry.get(block)
        if not isinstance(section, dict):
            checks.append(_not_applicable(rule, label, f"this entry has no '{block}' results"))
            continue
        if section.get(key, 0) is None:  # e.g. NNDR percentiles of an empty synthetic table
            checks.append(_not_applicable(rule, label, f"'{block}.{key}' was not computed (null)"))
            continue
        value = reader.number(section, key, f"{where}.{block}")
        checks.append(_compare(rule, label, None, value, limit, at_most=at_most, what=what))

    mia = entry.get("mia")
    wants_mia = rules.max_auc is not None or rules.max_tpr_at_fpr or rules.max_epsilon_lb is not None
    if wants_mia and isinstance(mia, dict):
        attack_name = str(mia.get("name") or "distance")
        checks += _attack_limits(rules, mia, f"{where}.mia", label, attack_name, reader)
        if rules.max_epsilon_lb is not None:
            bounds = reader.mapping(mia, "epsilon_lb", f"{where}.mia")
            # A bound reported as null was not computed (e.g. one-run without coin-flip membership).
            sound = {m: reader.number(bounds, m, f"{where}.mia.epsilon_lb") for m in _SOUND_BOUNDS
                     if bounds.get(m) is not None}
            if not sound:
                checks.append(_not_applicable(
                    "max_epsilon_lb", label, "the distance attack reports no sound ε lower bound", attack=attack_name,
                ))
            else:
                method, best = max(sound.items(), key=lambda item: item[1])
                checks.append(_compare(
                    "max_epsilon_lb", label, attack_name, best, rules.max_epsilon_lb, at_most=True,
                    what="best sound empirical ε lower bound", detail=f"{attack_name}/{method}",
                ))
    elif wants_mia:
        for rule in ("max_auc", "max_epsilon_lb"):
            if getattr(rules, rule) is not None:
                checks.append(_not_applicable(rule, label, "this entry has no distance-attack ('mia') results"))
    return checks


def _compare(
    rule: str, label: str, attack: str | None, measured: float, limit: float, *, at_most: bool, what: str,
    detail: str = "",
) -> RuleCheck:
    passed = measured <= limit if at_most else measured >= limit
    who = f"{label}, attack {attack}" if attack else label
    if passed:
        relation = "≤" if at_most else "≥"
    else:
        relation = ">" if at_most else "<"
    detail = f" ({detail})" if detail else ""
    return RuleCheck(rule, label, attack, measured, limit, passed,
                     f"{who}: {what} = {_fmt(measured)}{detail} {relation} {_fmt(limit)} ({rule})")


def _not_applicable(rule: str, label: str, why: str, *, attack: str | None = None) -> RuleCheck:
    who = f"{label}, attack {attack}" if attack else label
    return RuleCheck(rule, label, attack, None, None, True, f"{who}: {rule} not applicable: {why}", applicable=False)


def _rule_anywhere(policy: Policy, rule: str) -> bool:
    return getattr(policy.rules, rule) is not None or any(getattr(o.rules, rule) is not None for o in policy.overrides)


class _Reader:
    """Typed access to results fields; a missing or mistyped field is an AuditInputError naming it."""

    def __init__(self, source: str):
        self.source = source

    def _get(self, mapping: dict[str, Any], key: str, where: str, expected: str) -> Any:
        path = f"{where}.{key}" if where else key
        if key not in mapping:
            raise AuditInputError(f"{self.source}: field '{path}'", f"missing; expected {expected}")
        return mapping[key]

    def _wrong(self, where: str, key: str, expected: str, value: Any) -> AuditInputError:
        path = f"{where}.{key}" if where else key
        return AuditInputError(f"{self.source}: field '{path}'", f"expected {expected}, got {shorten(value, 80)}")

    def number(self, mapping: dict[str, Any], key: str, where: str) -> float:
        value = self._get(mapping, key, where, "a number")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise self._wrong(where, key, "a number", value)
        return float(value)

    def optional_number(self, mapping: dict[str, Any], key: str, where: str) -> float | None:
        value = self._get(mapping, key, where, "a number or null")
        if value is None:
            return None
        return self.number(mapping, key, where)

    def boolean(self, mapping: dict[str, Any], key: str, where: str) -> bool:
        value = self._get(mapping, key, where, "true or false")
        if not isinstance(value, bool):
            raise self._wrong(where, key, "true or false", value)
        return value

    def text(self, mapping: dict[str, Any], key: str, where: str) -> str:
        value = self._get(mapping, key, where, "a string")
        if not isinstance(value, str):
            raise self._wrong(where, key, "a string", value)
        return value

    def sequence(self, mapping: dict[str, Any], key: str, where: str) -> list[Any]:
        value = self._get(mapping, key, where, "a list")
        if not isinstance(value, list):
            raise self._wrong(where, key, "a list", value)
        return value

    def mapping(self, mapping: dict[str, Any], key: str, where: str) -> dict[str, Any]:
        value = self._get(mapping, key, where, "an object")
        if not isinstance(value, dict):
            raise self._wrong(where, key, "an object", value)
        return value


def _target_epsilon(entry: dict[str, Any], where: str, reader: _Reader) -> float | None:
    value = reader._get(entry, "epsilon_target", where, "a number > 0 or null (non-private)")
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() in _INF_WORDS:
        return math.inf
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise reader._wrong(where, "epsilon_target", "a number > 0 or null (non-private)", value)
    return float(value)


def _number_from_key(key: Any) -> float | None:
    if isinstance(key, bool):
        return None
    if isinstance(key, (int, float)):
        return float(key)
    if isinstance(key, str):
        try:
            return float(key)
        except ValueError:
            return None
    return None


def _same_epsilon(a: float | None, b: float | None) -> bool:
    a = math.inf if a is None else a
    b = math.inf if b is None else b
    if math.isinf(a) or math.isinf(b):
        return math.isinf(a) and math.isinf(b)
    return math.isclose(a, b, rel_tol=1e-9)


def _eps_text(epsilon: float | None) -> str:
    return "∞" if epsilon is None or math.isinf(epsilon) else f"{epsilon:g}"


def _eps_label(epsilon: float | None) -> str:
    return f"ε = {_eps_text(epsilon)}"


def _fmt(value: float | None) -> str:
    if value is None:
        return "—"
    if math.isinf(value):
        return "∞"
    return f"{value:.4g}"
