"""Typed bound results (issue #37, item 2): canary-audit, mechanism-audit and whitebox-audit share one
`EpsilonBoundTest` block; each kind's type writes the bytes its dict builder wrote, on real small audits and on
the real files in tests/data/audit_results (written by the dict builders), and its consumers read the type."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from audit.demos.mechanisms import laplace_count
from audit.dp_validation.canary_audit import (
    PrivacyClaim,
    canary_result,
    default_audit_data,
    multi_run_canary_audit,
    one_run_canary_audit,
)
from audit.dp_validation.mechanism_audit import audit_mechanism, mechanism_result
from audit.dp_validation.mode_power import canary_mode_power, mechanism_power
from audit.dp_validation.scope import apply_power
from audit.machinery.bound_results import (
    BOUND_FIELDS,
    BoundAuditResult,
    CanaryAuditResult,
    EpsilonBoundTest,
    MechanismAuditResult,
    WhiteboxAuditResult,
    read_bound_result,
)
from audit.machinery.workers import WorkerPool
from tests.test_canary_audit import noisy_centroids  # numpy class means: microseconds, imported by name in workers

DATA = Path(__file__).parent / "data" / "audit_results"
TYPES = {
    "canary-audit": CanaryAuditResult,
    "mechanism-audit": MechanismAuditResult,
    "whitebox-audit": WhiteboxAuditResult,
}
RECORDED = sorted(
    path for path in DATA.rglob("*.json") if any(path.name.startswith(kind) for kind in TYPES)
)  # real audits, written by the dict builders before the types (and by `gate`'s recording: verdict, digest)


def _kind(path: Path) -> str:
    return next(kind for kind in TYPES if path.name.startswith(kind))


def _bytes(result: dict) -> str:
    return json.dumps(result, ensure_ascii=False, allow_nan=False)


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_recorded_bound_result_reads_into_its_type_and_writes_the_same_bytes(path):
    recorded = json.loads(path.read_text())
    typed = read_bound_result(_kind(path), recorded)
    assert type(typed) is TYPES[_kind(path)]
    assert _bytes(typed.to_json()) == _bytes(recorded)
    # The shared block holds the claim and its test; the kind's fields are typed; nothing is held twice.
    bound = typed.bound
    assert (bound.claimed_epsilon, bound.epsilon_lower_bound, bound.violation) == (
        recorded["claimed_epsilon"],
        recorded["epsilon_lower_bound"],
        recorded["violation"],
    )
    assert bound.own["status"] == recorded["verdict"]["status"]
    assert not set(typed.figures) & (set(BOUND_FIELDS) | set(typed._kind_fields()))
    if isinstance(typed, WhiteboxAuditResult):
        assert typed.subject == recorded["subject"] and typed.settings == recorded["settings"]
    else:
        assert typed.claim == recorded["claim"] and typed.subject_name(_kind(path)) in (
            recorded.get("trainer"),
            recorded.get("mechanism"),
        )


def test_with_fields_sets_like_a_dict_update_keeping_the_order():
    typed = BoundAuditResult.from_json({"claimed_epsilon": 1.0, "scores": [1, 2], "verdict": {"status": "pass"}})
    changed = typed.with_fields(verdict={"status": "fail"}, mode="multi", claimed_epsilon=2)
    assert list(changed.to_json()) == ["claimed_epsilon", "scores", "verdict", "mode"]
    assert changed.bound.claimed_epsilon == 2 and changed.bound.own == {"status": "fail"}
    assert typed.bound.claimed_epsilon == 1.0  # frozen: the first one is unchanged
    with pytest.raises(AttributeError):
        typed.bound.violation = True  # type: ignore[misc]


def test_a_result_without_the_top_level_ceiling_reads_its_verdicts():
    typed = BoundAuditResult.from_json({"verdict": {"ceiling": 2.5, "needed": 40, "needed_unit": "runs"}})
    assert (typed.deciding_ceiling, typed.deciding_needed, typed.deciding_needed_unit) == (2.5, 40, "runs")
    held = typed.with_fields(ceiling=None)  # present though null: the result's own field decides
    assert held.deciding_ceiling is None and held.holds("ceiling") and held.to_json()["ceiling"] is None
    assert EpsilonBoundTest(verdict=[1]).own == {} and not EpsilonBoundTest().tests_profile  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------------------------
# Real small audits: the job's typed result against the dict its builder wrote before the type.
# ----------------------------------------------------------------------------------------------------------------


def _old_canary_assembly(found, *, mode, trainer, claim, size):
    """What run_canary_audit did to a mode's dict before the type (commit c68ab48), the bytes to reproduce."""
    result = copy.deepcopy(found)
    result["mode"] = mode
    result["trainer"] = trainer
    result["claim"] = claim.to_dict()
    result["power"] = canary_mode_power(mode, size)
    result["verdict"] = apply_power(result["verdict"], result["power"])
    return result


@pytest.mark.slow  # two small canary audits in a worker (seconds of CPU)
def test_real_small_canary_audits_write_the_bytes_the_dict_did():
    features, labels = default_audit_data(128, seed=0)
    claim = PrivacyClaim.stated(3.0, 1e-5)
    with WorkerPool(1, name="--trainer", timeout=300) as pool:
        multi = multi_run_canary_audit(
            noisy_centroids, features, labels, n_models=10, claim=claim, seed=0, pool=pool, looks=1
        )
        one_run = one_run_canary_audit(noisy_centroids, features, labels, n_canaries=40, claim=claim, seed=0, pool=pool)
    for mode, found, size in (("multi", multi, 10), ("one-run", one_run, 40)):
        options = dict(mode=mode, trainer="tests:noisy_centroids", claim=claim, size=size)
        typed = canary_result(copy.deepcopy(found), **options)
        assert _bytes(typed) == _bytes(_old_canary_assembly(found, **options))
        back = CanaryAuditResult.from_json(typed)
        assert back.mode == mode and back.planned_size == size and back.bound.declared_power == typed["power"]


def test_a_real_small_mechanism_audit_writes_the_bytes_the_dict_did():
    claim = PrivacyClaim.stated(1.0, 0.0)
    found = audit_mechanism(laplace_count, np.zeros(10), np.r_[np.zeros(9), 1.0], n_trials=400, claim=claim, seed=0)
    old = copy.deepcopy(found)  # what run_mechanism_audit did before the type (commit c68ab48)
    old["claim"] = claim.to_dict()
    old["power"] = mechanism_power(400)
    old["verdict"] = apply_power(old["verdict"], old["power"])
    typed = mechanism_result(copy.deepcopy(found), claim=claim, n_trials=400)
    assert _bytes(typed) == _bytes(old)
    back = MechanismAuditResult.from_json(typed)
    assert back.n_trials == 400 and back.mechanism == found["mechanism"] and back.bound.ceiling == found["ceiling"]


def test_the_public_api_hands_back_the_typed_bound_results():
    from audit.api import AuditResult

    for path in RECORDED:
        recorded = json.loads(path.read_text())
        typed = AuditResult.from_results(_kind(path), recorded).typed_results
        assert type(typed) is TYPES[_kind(path)] and typed.to_json() == recorded
