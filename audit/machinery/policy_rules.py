"""The policy's rules applied to one subject of a results file (a target and its attacks, a synthetic
release): each rule's measured value read strictly, compared with its limit, or said not applicable.
"""

from __future__ import annotations

import math
from typing import Any

from audit.errors import AuditInputError
from audit.machinery.input_files import shorten
from audit.machinery.leakage import planted_canaries
from audit.machinery.policy_model import (
    _INF_WORDS,
    Policy,
    PolicyRules,
    RuleCheck,
    _eps_text,
    _number_from_key,
)

# Sound estimators only: the GDP number is an estimate under an assumption and never gates.
# Proven for one model / one release (coin-flip membership); Clopper-Pearson over one model's
# candidates assumes independent trials and never gates (audit.statistics.attack_evaluation).


def _sound_bounds() -> tuple[str, ...]:
    """The attack-row bounds that may decide (the registry, audit/statistics/estimators.py; imported on
    use so that reading a policy stays light)."""
    from audit.statistics.estimators import proven_attack_bounds

    return proven_attack_bounds()


def _check_target(policy: Policy, target: Any, where: str, reader: _Reader) -> list[RuleCheck]:
    if not isinstance(target, dict):
        raise AuditInputError(f"{reader.source}: field '{where}'", "expected an object")
    epsilon = _target_epsilon(target, where, reader)
    rules = policy.rules_for(epsilon)
    label = _eps_label(epsilon)
    checks: list[RuleCheck] = []

    if rules.max_auc is not None or rules.max_tpr_at_fpr or rules.max_canary_tpr_at_fpr:
        attacks = reader.sequence(target, "attacks", where)
        for a_index, attack in enumerate(attacks):
            checks += _check_attack(rules, attack, f"{where}.attacks[{a_index}]", label, reader)
        if rules.max_canary_tpr_at_fpr and not any(isinstance(a, dict) and planted_canaries(a) for a in attacks):
            checks += [
                _not_applicable(
                    f"max_canary_tpr_at_fpr[{level:g}]",
                    label,
                    "this target has no rows of planted canaries (`run --preset llm` plants them)",
                )
                for level in sorted(rules.max_canary_tpr_at_fpr)
            ]

    if rules.max_epsilon_lb is not None and reader.optional_number(target, "epsilon_lb_best", where) is None:
        checks.append(
            _not_applicable(
                "max_epsilon_lb",
                label,
                "no ε lower bound is proven for this setting (membership not a fair coin flip)",
            )
        )
    elif rules.max_epsilon_lb is not None:
        best = reader.number(target, "epsilon_lb_best", where)
        checks.append(
            _compare(
                "max_epsilon_lb",
                label,
                None,
                best,
                rules.max_epsilon_lb,
                at_most=True,
                what="best sound empirical ε lower bound",
                detail=str(target.get("epsilon_lb_best_method") or ""),
            )
        )

    if rules.fail_on_violation is not False:  # default on: a violation means the DP claim is false
        accountant_eps = reader.optional_number(target, "epsilon_accountant", where)
        violation = reader.boolean(target, "violation", where)
        best_bound = reader.optional_number(target, "epsilon_lb_best", where)
        method = target.get("epsilon_lb_best_method")
        how = f" ({method})" if method else ""
        if accountant_eps is None and not violation:
            checks.append(
                _not_applicable(
                    "fail_on_violation",
                    label,
                    "no accountant ε to compare with (non-private target)",
                )
            )
        else:
            relation = "exceeds" if violation else "does not exceed"
            text = (
                f"{label}: proven empirical ε lower bound {_fmt(best_bound)}{how} {relation} the accountant's "
                f"ε {_fmt(accountant_eps)} (Holm-corrected one-run tests)"
            )
            checks.append(
                RuleCheck(
                    "fail_on_violation",
                    label,
                    None,
                    best_bound,
                    accountant_eps,
                    not violation,
                    text + (" (violation: the claimed ε is contradicted)" if violation else ""),
                )
            )

    if rules.required_accountant is not None:
        used = target.get("accountant")
        if epsilon is None or math.isinf(epsilon):
            checks.append(
                _not_applicable(
                    "required_accountant",
                    label,
                    "non-private target: no accountant applies",
                )
            )
        elif used is None or used == "claimed":
            # audit-scores / audit-model: the ε is the user's claim, no accountant of this tool computed it.
            checks.append(
                _not_applicable(
                    "required_accountant",
                    label,
                    "the claimed ε was given by the user, not computed by an accountant",
                )
            )
        else:
            used = reader.text(target, "accountant", where)
            ok = used == rules.required_accountant
            checks.append(
                RuleCheck(
                    "required_accountant",
                    label,
                    None,
                    used,
                    rules.required_accountant,
                    ok,
                    f"{label}: claimed ε accounted with '{used}'"
                    + ("" if ok else f", the policy requires '{rules.required_accountant}'"),
                )
            )
    return checks


def _check_attack(rules: PolicyRules, attack: Any, where: str, label: str, reader: _Reader) -> list[RuleCheck]:
    if not isinstance(attack, dict):
        raise AuditInputError(f"{reader.source}: field '{where}'", "expected an object")
    name = reader.text(attack, "name", where)
    if planted_canaries(attack):
        # max_auc / max_tpr_at_fpr bound what an attack finds about the training records. A row of planted
        # canaries is a test of the claim (fail_on_violation, max_epsilon_lb read its bound): at ε = ∞ it is the
        # run's power control, whose canaries are meant to be found, and a limit on it would fail every audit
        # with power. A release criterion on the planted secrets themselves is its own rule,
        # max_canary_tpr_at_fpr, which a policy sets where it means it (usually for the DP targets only).
        why = (
            "the row scores canaries the audit planted, not the training records (it measures the audit's power; "
            "fail_on_violation and max_epsilon_lb read its ε bound)"
        )
        return [
            _not_applicable(rule, label, why, attack=name)
            for rule in (["max_auc"] if rules.max_auc is not None else [])
            + [f"max_tpr_at_fpr[{level:g}]" for level in sorted(rules.max_tpr_at_fpr or {})]
        ] + _tpr_limits(
            "max_canary_tpr_at_fpr",
            rules.max_canary_tpr_at_fpr or {},
            attack,
            where,
            label,
            name,
            reader,
            what="share of the planted canaries identified (TPR) at FPR",
        )
    return _attack_limits(rules, attack, where, label, name, reader)


def _attack_limits(
    rules: PolicyRules, attack: dict[str, Any], where: str, label: str, name: str, reader: _Reader
) -> list[RuleCheck]:
    checks = []
    if rules.max_auc is not None:
        auc = reader.number(attack, "auc", where)
        checks.append(_compare("max_auc", label, name, auc, rules.max_auc, at_most=True, what="AUC"))
    checks += _tpr_limits(
        "max_tpr_at_fpr", rules.max_tpr_at_fpr or {}, attack, where, label, name, reader, what="TPR at FPR"
    )
    return checks


def _tpr_limits(
    rule_name: str,
    limits: dict[float, float],
    attack: dict[str, Any],
    where: str,
    label: str,
    name: str,
    reader: _Reader,
    *,
    what: str,
) -> list[RuleCheck]:
    """One check per FPR level of a `{level: largest TPR}` rule on one attack row's `tpr_at_fpr`."""
    checks = []
    for level, limit in sorted(limits.items()):
        rule = f"{rule_name}[{level:g}]"
        if limit >= 1:
            # A TPR limit of 1 cannot fail: it is how an override lifts the rule for one target ε (an override
            # changes a rule, it cannot remove it). Listed as not applicable, so that no report says "passed"
            # of a row whose attack finds every member (the ε = ∞ power controls of the llm run).
            checks.append(_not_applicable(rule, label, "the policy sets no limit here (a TPR limit of 1)", attack=name))
            continue
        table = reader.mapping(attack, "tpr_at_fpr", where)
        key = next(
            (
                k
                for k in table
                if (number := _number_from_key(k)) is not None and math.isclose(number, level, rel_tol=1e-9)
            ),
            None,
        )
        if key is None:
            reported = ", ".join(sorted(map(str, table), key=lambda k: _number_from_key(k) or 0)) or "none"
            checks.append(
                _not_applicable(
                    rule,
                    label,
                    f"the results report TPR at FPR {reported} only, not at {level:g}",
                    attack=name,
                )
            )
            continue
        tpr = reader.number(table, key, f"{where}.tpr_at_fpr")
        checks.append(_compare(rule, label, name, tpr, limit, at_most=True, what=f"{what} {level:g}"))
    return checks


def _check_synthetic(policy: Policy, entry: Any, where: str, reader: _Reader) -> list[RuleCheck]:
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
            sound = {
                m: reader.number(bounds, m, f"{where}.mia.epsilon_lb")
                for m in _sound_bounds()
                if bounds.get(m) is not None
            }
            if not sound:
                checks.append(
                    _not_applicable(
                        "max_epsilon_lb",
                        label,
                        "the distance attack reports no sound ε lower bound",
                        attack=attack_name,
                    )
                )
            else:
                method, best = max(sound.items(), key=lambda item: item[1])
                checks.append(
                    _compare(
                        "max_epsilon_lb",
                        label,
                        attack_name,
                        best,
                        rules.max_epsilon_lb,
                        at_most=True,
                        what="best sound empirical ε lower bound",
                        detail=f"{attack_name}/{method}",
                    )
                )
    elif wants_mia:
        for rule in ("max_auc", "max_epsilon_lb"):
            if getattr(rules, rule) is not None:
                checks.append(_not_applicable(rule, label, "this entry has no distance-attack ('mia') results"))
    return checks


def _compare(
    rule: str,
    label: str,
    attack: str | None,
    measured: float,
    limit: float,
    *,
    at_most: bool,
    what: str,
    detail: str = "",
) -> RuleCheck:
    passed = measured <= limit if at_most else measured >= limit
    who = f"{label}, attack {attack}" if attack else label
    if passed:
        relation = "≤" if at_most else "≥"
    else:
        relation = ">" if at_most else "<"
    detail = f" ({detail})" if detail else ""
    return RuleCheck(
        rule,
        label,
        attack,
        measured,
        limit,
        passed,
        f"{who}: {what} = {_fmt(measured)}{detail} {relation} {_fmt(limit)} ({rule})",
    )


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


def _eps_label(epsilon: float | None) -> str:
    return f"ε = {_eps_text(epsilon)}"


def _fmt(value: float | None) -> str:
    if value is None:
        return "—"
    if math.isinf(value):
        return "∞"
    return f"{value:.4g}"
