"""Reading a single audit's result (`<kind>.json`) back for `gate`: validated, and its flags checked
against its numbers.

A results file is input: it may have been edited. `gate` must not pass a file that says
`violation: false` next to a bound of 100 against a claim of 1, nor one that checks nothing, nor
one of an unknown schema version. So, before the verdict is decided:

1. the file is read by the strict JSON reader (regular file, bounded, no NaN, no duplicate keys);
2. it is validated against the definition of its kind in the shipped schema
   `audit/schema/audit_result.schema.json` (types, ranges, at least one check or point);
3. every flag the verdict reads is recomputed from the numbers it summarises and must agree:
   `violation` = (bound > claim) for an (ε, δ) bound, = `profile_test.refuted` = (p ≤ 1 − confidence)
   for a profile test; an own verdict `fail` only with a violation; an accountant point's label
   from its reported ε and PLD interval; `passed` from the checks. A disagreement is exit 2
   naming the field ("edited after the audit wrote it?"): the verdict never rests on a flag alone.

The numbers themselves are the audit's; re-deriving a bound from raw counts is the job of the
audit that wrote it (their inputs — trained models — are not in the file).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from audit.errors import AuditInputError
from audit.machinery.input_files import clip, load_json_file

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schema" / "audit_result.schema.json"
_TOLERANCE = 1e-9


def _schema_error(kind: str, result: Any, where: str) -> None:
    import jsonschema

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    wrapper = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{kind}"}
    validator = jsonschema.Draft202012Validator(wrapper)
    try:
        errors = sorted(validator.iter_errors(result), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    except RecursionError:
        raise AuditInputError(where, "is nested too deeply to be an audit result") from None
    if errors:
        first = errors[0]
        location = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first.absolute_path).lstrip(".")
        extra = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise AuditInputError(f"{where}: field '{clip(location or '(top level)', 80)}'", clip(first.message) + extra)


def _contradiction(where: str, field: str, message: str) -> AuditInputError:
    return AuditInputError(f"{where}: field '{field}'", f"{message}: the file's flags contradict its numbers "
                           "(edited after the audit wrote it?)")


def _own_status(result: dict[str, Any]) -> str | None:
    own = result.get("audit_verdict") if isinstance(result.get("audit_verdict"), dict) else result.get("verdict")
    return own.get("status") if isinstance(own, dict) else None


def check_flags_against_numbers(kind: str, result: dict[str, Any], where: str) -> None:
    """Raise AuditInputError when a flag the verdict reads disagrees with the numbers (see module doc)."""
    if kind in ("canary-audit", "mechanism-audit", "whitebox-audit"):
        claim, bound = float(result["claimed_epsilon"]), float(result["epsilon_lower_bound"])
        test = result.get("profile_test")
        if isinstance(test, dict):
            refuted = test["p_value"] <= 1 - test["confidence"] + _TOLERANCE
            if bool(test["refuted"]) != refuted:
                raise _contradiction(where, "profile_test.refuted", f"is {test['refuted']} but p = {test['p_value']:.3g} "
                                     f"at confidence {test['confidence']:g} means {refuted}")
            violation = refuted
        elif kind == "whitebox-audit":
            # Decided by its checks (p-values re-decided by Holm); its sound (ε, δ) bound is one of
            # them: above the claim, that check and the audit must have failed.
            violation = None
            if bound > claim:
                rows = (result.get("verdict") or {}).get("checks") or []
                if not result["violation"] or not any(isinstance(r, dict) and r.get("failed") for r in rows):
                    raise _contradiction(where, "violation", f"is {result['violation']} but the sound lower bound "
                                         f"{bound:.4g} exceeds the claimed ε {claim:.4g}")
        else:
            violation = bound > claim
        if violation is not None and bool(result["violation"]) != violation:
            raise _contradiction(where, "violation", f"is {result['violation']} but the lower bound {bound:.4g} vs the "
                                 f"claimed ε {claim:.4g} means {violation}" if not isinstance(test, dict) else
                                 f"is {result['violation']} but the profile test says refuted = {violation}")
        status = _own_status(result)
        if violation is not None and (status == "fail") != violation and status is not None:
            raise _contradiction(where, "verdict.status", f"is {status!r} but the audit's violation is {violation}")
        if violation is not None and result.get("status") is not None and (result["status"] == "fail") != violation:
            raise _contradiction(where, "status", f"is {result['status']!r} but the audit's violation is {violation}")
    elif kind == "accountant-check":
        from audit.dp_validation.accountant_check import classify

        margin = float(result["margin"])
        for index, point in enumerate(result["points"]):
            reported = point["reported"]
            if reported is None:
                if point["label"] not in ("loose", "invalid"):
                    raise _contradiction(where, f"points[{index}].label", f"is {point['label']!r} with no reported ε")
                continue
            lower, upper = float(point["pld_lower"]), float(point["pld_upper"])
            if lower > upper:
                raise AuditInputError(f"{where}: field 'points[{index}]'", "pld_lower is above pld_upper")
            label, _, _ = classify(float(reported), lower, upper, margin)
            if label != point["label"]:
                raise _contradiction(where, f"points[{index}].label", f"is {point['label']!r} but ε {reported:.4g} against "
                                     f"the PLD interval [{lower:.4g}, {upper:.4g}] is {label!r}")
        passed = not any(p["label"] in ("unsound", "invalid") for p in result["points"])
        if "passed" in result and bool(result["passed"]) != passed:
            raise _contradiction(where, "passed", f"is {result['passed']} but the points say {passed}")
    elif kind == "conformance":
        passed = all(c["passed"] for c in result["checks"])
        for field in ("passed",):
            if field in result and bool(result[field]) != passed:
                raise _contradiction(where, field, f"is {result[field]} but the checks say {passed}")
        if "violation" in result and bool(result["violation"]) == passed:
            raise _contradiction(where, "violation", f"is {result['violation']} but the checks say passed = {passed}")
        status = _own_status(result)
        if status is not None and (status == "fail") == passed:
            raise _contradiction(where, "verdict.status", f"is {status!r} but the checks say passed = {passed}")


def load_audit_result(path: Path, kind: str, *, follow: bool = True) -> dict[str, Any]:
    """A `<kind>.json` read strictly, validated against the shipped schema, its flags checked."""
    where = f"results file '{path}'"
    result = load_json_file(path, where, follow=follow)
    if not isinstance(result, dict):
        raise AuditInputError(where, f"must be a JSON object (a {kind}.json written by privacy-audit)")
    _schema_error(kind, result, where)
    check_flags_against_numbers(kind, result, where)
    for key in ("claimed_epsilon", "epsilon_lower_bound", "ceiling"):
        value = result.get(key)
        if isinstance(value, float) and not math.isfinite(value):  # unreachable from JSON; belt and braces
            raise AuditInputError(f"{where}: field '{key}'", "must be finite")
    return result
