"""Hostile results files (issue 26, class "a results file that lies"): every file `gate` and `report`
read is validated against its shipped schema first, and the verdict rests on the numbers — a
`violation: false` next to a bound above the claim, an unknown schema version, a file that checks
nothing or a tampered field is exit 2 naming the file and the field (never PASS, never exit 3),
and nothing is written: no gated copy, no report.html, no junit.xml.

The starting points are real files written by each audit (tests/data/audit_results/, produced by
`mechanism-audit`, `whitebox-audit --builtin`, `accountant-check`, `canary-audit --mode multi`
and `conformance`, MLflow run ids removed), in two versions — before the wave's verdict
vocabulary (`previous`, still readable) and after it (`current/`) — and the run example
tests/data/results_smoke_example.json.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hostile_support import assert_refused, run_main, snapshot

pytestmark = pytest.mark.security

DATA = Path(__file__).parent / "data"
KINDS = ("canary-audit", "mechanism-audit", "whitebox-audit", "conformance", "accountant-check")
EXAMPLES = {kind: json.loads((DATA / "audit_results" / f"{kind}.json").read_text()) for kind in KINDS}
CURRENT = {
    kind: json.loads((DATA / "audit_results" / "current" / f"{kind}.json").read_text())
    for kind in KINDS
    if (DATA / "audit_results" / "current" / f"{kind}.json").is_file()
}
VERSIONS = {"previous": EXAMPLES, "current": CURRENT}
RUN_EXAMPLE = json.loads((DATA / "results_smoke_example.json").read_text())


def _set(path: str, value):
    def mutate(result):
        node = result
        parts = path.split(".")
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        last = parts[-1]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
        return result

    return mutate


def _delete(path: str):
    def mutate(result):
        node = result
        parts = path.split(".")
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        del node[parts[-1]]
        return result

    return mutate


def _lie_about_bound(result):  # the case: a bound of 100 against a claim of 1, "no violation"
    result.update(claimed_epsilon=1.0, epsilon_lower_bound=100.0, violation=False)
    return result


def _profile(refuted: bool, p_value: float):
    def mutate(result):
        result["profile_test"] = {
            "p_value": p_value,
            "confidence": 0.95,
            "refuted": refuted,
            "fpr": 0.1,
            "fnr": 0.5,
            "claimed_fnr_floor": 0.4,
            "statistic": "FNR + 1·FPR",
            "profile": "claim",
        }
        return result

    return mutate


def _all_labels(label: str):
    def mutate(result):
        for point in result["points"]:
            point["label"] = label
        return result

    return mutate


COMMON = {
    "schema_version 99": (_set("schema_version", 99), "schema_version"),
    "schema_version as text": (_set("schema_version", "1"), "schema_version"),
    "schema_version true": (_set("schema_version", True), "schema_version"),
}
BOUND = {
    "bound 100 vs claim 1, violation false": (_lie_about_bound, "violation"),
    "violation true without a bound above the claim": (_set("violation", True), "violation"),
    "claim as text": (_set("claimed_epsilon", "1.0"), "claimed_epsilon"),
    "claim negative": (_set("claimed_epsilon", -1.0), "claimed_epsilon"),
    "claim zero": (_set("claimed_epsilon", 0), "claimed_epsilon"),
    "claim 1e300": (_set("claimed_epsilon", 1e300), "claimed_epsilon"),
    "bound as text": (_set("epsilon_lower_bound", "0.1"), "epsilon_lower_bound"),
    "bound null": (_set("epsilon_lower_bound", None), "epsilon_lower_bound"),
    "bound a list": (_set("epsilon_lower_bound", [0.1]), "epsilon_lower_bound"),
    "confidence 1.5": (_set("confidence", 1.5), "confidence"),
    "confidence 0": (_set("confidence", 0), "confidence"),
    "delta 1": (_set("delta", 1.0), "delta"),
    "violation as text": (_set("violation", "false"), "violation"),
    "violation missing": (_delete("violation"), "violation"),
    "claim missing": (_delete("claimed_epsilon"), "claimed_epsilon"),
    "ceiling as text": (_set("ceiling", "big"), "ceiling"),
    "verdict status unknown": (_set("verdict.status", "great"), "verdict.status"),
    "verdict a list": (_set("verdict", []), "verdict"),
}
CANARY_ONLY = {
    "profile refuted flag contradicts p": (_profile(True, 0.5), "profile_test.refuted"),
    "profile p-value above 1": (_profile(False, 2.0), "profile_test.p_value"),
    "profile refuted hidden": (_profile(False, 1e-9), "profile_test.refuted"),
    "own verdict fail without violation": (_set("verdict.status", "fail"), "verdict.status"),
    "status fail without violation": (_set("status", "fail"), "status"),
}
WHITEBOX_ONLY = {
    "no checks": (_set("verdict.checks", []), "verdict.checks"),
    "check p-value 7": (_set("verdict.checks.0.p_value", 7), "verdict.checks[0].p_value"),
    "check without a name": (_delete("verdict.checks.0.name"), "verdict.checks[0]"),
    "verdict missing": (_delete("verdict"), "verdict"),
}
CONFORMANCE = {
    "no checks": (_set("checks", []), "checks"),
    "checks missing": (_delete("checks"), "checks"),
    "check passed as text": (_set("checks.0.passed", "yes"), "checks[0].passed"),
    "check without a name": (_delete("checks.0.check"), "checks[0]"),
    "passed true with a failed check": (_set("checks.0.passed", False), "passed"),
    "alpha 2": (_set("alpha", 2.0), "alpha"),
    "violation contradicts checks": (_set("violation", True), "violation"),
    "own verdict fail on passing checks": (_set("verdict.status", "fail"), "verdict.status"),
    "checks an object": (_set("checks", {"a": 1}), "checks"),
}
ACCOUNTANT = {
    "no points": (_set("points", []), "points"),
    "points missing": (_delete("points"), "points"),
    "every point relabelled ok": (
        lambda r: _set("points.0.reported", r["points"][0]["pld_lower"] / 2)(r),
        "points[0].label",
    ),
    "an ok point relabelled unsound": (_set("points.0.label", "unsound"), "points[0].label"),
    "label unknown": (_set("points.0.label", "fine"), "points[0].label"),
    "steps fractional": (_set("points.0.steps", 10.5), "points[0].steps"),
    "sample rate 2": (_set("points.0.sample_rate", 2.0), "points[0].sample_rate"),
    "noise multiplier negative": (_set("points.0.noise_multiplier", -1.0), "points[0].noise_multiplier"),
    "interval upside down": (lambda r: _set("points.0.pld_lower", r["points"][0]["pld_upper"] * 2)(r), "points[0]"),
    "margin missing": (_delete("margin"), "margin"),
    "passed flag contradicts points": (lambda r: _set("passed", True)(_all_labels("unsound")(r)), None),
}

CASES = []
for kind in KINDS:
    for name, (mutate, field) in COMMON.items():
        CASES.append((kind, name, mutate, field))
for kind in ("canary-audit", "mechanism-audit", "whitebox-audit"):
    for name, (mutate, field) in BOUND.items():
        if kind == "whitebox-audit" and name == "violation true without a bound above the claim":
            continue  # a white-box audit fails on its curve test too: its checks decide
        CASES.append((kind, name, mutate, field))
for name, (mutate, field) in CANARY_ONLY.items():
    CASES.append(("canary-audit", name, mutate, field))
for name, (mutate, field) in WHITEBOX_ONLY.items():
    CASES.append(("whitebox-audit", name, mutate, field))
for name, (mutate, field) in CONFORMANCE.items():
    CASES.append(("conformance", name, mutate, field))
for name, (mutate, field) in ACCOUNTANT.items():
    CASES.append(("accountant-check", name, mutate, field))


@pytest.fixture
def gate_dir(tmp_path, monkeypatch):
    (tmp_path / "policy.yaml").write_text("rules:\n  max_epsilon_lb: 50.0\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


VERSIONED = [(v, *case) for v in VERSIONS for case in CASES if case[0] in VERSIONS[v]]


@pytest.mark.parametrize(
    "version, kind, name, mutate, field", VERSIONED, ids=[f"{v} {k}: {n}" for v, k, n, _, _ in VERSIONED]
)
def test_gate_refuses_a_results_file_that_lies(gate_dir, capsys, version, kind, name, mutate, field):
    result = mutate(copy.deepcopy(VERSIONS[version][kind]))
    (gate_dir / f"{kind}.json").write_text(json.dumps(result))
    err = assert_refused(
        capsys, ["gate", f"{kind}.json", "--policy", "policy.yaml", "--out", "gated"], f"{kind}.json", folder=gate_dir
    )
    if field is not None:
        assert f"'{field}" in err, err
    assert not (gate_dir / "gated").exists()


@pytest.mark.parametrize("version, kind", [(v, k) for v in VERSIONS for k in KINDS if k in VERSIONS[v]])
def test_gate_passes_the_files_the_audits_wrote(gate_dir, capsys, version, kind):
    """The starting points are accepted: the battery refuses what was changed, not the format."""
    (gate_dir / f"{kind}.json").write_text(json.dumps(VERSIONS[version][kind]))
    code, _ = run_main(["gate", f"{kind}.json", "--policy", "policy.yaml", "--out", "gated"])
    out, err = capsys.readouterr()
    assert code == 0, err + out
    assert (gate_dir / "gated" / f"{kind}.json").is_file()


@pytest.mark.parametrize(
    "text, names",
    [
        ("[1, 2, 3]", "JSON object"),
        ("null", "JSON object"),
        ('"results"', "JSON object"),
        ("{}", "canary-audit.json"),
        ('{"a": 1, "a": 2}', "appears twice"),
        ('{"claimed_epsilon": NaN}', "NaN"),
        ("{" * 50_000 + "}" * 50_000, "canary-audit.json"),
        ("\ufeff{}", "canary-audit.json"),
        ("", "canary-audit.json"),
    ],
)
def test_gate_refuses_a_results_file_that_is_not_one(gate_dir, capsys, text, names):
    (gate_dir / "canary-audit.json").write_text(text)
    assert_refused(capsys, ["gate", "canary-audit.json", "--policy", "policy.yaml"], names, folder=gate_dir)


RUN_MUTATIONS = {
    "schema_version 99": (_set("schema_version", 99), "schema_version"),
    "schema_version 0": (_set("schema_version", 0), "schema_version"),
    "targets an object": (_set("targets", {}), "targets"),
    "a target's attacks text": (_set("targets.0.attacks", "all"), "targets[0].attacks"),
    "an AUC of 7": (_set("targets.0.attacks.0.auc", 7), "targets[0].attacks[0].auc"),
    "an AUC as text": (_set("targets.0.attacks.0.auc", "0.5"), "targets[0].attacks[0].auc"),
    "verdict missing": (_delete("verdict"), "verdict"),
    "config missing": (_delete("config"), "config"),
    "no checks at all": (lambda r: {**r, "targets": [], "synthetic": []}, "--policy"),
}


@pytest.mark.parametrize("command", ["gate", "report"])
@pytest.mark.parametrize("name", list(RUN_MUTATIONS))
def test_gate_and_report_refuse_a_run_results_file_that_lies(gate_dir, capsys, command, name):
    mutate, field = RUN_MUTATIONS[name]
    if command == "report" and name == "no checks at all":
        pytest.skip("report renders an empty run; only a gate must check something")
    folder = gate_dir / "run"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(mutate(copy.deepcopy(RUN_EXAMPLE))))
    args = ["gate", "run", "--policy", "policy.yaml"] if command == "gate" else ["report", "run/results.json"]
    err = assert_refused(capsys, args, "results.json" if field != "--policy" else "--policy", folder=gate_dir)
    assert field in err


def test_a_run_results_file_claiming_a_pass_is_judged_by_its_numbers(gate_dir, capsys):
    """`verdict.passed: true` / `status: pass` written into a run whose numbers fail a rule: the gate
    recomputes from the numbers and fails (exit 1), whatever the file says."""
    results = copy.deepcopy(RUN_EXAMPLE)
    results["verdict"]["status"] = "pass"
    results["verdict"]["passed"] = True
    results["verdict"]["reasons"] = []
    (gate_dir / "run").mkdir()
    (gate_dir / "run" / "results.json").write_text(json.dumps(results))
    (gate_dir / "tight.yaml").write_text("rules:\n  max_auc: 0.01\n")
    code, _ = run_main(["gate", "run", "--policy", "tight.yaml", "--out", "gated"])
    out, err = capsys.readouterr()
    assert code == 1, err + out
    gated = json.loads((gate_dir / "gated" / "results.json").read_text())
    assert gated["verdict"]["status"] == "fail"


def test_report_refuses_a_single_audit_file_by_name(gate_dir, capsys):
    (gate_dir / "conformance.json").write_text(json.dumps(EXAMPLES["conformance"]))
    assert_refused(capsys, ["report", "conformance.json"], "conformance.json", folder=gate_dir)


def test_the_battery_covers_every_kind_with_many_lies():
    kinds = {k for k, _, _, _ in CASES}
    assert kinds == set(KINDS)
    assert len(CASES) >= 90
    before = snapshot(DATA / "audit_results")
    assert before  # the example files are in the repository
