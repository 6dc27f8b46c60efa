"""What a policy file is (pydantic models, strict: unknown keys refused) and what evaluating one gives: one
`RuleCheck` per rule and subject (passed / failed / not applicable), gathered in a `PolicyEvaluation`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

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
    max_canary_tpr_at_fpr: dict[float, float] | None = Field(
        None,
        description="FPR level in (0, 1) → largest allowed share of the audit's planted canaries identified at that "
        "FPR (TPR), per canary row and target: a release criterion on planted secrets (Carlini et al. 2019)",
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
        None,
        description="the result file must be signed by the key configured here (PRIVACY_AUDIT_SIGNING_KEY / "
        "PRIVACY_AUDIT_VERIFY_KEY; docs/gate.md 'Integrity'); default: required when a key is configured",
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

    @field_validator("max_tpr_at_fpr", "max_canary_tpr_at_fpr", mode="before")
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

    def merged_with(self, override: PolicyRules) -> PolicyRules:
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

        return {
            "rule": self.rule,
            "subject": self.target_label,
            "attack": self.attack,
            "status": "not_applicable" if not self.applicable else "passed" if self.passed else "failed",
            "figure": plain(self.measured),
            "threshold": plain(self.limit),
            "message": self.message,
        }


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
