"""The shipped schemas describe the one-run results: `whitebox-audit --mode one-run`, `conformance --factory`
(audit/schema/audit_result.schema.json, what `gate` validates) and the `run` job's white-box one-run
twin rows and conformance entry (audit/schema/results.schema.json).

The files are real, written by the commands at tiny sizes (MLflow ids removed):
tests/data/audit_results/current/whitebox-audit-one-run.json
    `whitebox-audit --mode one-run --builtin --noise-multiplier 2 --sample-rate 0.5 --steps 6 --canaries 200 --device cpu`
tests/data/audit_results/current/conformance-factory.json
    `conformance --factory audit.demos.opacus_planted_bugs:accountant_half_steps` (tiny size: a refuted check)
tests/data/results_one_run_example.json
    `run` on data.n_rows 400, training.hidden_sizes [8], epochs 2, privacy.epsilons [4, inf],
    one_run_canaries 200, attacks [loss] (a twin row and a conformance entry on the ε 4 target).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from audit.dp_validation.result_files import load_audit_result
from audit.errors import AuditInputError

DATA = Path(__file__).parent / "data"
SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "audit" / "schema" / "results.schema.json").read_text())
RUN_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
SINGLE = {
    "whitebox-audit": DATA / "audit_results" / "current" / "whitebox-audit-one-run.json",
    "conformance": DATA / "audit_results" / "current" / "conformance-factory.json",
}


@pytest.fixture
def run_results():
    return json.loads((DATA / "results_one_run_example.json").read_text())


def _dp_target(results):
    (target,) = [t for t in results["targets"] if t["epsilon_target"] is not None]
    return target


def test_a_real_run_with_a_twin_row_and_a_conformance_entry_validates(run_results):
    target = _dp_target(run_results)
    assert target["whitebox_one_run"]["family"] == "white-box one-run" and target["conformance"]["checks"]
    assert [e.message for e in RUN_VALIDATOR.iter_errors(run_results)] == []


def _federated_row(results):
    row = copy.deepcopy(_dp_target(results)["whitebox_one_run"])
    row.update({"family": "canary clients (one-run)", "level": "client", "kind": "random-direction canary clients"})
    _dp_target(results)["whitebox_one_run"] = row
    return results


RUN_BREAKAGES = [
    ("row status not a claim status", lambda t: t["whitebox_one_run"].__setitem__("status", "maybe")),
    ("row of an unknown family", lambda t: t["whitebox_one_run"].__setitem__("family", "white-box")),
    ("row without its ceiling", lambda t: t["whitebox_one_run"].pop("ceiling")),
    ("row p-value above 1", lambda t: t["whitebox_one_run"].__setitem__("p_value", 1.5)),
    ("row with no canaries", lambda t: t["whitebox_one_run"].__setitem__("m", 0)),
    ("row test not a sound test", lambda t: t["whitebox_one_run"].__setitem__("tests", ["andrew"])),
    ("conformance without checks", lambda t: t["conformance"].__setitem__("checks", [])),
    ("conformance check passed as text", lambda t: t["conformance"]["checks"][0].__setitem__("passed", "yes")),
    ("conformance without rules_failed", lambda t: t["conformance"].pop("rules_failed")),
]


@pytest.mark.parametrize("what, breakage", RUN_BREAKAGES, ids=[b[0] for b in RUN_BREAKAGES])
def test_a_broken_one_run_row_or_conformance_entry_fails_validation(run_results, what, breakage):
    breakage(_dp_target(run_results))
    assert [e.message for e in RUN_VALIDATOR.iter_errors(run_results)] != [], what


def test_a_federated_canary_client_row_is_described_too(run_results):
    assert [e.message for e in RUN_VALIDATOR.iter_errors(_federated_row(run_results))] == []


@pytest.mark.parametrize("kind", sorted(SINGLE))
def test_real_single_audit_results_validate_as_gate_reads_them(kind):
    result = load_audit_result(SINGLE[kind], kind)  # the schema, then the flags against the numbers
    if kind == "whitebox-audit":
        assert result["mode"] == "one-run" and result["one_run"]["status"] in ("held", "refuted", "untestable")
        assert result["device"] == "cpu" and result["cost"]["cpu_seconds_with_canaries"] > 0
    else:
        assert result["factory"].endswith(":accountant_half_steps") and not result["passed"]


SINGLE_BREAKAGES = [
    ("whitebox-audit", "one_run.status", lambda r: r["one_run"].__setitem__("status", "fine")),
    ("whitebox-audit", "one_run", lambda r: r.pop("one_run")),
    ("whitebox-audit", "canaries.kind", lambda r: r["canaries"].__setitem__("kind", "spiral")),
    ("whitebox-audit", "one_run.gaussian_sum.sound", lambda r: r["one_run"]["gaussian_sum"].__setitem__("sound", True)),
    ("whitebox-audit", "cost.seconds_with_canaries", lambda r: r["cost"].__setitem__("seconds_with_canaries", -1)),
    ("whitebox-audit", "accuracy.plain", lambda r: r["accuracy"].__setitem__("plain", 2.0)),
    ("conformance", "factory", lambda r: r.__setitem__("factory", 3)),
]


@pytest.mark.parametrize("kind, field, breakage", SINGLE_BREAKAGES, ids=[f"{k}:{f}" for k, f, _ in SINGLE_BREAKAGES])
def test_a_broken_single_audit_result_is_refused_naming_the_field(tmp_path, kind, field, breakage):
    result = json.loads(SINGLE[kind].read_text())
    breakage(result)
    path = tmp_path / f"{kind}.json"
    path.write_text(json.dumps(result))
    with pytest.raises(AuditInputError) as refused:
        load_audit_result(path, kind)
    assert field.split(".")[0] in str(refused.value)
