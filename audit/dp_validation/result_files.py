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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit.errors import AuditInputError
from audit.machinery.audit_kinds import AUDIT_KINDS, load
from audit.machinery.audit_results import AccountantCheckResult, ConformanceResult
from audit.machinery.bound_results import (
    BoundAuditResult,
    CanaryAuditResult,
    MechanismAuditResult,
    WhiteboxAuditResult,
)
from audit.machinery.input_files import clip, load_json_file
from audit.machinery.result_integrity import IntegrityOutcome

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schema" / "audit_result.schema.json"
_TOLERANCE = 1e-9


def _schema_error(kind: str, result: Any, where: str) -> None:
    import jsonschema

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    declared = AUDIT_KINDS[kind]
    # A plug-in kind declares its definition inline; the shipped kinds' are the schema's `$defs`.
    defs = dict(schema["$defs"]) if declared.schema is None else {**schema["$defs"], kind: dict(declared.schema)}
    wrapper = {"$schema": schema["$schema"], "$defs": defs, "$ref": f"#/$defs/{declared.schema_def}"}
    validator = jsonschema.Draft202012Validator(wrapper)
    try:
        errors = sorted(
            validator.iter_errors(result), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path)))
        )
    except RecursionError:
        raise AuditInputError(where, "is nested too deeply to be an audit result") from None
    if errors:
        first = errors[0]
        location = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first.absolute_path).lstrip(".")
        extra = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise AuditInputError(f"{where}: field '{clip(location or '(top level)', 80)}'", clip(first.message) + extra)


def _contradiction(where: str, field: str, message: str) -> AuditInputError:
    return AuditInputError(
        f"{where}: field '{field}'",
        f"{message}: the file's flags contradict its numbers (edited after the audit wrote it?)",
    )


def _own_status(result: dict[str, Any]) -> str | None:
    own = result.get("audit_verdict") if isinstance(result.get("audit_verdict"), dict) else result.get("verdict")
    return own.get("status") if isinstance(own, dict) else None


_POWER_RANK = {"none": 0, "measured": 1, "control": 1, "proven": 2}


def canary_power(result: dict[str, Any]) -> dict[str, Any] | None:
    """canary-audit's power, from its mode and size (audit.dp_validation.mode_power)."""
    from audit.dp_validation.mode_power import canary_mode_power

    typed = CanaryAuditResult.from_json(result)
    return canary_mode_power(typed.mode_name, typed.planned_size)


def mechanism_power(result: dict[str, Any]) -> dict[str, Any] | None:
    """mechanism-audit's power, from its number of trials (audit.dp_validation.mode_power)."""
    from audit.dp_validation import mode_power

    trials = MechanismAuditResult.from_json(result).n_trials
    return mode_power.mechanism_power(trials if isinstance(trials, int) and not isinstance(trials, bool) else 0)


def whitebox_power(result: dict[str, Any]) -> dict[str, Any] | None:
    """whitebox-audit's power, from what it observed and its canaries (audit.dp_validation.mode_power)."""
    from audit.dp_validation.mode_power import whitebox_power_entry

    typed = WhiteboxAuditResult.from_json(result)
    canaries = typed.canaries if isinstance(typed.canaries, Mapping) else {}
    return whitebox_power_entry(
        str(typed.observe or "all"),
        one_run=typed.mode == "one-run",
        canary_kind=str(canaries.get("kind") or "dirac"),
    )


def recomputed_power(kind: str, result: dict[str, Any]) -> dict[str, Any] | None:
    """The power a result may claim, recomputed by its kind's `power` builder from its mode, observation,
    canary kind and size, never read on the file's word: the `power` entry decides "held" vs "not refuted"
    (docs/verdict.md "Power"). None where the kind declares none."""
    builder = AUDIT_KINDS[kind].power
    return None if builder is None else load(builder)(result)


def check_power(kind: str, result: dict[str, Any], where: str) -> None:
    """A result whose `power` is stronger than its mode and size allow was edited (or forged): refused, so a
    "not refuted" audit cannot be turned into "held" by rewriting one field."""
    declared = result.get("power")
    if not isinstance(declared, dict):
        return
    allowed = recomputed_power(kind, result)
    if allowed is None:
        return
    said, may = str(declared.get("kind")), str(allowed.get("kind"))
    if _POWER_RANK.get(said, 3) > _POWER_RANK.get(may, 0):
        raise _contradiction(
            where,
            "power.kind",
            f"is {said!r}, but a {kind} of this mode and size has power {may!r} ({allowed.get('detail')})",
        )


def check_flags_against_numbers(kind: str, result: dict[str, Any], where: str) -> None:
    """Raise AuditInputError when a flag the verdict reads disagrees with the numbers (see module doc):
    the power, then the kind's own `numbers_check`."""
    check_power(kind, result, where)
    check = AUDIT_KINDS[kind].numbers_check
    if check is not None:
        load(check)(result, where)


def check_bound_flags(result: dict[str, Any], where: str, *, decided_by_checks: bool = False) -> None:
    """One claim against one ε lower bound (or a profile test): `violation`, `status` and the own verdict's
    status must follow from the numbers. `decided_by_checks`: the audit's rows decide (whitebox-audit)."""
    found = BoundAuditResult.from_json(result).bound
    claim, bound = float(found.claimed_epsilon), float(found.epsilon_lower_bound)  # type: ignore[arg-type]  # schema
    test = found.profile_test
    if isinstance(test, Mapping):
        refuted = test["p_value"] <= 1 - test["confidence"] + _TOLERANCE
        if bool(test["refuted"]) != refuted:
            raise _contradiction(
                where,
                "profile_test.refuted",
                f"is {test['refuted']} but p = {test['p_value']:.3g} "
                f"at confidence {test['confidence']:g} means {refuted}",
            )
        violation: bool | None = refuted
    elif decided_by_checks:
        # Decided by its checks (p-values re-decided by Holm); its sound (ε, δ) bound is one of
        # them: above the claim, that check and the audit must have failed.
        violation = None
        if bound > claim:
            rows = found.own.get("checks") or []
            if not found.violation or not any(isinstance(r, dict) and r.get("failed") for r in rows):
                raise _contradiction(
                    where,
                    "violation",
                    f"is {found.violation} but the sound lower bound {bound:.4g} exceeds the claimed ε {claim:.4g}",
                )
    else:
        violation = bound > claim
    if violation is not None and bool(found.violation) != violation:
        raise _contradiction(
            where,
            "violation",
            f"is {found.violation} but the lower bound {bound:.4g} vs the claimed ε {claim:.4g} means {violation}"
            if not isinstance(test, Mapping)
            else f"is {found.violation} but the profile test says refuted = {violation}",
        )
    status = _own_status(result)
    if violation is not None and (status == "fail") != violation and status is not None:
        raise _contradiction(where, "verdict.status", f"is {status!r} but the audit's violation is {violation}")
    if violation is not None and found.status is not None and (found.status == "fail") != violation:
        raise _contradiction(where, "status", f"is {found.status!r} but the audit's violation is {violation}")


def check_whitebox_flags(result: dict[str, Any], where: str) -> None:
    """whitebox-audit: `check_bound_flags` decided by its rows, and its one-run and curve blocks."""
    check_bound_flags(result, where, decided_by_checks=True)
    _check_whitebox_blocks(result, where)


def check_accountant_flags(result: dict[str, Any], where: str) -> None:
    """accountant-check: each point's label from its reported ε and PLD interval; `passed` from the labels."""
    from audit.dp_validation.accountant_check import classify

    typed = AccountantCheckResult.from_json(result)
    margin = float(typed.margin)
    for index, point in enumerate(typed.points):
        reported = point.reported
        if reported is None:
            if point.label not in ("loose", "invalid"):
                raise _contradiction(where, f"points[{index}].label", f"is {point.label!r} with no reported ε")
            continue
        lower, upper = float(point.pld_lower), float(point.pld_upper)
        if lower > upper:
            raise AuditInputError(f"{where}: field 'points[{index}]'", "pld_lower is above pld_upper")
        label, _, _ = classify(float(reported), lower, upper, margin)
        if label != point.label:
            raise _contradiction(
                where,
                f"points[{index}].label",
                f"is {point.label!r} but ε {reported:.4g} against "
                f"the PLD interval [{lower:.4g}, {upper:.4g}] is {label!r}",
            )
    passed = typed.passed
    if "passed" in result and bool(result["passed"]) != passed:
        raise _contradiction(where, "passed", f"is {result['passed']} but the points say {passed}")


def check_conformance_flags(result: dict[str, Any], where: str) -> None:
    """conformance: `passed`, `violation` and the own verdict's status from the checks."""
    passed = ConformanceResult.from_json(result).passed
    for field in ("passed",):
        if field in result and bool(result[field]) != passed:
            raise _contradiction(where, field, f"is {result[field]} but the checks say {passed}")
    if "violation" in result and bool(result["violation"]) == passed:
        raise _contradiction(where, "violation", f"is {result['violation']} but the checks say passed = {passed}")
    status = _own_status(result)
    if status is not None and (status == "fail") == passed:
        raise _contradiction(where, "verdict.status", f"is {status!r} but the checks say passed = {passed}")


def _close(a: Any, b: Any) -> bool:
    return abs(float(a) - float(b)) <= _TOLERANCE * max(1.0, abs(float(a)), abs(float(b)))


def one_run_status(block: Mapping[str, Any], claim: float, fdp_refutable: bool) -> str:
    """The one-run audit's status from its numbers, as audit.statistics.one_run_audit decides it:
    refuted when either sound test rejected; held when a perfect attack could have refuted the claim
    (Steinke ceiling above it, or the f-DP test's perfect point refuting its curve); else untestable."""
    fdp = block.get("fdp") if isinstance(block.get("fdp"), dict) else None
    if block["steinke"]["refuted"] or (fdp is not None and fdp["refuted"]):
        return "refuted"
    if block["ceiling"] > claim or fdp_refutable:
        return "held"
    return "untestable"


def _fdp_refutable(result: WhiteboxAuditResult, block: Mapping[str, Any], level: float, where: str) -> bool:
    """Recomputed, not read: could the f-DP test's perfect attack refute the claim's curve? The curve is
    the one the audit tested (whitebox-audit --mode one-run: DP-SGD's (σ, q, T) when ε came from the
    accountant of a one-stage history, else the stated (ε, δ) pair)."""
    from audit.statistics.one_run_audit import fdp_perfect_attack_refutes
    from audit.statistics.tradeoff_curves import claim_profile

    fdp = block.get("fdp")
    if not isinstance(fdp, dict):
        return False
    claim = result.claim if isinstance(result.claim, Mapping) else {}
    history = claim.get("history")
    dpsgd = None
    if claim.get("source") != "--claimed-epsilon" and isinstance(history, list) and len(history) == 1:
        stage = history[0]
        if (
            isinstance(stage, list)
            and len(stage) == 3
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in stage)
        ):
            sigma, q, steps = float(stage[0]), float(stage[1]), stage[2]
            if not (0 < sigma <= 1e6 and 0 < q <= 1 and float(steps).is_integer() and 1 <= steps <= 100_000):
                raise AuditInputError(
                    f"{where}: field 'claim.history'", "is not a DP-SGD (σ, q, T) this audit could have run"
                )
            dpsgd = (sigma, q, int(steps))
    stated = None if dpsgd else float(result.bound.claimed_epsilon)  # type: ignore[arg-type]  # required by the schema
    profile = claim_profile(stated, float(block["delta"]), dpsgd)
    return bool(profile is not None and fdp_perfect_attack_refutes(profile, int(block["m"]), level))


def _check_whitebox_blocks(result: dict[str, Any], where: str) -> None:
    """whitebox-audit: an accountant disagreement is a failed check; a one-run block's flags
    (each test's refutation, the ceiling, the status) recomputed from its numbers."""
    typed = WhiteboxAuditResult.from_json(result)
    found = typed.bound
    disagreements = typed.accountant_disagreements or []
    rows = [r for r in (found.own.get("checks") or []) if isinstance(r, dict)]
    if disagreements:
        failed = [r for r in rows if r.get("name") == "accountant vs training" and r.get("failed")]
        if len(failed) < len(disagreements) or not found.violation:
            raise _contradiction(
                where,
                "accountant_disagreements",
                f"lists {len(disagreements)} disagreement(s) "
                "between the accountant and the training, but the verdict does not fail on them",
            )
    if typed.mode != "one-run":
        return
    block: Mapping[str, Any] = typed.one_run  # type: ignore[assignment]  # required in one-run mode by the schema
    claim, confidence = float(found.claimed_epsilon), float(found.confidence)  # type: ignore[arg-type]  # schema
    for field in ("claimed_epsilon", "delta", "confidence"):
        if not _close(block[field], getattr(found, field)):
            raise _contradiction(
                where, f"one_run.{field}", f"is {block[field]!r} but the audit's {field} is {getattr(found, field)!r}"
            )
    level = (1 - confidence) / 2
    steinke = block["steinke"]
    if not _close(steinke["level"], level):
        raise _contradiction(
            where,
            "one_run.steinke.level",
            f"is {steinke['level']:.4g} but confidence {confidence:g} means α/2 = {level:.4g}",
        )
    if bool(steinke["refuted"]) != (steinke["p_value_claim"] <= level + _TOLERANCE):
        raise _contradiction(
            where,
            "one_run.steinke.refuted",
            f"is {steinke['refuted']} but p = {steinke['p_value_claim']:.3g} at α/2 = {level:.3g} means the opposite",
        )
    if not _close(steinke["epsilon"], found.epsilon_lower_bound):
        raise _contradiction(where, "epsilon_lower_bound", "differs from the one-run block's Steinke et al. bound")
    from audit.statistics.one_run_bounds import one_run_ceiling

    ceiling = one_run_ceiling(int(block["m"]), float(block["delta"]), level)
    for field, value in (
        ("one_run.ceiling", block["ceiling"]),
        ("one_run.steinke.ceiling", steinke["ceiling"]),
        ("ceiling", found.ceiling),
    ):
        if not _close(value, ceiling):
            raise _contradiction(
                where,
                field,
                f"is {value:.6g} but {block['m']} canaries at δ {block['delta']:g} give a ceiling of {ceiling:.6g}",
            )
    fdp = block.get("fdp") if isinstance(block.get("fdp"), dict) else None
    refutable = _fdp_refutable(typed, block, level, where)
    if fdp is not None and bool(fdp["refutable_by_perfect_attack"]) != refutable:
        raise _contradiction(
            where,
            "one_run.fdp.refutable_by_perfect_attack",
            f"is {fdp['refutable_by_perfect_attack']} "
            f"but the claim's curve with {block['m']} canaries gives {refutable}",
        )
    status = one_run_status(block, claim, refutable)
    if block["status"] != status:
        raise _contradiction(
            where,
            "one_run.status",
            f"is {block['status']!r} but its tests and ceiling "
            f"{ceiling:.4g} against the claimed ε {claim:.4g} mean {status!r}",
        )
    claims = found.own.get("claims") or []
    # A failed deterministic row beside the claim test (the in-script parameter accounting, the rows per
    # noisy step, the canary clipping, the accountant) refutes the claim whatever the test said.
    failed_beside = any(r.get("failed") for r in rows if not str(r.get("name", "")).startswith("claim "))
    for index, entry in enumerate(claims):
        if isinstance(entry, dict) and entry.get("status") not in (
            status,
            "not_refuted" if status == "held" else status,
            *(("refuted",) if failed_beside else ()),
        ):
            raise _contradiction(
                where,
                f"verdict.claims[{index}].status",
                f"is {entry.get('status')!r} but the one-run block says {status!r}",
            )
    deciding = [r for r in rows if r.get("decides", True) and str(r.get("name", "")).startswith("claim ")]
    if not deciding:
        raise AuditInputError(
            f"{where}: field 'verdict.checks'",
            "holds no check of the claim (a one-run result decides its claim by one)",
        )
    for row in deciding:
        if bool(row.get("failed")) != (status == "refuted") or bool(row.get("inconclusive")) != (
            status == "untestable"
        ):
            raise _contradiction(
                where,
                "verdict.checks",
                f"the claim's check says failed = {row.get('failed')}, "
                f"inconclusive = {row.get('inconclusive')} but the one-run block says {status!r}",
            )


def load_audit_result(path: Path, kind: str, *, follow: bool = True) -> dict[str, Any]:
    """A `<kind>.json` as `gate` reads it (read_result_file: digest, schema, flags against numbers),
    without the reader's `integrity_check`."""
    loaded = read_result_file(path, kind, follow=follow)
    return {k: v for k, v in loaded.content.items() if k != "integrity_check"}


@dataclass(frozen=True)
class ResultFile:
    """A result file as `gate` and `report` read it: `content` validated (without its `integrity`
    field), `kind` None for a results.json, `integrity` what its digest and signature say."""

    path: Path
    kind: str | None
    content: dict[str, Any]
    integrity: IntegrityOutcome


def read_result_file(path: Path, kind: str | None, *, follow: bool = True) -> ResultFile:
    """The ONE reader of `gate` and `report`: strict JSON, the digest recomputed (an edited file is
    refused, exit 2, whatever its kind: docs/gate.md "Integrity"), the signature checked against the
    configured key, the schema of its kind, and every flag the verdict reads checked against its numbers."""
    from audit.machinery.result_integrity import (
        FIELD,
        check_integrity,
        verification_key,
    )

    where = f"results file '{path}'"
    content = load_json_file(path, where, follow=follow)
    if not isinstance(content, dict):
        raise AuditInputError(where, f"must be a JSON object (a {kind or 'results'}.json written by privacy-audit)")
    key = verification_key()
    integrity = check_integrity(content, key, what="the file")
    if integrity.edited:
        raise AuditInputError(
            where,
            f"{integrity.sentence.removeprefix('the file ')}; an edited result file is "
            "refused, whatever it says "
            "(re-run the audit, or see docs/gate.md, 'Integrity')",
        )
    body = {k: v for k, v in content.items() if k not in (FIELD, "integrity_check")}
    if kind is None:
        from audit.machinery.policy import validate_results

        validate_results(body, source=where)
        check_results_blocks(body, where)
    else:
        _schema_error(kind, body, where)
        check_flags_against_numbers(kind, body, where)
        check_results_blocks(body, where)
    outcome = integrity.as_dict()
    outcome["key_configured"] = key is not None
    return ResultFile(path, kind, {**body, "integrity_check": outcome}, integrity)


def _check_twin_rows(content: dict[str, Any], where: str) -> None:
    """A results.json's white-box one-run twin rows: the verdict's power for the claim rests on the
    f-DP test's perfect-attack p-value at the claim (`curve_ceilings[0]`), a figure of the row's
    DP-SGD (σ, q, T) and m alone: recomputed here, never read on the file's word (the Steinke ceiling
    the verdict recomputes itself from m and δ)."""
    for index, target in enumerate(content.get("targets") or []):
        row = target.get("whitebox_one_run") if isinstance(target, dict) else None
        if not isinstance(row, dict) or row.get("family") != "white-box one-run":
            continue
        curves = [c for c in row.get("curve_ceilings") or [] if isinstance(c, dict) and c.get("factor") == 1.0]
        sigma, q, steps = target.get("noise_multiplier"), target.get("sample_rate"), target.get("steps")
        if not curves or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (sigma, q, steps)):
            continue
        field = f"targets[{index}].whitebox_one_run.curve_ceilings"
        if not (0 < sigma <= 1e6 and 0 < q <= 1 and float(steps).is_integer() and 1 <= steps <= 1_000_000):
            raise AuditInputError(
                f"{where}: field 'targets[{index}]'", "is not a DP-SGD (σ, q, T) this audit could have run"
            )
        from audit.statistics.one_run_power import fdp_perfect_p_value
        from audit.statistics.tradeoff_curves import dpsgd_privacy_profile

        stated = curves[0]
        if not _close(stated.get("epsilon", math.nan), row["claim"]):
            raise _contradiction(
                where, field, f"names the claim ε {stated.get('epsilon')!r} but the row's claim is {row['claim']!r}"
            )
        p_value = fdp_perfect_p_value(dpsgd_privacy_profile(float(sigma), float(q), int(steps)), int(row["m"]))
        if abs(float(stated["fdp_perfect_p_value"]) - p_value) > 1e-6 * max(1.0, p_value):
            raise _contradiction(
                where,
                f"{field}[factor 1.0].fdp_perfect_p_value",
                f"is {stated['fdp_perfect_p_value']:.4g} but "
                f"a perfect attack on {row['m']} canaries of DP-SGD (σ {sigma:g}, q {q:g}, T {steps}) gives "
                f"{p_value:.4g}",
            )


def check_results_blocks(content: dict[str, Any], where: str) -> None:
    """The blocks of a results file the policy reads besides its attacks: the ledger section's flags
    against its figures (the ranges and the unknown fields are the schema's), and a results.json's
    white-box one-run twin rows' power figure."""
    _check_twin_rows(content, where)
    ledger = content.get("ledger")
    if not isinstance(ledger, dict):
        return
    if ledger.get("release_ids") and not ledger.get("recorded"):
        raise _contradiction(where, "ledger.recorded", "is false but the section lists the releases it recorded")
    if ledger.get("recorded") and ledger.get("epsilon_spent") is None and not ledger.get("epsilon_spent_unbounded"):
        raise AuditInputError(
            f"{where}: field 'ledger.epsilon_spent'",
            "is null for a recorded release; an unbounded spend is written with epsilon_spent_unbounded: true",
        )
    if ledger.get("epsilon_spent") is not None and ledger.get("epsilon_spent_unbounded"):
        raise _contradiction(where, "ledger.epsilon_spent", "is a number but epsilon_spent_unbounded is true")
