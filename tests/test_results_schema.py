"""audit/schema/results.schema.json describes what `privacy-audit run` writes, and refuses what it does not."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

REPO = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((REPO / "audit" / "schema" / "results.schema.json").read_text())
DATA = Path(__file__).parent / "data"
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def _errors(results) -> list[str]:
    return [error.message for error in VALIDATOR.iter_errors(results)]


@pytest.fixture
def results():
    return json.loads((DATA / "results_default_example.json").read_text())


def test_the_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("name", ["results_default_example.json", "results_smoke_example.json"])
def test_real_run_results_validate(name):
    assert _errors(json.loads((DATA / name).read_text())) == []


def test_later_additions_are_allowed(results):
    results["new_top_level_key"] = {"anything": 1}
    results["targets"][0]["new_metric"] = 0.3
    results["targets"][0]["attacks"][0]["epsilon_lb"]["new_estimator"] = 0.1
    results["synthetic"] = [
        {
            "generator": "gaussian_copula",
            "epsilon_target": 1.0,
            "nndr": {"p1": 0.2, "p10": 0.5, "median": 0.8, "p90": 0.95},
            "dcr": {
                "dcr_share": 0.52,
                "dcr_share_ci": [0.48, 0.56],
                "median_train": 0.3,
                "median_holdout": 0.31,
                "exact_match_rate": 0.0,
                "n_synthetic": 1000,
            },
            "mia": {
                "auc": 0.51,
                "auc_ci": [0.48, 0.54],
                "tpr_at_fpr": {"0.001": 0.0},
                "epsilon_lb": {"clopper_pearson": 0.0},
            },
        }
    ]
    assert _errors(results) == []


def test_other_producers_results_validate(results):
    # audit-scores: no training, a claimed ε, one-run not computed; synth-check: a user's files.
    target = results["targets"][0]
    target.update(
        {
            "noise_multiplier": None,
            "sample_rate": None,
            "steps": None,
            "max_grad_norm": None,
            "poisson_sampling": None,
            "accountant": "claimed",
            "epsilon": {"claimed": 1.0},
            "test_accuracy": None,
        }
    )
    target["attacks"][0]["epsilon_lb"]["one_run"] = None
    results["synthetic"] = [
        {
            "generator": "synthetic.csv",
            "nndr": {"p1": None, "p10": None, "median": None, "mean": None},
            "dcr": {
                "dcr_share": 1.0,
                "dcr_share_ci": [0.99, 1.0],
                "expected_share_if_not_memorising": 0.5,
                "median_dcr_train": 0.0,
                "median_dcr_holdout": 0.01,
                "exact_match_rate": 1.0,
            },
            "mia": {
                "name": "distance",
                "auc": 0.83,
                "auc_ci": [0.8, 0.86],
                "tpr_at_fpr": {"0.001": 0.65},
                "epsilon_lb": {"clopper_pearson": 3.5, "one_run": None},
            },
            "flags": [{"check": "dcr", "message": "synthetic rows are closer to train than to holdout"}],
            "passed": False,
        }
    ]
    assert _errors(results) == []


BREAKAGES = [
    ("schema_version 3", lambda r: r.__setitem__("schema_version", 3)),
    (
        "version 2 without verdict.status",
        lambda r: (r.__setitem__("schema_version", 2), r["verdict"].pop("status", None)),
    ),
    ("verdict.status not a status", lambda r: r["verdict"].__setitem__("status", "ok")),
    ("auc as a string", lambda r: r["targets"][0]["attacks"][0].__setitem__("auc", "0.5")),
    ("auc above 1", lambda r: r["targets"][0]["attacks"][0].__setitem__("auc", 1.2)),
    ("no targets key", lambda r: r.pop("targets")),
    ("no verdict", lambda r: r.pop("verdict")),
    ("verdict.passed not a bool", lambda r: r["verdict"].__setitem__("passed", "yes")),
    ("epsilon_target 0", lambda r: r["targets"][0].__setitem__("epsilon_target", 0)),
    ("epsilon_target 'inf'", lambda r: r["targets"][5].__setitem__("epsilon_target", "inf")),
    ("accountant ε as text", lambda r: r["targets"][0]["epsilon"].__setitem__("prv", "0.49")),
    ("auc_ci of three numbers", lambda r: r["targets"][0]["attacks"][0].__setitem__("auc_ci", [0.4, 0.5, 0.6])),
    ("missing clopper_pearson bound", lambda r: r["targets"][0]["attacks"][0]["epsilon_lb"].pop("clopper_pearson")),
    ("negative lower bound", lambda r: r["targets"][0]["attacks"][0]["epsilon_lb"].__setitem__("one_run", -0.1)),
    ("tpr level not a number", lambda r: r["targets"][0]["attacks"][0]["tpr_at_fpr"].__setitem__("low", 0.1)),
    ("violation missing", lambda r: r["targets"][0].pop("violation")),
    ("attack without a name", lambda r: r["targets"][0]["attacks"][0].pop("name")),
    ("synthetic entry without generator", lambda r: r.__setitem__("synthetic", [{"epsilon_target": None}])),
    (
        "dcr_share as a string",
        lambda r: r.__setitem__("synthetic", [{"generator": "g", "epsilon_target": None, "dcr": {"dcr_share": "0.5"}}]),
    ),
]


@pytest.mark.parametrize("what, breakage", BREAKAGES, ids=[b[0] for b in BREAKAGES])
def test_a_broken_results_file_fails_validation(results, what, breakage):
    broken = copy.deepcopy(results)
    breakage(broken)
    assert _errors(broken), f"{what} should not validate"
