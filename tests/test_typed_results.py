"""Typed single-audit results (issue #37, item 2): the kind's dataclass writes the same bytes the dict did,
reads back what the schema allows, and is what the registry names."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from audit.machinery.audit_kinds import audit_kind, load
from audit.machinery.audit_results import (
    AccountantCheckPoint,
    AccountantCheckResult,
    ConformanceCheck,
    ConformanceResult,
)
from audit.machinery.bound_results import CanaryAuditResult, MechanismAuditResult, WhiteboxAuditResult

DATA = Path(__file__).parent / "data" / "audit_results"
CONFORMANCE_FILES = [DATA / "conformance.json", DATA / "current" / "conformance-factory.json"]


def _dict_built_result(checks, *, audit, trainer, seed, alpha, factory=None, not_checked=None):
    """The result exactly as run_conformance / run_factory_conformance built it by hand before the type
    (commit f4deb70): the reference the typed result must reproduce byte for byte."""
    failed = [c for c in checks if not c["passed"]]
    head = {"audit": audit}
    if factory is not None:
        head.update(not_checked=not_checked, trainer=trainer, factory=factory)
    else:
        head["trainer"] = trainer
    return {
        **head,
        "seed": int(seed),
        "alpha": float(alpha),
        "checks": checks,
        "passed": not failed,
        "violation": bool(failed),
        "verdict": {
            "status": "fail" if failed else "pass",
            "passed": not failed,
            "decided_by": "built-in checks",
            "reasons": [
                f"{c['check']} failed: {c['detail']} (measured {c['value']}, expected {c['expected']})" for c in failed
            ]
            or [f"all {len(checks)} checks passed (family-wise α = {alpha:g})"],
        },
    }


def _checks(path: Path, fail_first: bool) -> list[dict]:
    checks = json.loads(path.read_text())["checks"]
    if fail_first:  # a failing check too, so the reasons' wording is compared
        checks[0] = {**checks[0], "passed": False}
    return checks


@pytest.mark.parametrize("fail_first", [False, True])
@pytest.mark.parametrize("factory", [None, "my_setup:make"])
def test_the_typed_conformance_result_writes_the_bytes_the_dict_did(factory, fail_first):
    checks = _checks(CONFORMANCE_FILES[1 if factory else 0], fail_first)
    not_checked = [{"check": "per_example_clipping", "why": "ghost clipping"}] if factory else None
    options = dict(audit="conformance checks", trainer=f"--factory {factory}", seed=3, alpha=0.01)
    typed = ConformanceResult.decided(**options, checks=checks, factory=factory, not_checked=not_checked)
    reference = _dict_built_result(checks, **options, factory=factory, not_checked=not_checked)
    assert json.dumps(typed.to_json(), ensure_ascii=False) == json.dumps(reference, ensure_ascii=False)
    assert typed.passed is reference["passed"] and (typed.passed is False or not fail_first)


@pytest.mark.parametrize("path", CONFORMANCE_FILES, ids=lambda p: p.name)
def test_a_recorded_conformance_file_reads_back_into_the_type_and_out_unchanged(path):
    recorded = json.loads(path.read_text())
    typed = ConformanceResult.from_json(recorded)
    assert all(isinstance(c, ConformanceCheck) for c in typed.checks) and len(typed.checks) == len(recorded["checks"])
    written = typed.to_json()
    # What the type holds comes back in the file's order; what recording adds (digest, MLflow) is not the job's.
    assert list(written) == [key for key in recorded if key in written]
    assert written == {key: recorded[key] for key in written}


def test_a_minimal_file_the_schema_allows_reads_back():
    typed = ConformanceResult.from_json({"alpha": 0.05, "checks": [{"check": "steps", "passed": True}, "junk"]})
    assert typed.alpha == 0.05 and typed.passed and [c.check for c in typed.checks] == ["steps"]
    assert typed.checks[0].detail is None and typed.factory is None and typed.verdict is None


def test_the_registry_names_the_type_its_consumers_read():
    assert load(audit_kind("conformance").result_type or "") is ConformanceResult
    assert load(audit_kind("accountant-check").result_type or "") is AccountantCheckResult
    assert load(audit_kind("canary-audit").result_type or "") is CanaryAuditResult
    assert load(audit_kind("mechanism-audit").result_type or "") is MechanismAuditResult
    assert load(audit_kind("whitebox-audit").result_type or "") is WhiteboxAuditResult


def _summarized(accountant, margin, points):
    """The accountant-check result as `{"accountant", "margin", **summarize(points)}` built it before the type
    (commit f4deb70): the reference for the typed result's bytes."""
    from dataclasses import asdict

    counts = {label: sum(p.label == label for p in points) for label in ("ok", "loose", "unsound", "invalid")}
    return {
        "accountant": accountant,
        "margin": margin,
        "counts": counts,
        "passed": counts["unsound"] == 0 and counts["invalid"] == 0,
        "reference": "dp_accounting PLD interval refined until upper − lower ≤ 1% of ε",
        "reference_not_tight": len([p for p in points if not p.pld_tight]),
        "points": [asdict(p) for p in points],
    }


def test_the_typed_accountant_check_writes_the_bytes_the_dict_did():
    recorded = json.loads((DATA / "accountant-check.json").read_text())
    points = [AccountantCheckPoint.from_json(p) for p in recorded["points"]]
    points[1] = replace(points[1], label="unsound", pld_tight=False)  # a failing, not-tight point too
    typed = AccountantCheckResult("mine:epsilon", 0.1, tuple(points))
    assert json.dumps(typed.to_json(), ensure_ascii=False) == json.dumps(
        _summarized("mine:epsilon", 0.1, points), ensure_ascii=False
    )
    assert not typed.passed and typed.counts["unsound"] == 1


def test_a_recorded_accountant_check_reads_back_into_the_type_and_out_unchanged():
    recorded = json.loads((DATA / "accountant-check.json").read_text())
    written = AccountantCheckResult.from_json(recorded).to_json()
    assert list(written) == [key for key in recorded if key in written]
    assert written == {key: recorded[key] for key in written}


@pytest.mark.slow  # the tight PLD reference of one grid point: seconds of CPU
def test_the_public_api_hands_back_the_typed_result():
    import audit

    def tiny(noise_multiplier, sample_rate, steps, delta):  # claims far more privacy than σ 1 gives: unsound
        return 0.01

    from audit.dp_validation.accountant_check import AccountantGrid

    grid = AccountantGrid(noise_multipliers=[1.0], sample_rates=[0.01], steps=[100])
    found = audit.accountant_check(tiny, grid=grid)
    typed = found.typed_results
    assert isinstance(typed, AccountantCheckResult) and typed.counts["unsound"] == 1 and not typed.passed
    assert found.status == "fail" and typed.to_json()["points"] == found.results["points"]
