"""One registry of estimators (audit/statistics/estimators.py): its views are what the attack rows, the
verdict's tags, the policy and the null-data tests read, each function is where the registry says, and
docs/statistics.md's table lists exactly the registered estimators with their papers (issue #37, item 2)."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import jsonschema

from audit.statistics.estimators import ESTIMATOR_REGISTRY, attack_row_scopes, proven_attack_bounds

DOC = Path(__file__).resolve().parents[1] / "docs" / "statistics.md"
SCHEMA = Path(__file__).resolve().parents[1] / "audit" / "schema" / "results.schema.json"


def _proven_where_rows() -> dict[str, str]:
    """{title: row} of the table under "Which bound is proven where" (first cell `**title** ...`)."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Which bound is proven where", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\| \*\*(.+?)\*\*", line)
        if match:
            rows[match.group(1)] = line
    return rows


def test_the_doc_table_lists_exactly_the_registered_estimators_with_paper_and_function():
    rows = _proven_where_rows()
    assert set(rows) == {e.title for e in ESTIMATOR_REGISTRY.values()}
    for estimator in ESTIMATOR_REGISTRY.values():
        row = rows[estimator.title]
        assert f"`{estimator.code}`" in row.rsplit("|", 2)[-2], estimator.name  # the code column names it
        for paper in estimator.paper.split(";"):
            surname, year = paper.split(",")[0].split()[0], re.search(r"\b(19|20)\d\d\b", paper)
            assert surname in row and year and year.group(0) in row, (estimator.name, paper)
        decides = row.split("|")[4]  # "**yes**" where it decides in its setting (attack rows: one model)
        assert decides.strip().startswith("**yes**") == estimator.decides, estimator.name


def test_each_function_is_where_the_registry_says_and_cites_its_paper():
    for estimator in ESTIMATOR_REGISTRY.values():
        module, _, name = estimator.code.rpartition(".")
        assert getattr(importlib.import_module(f"audit.statistics.{module}"), name) is estimator.function
        doc = (
            " ".join((estimator.function.__doc__ or "").split())
            + " "
            + (importlib.import_module(estimator.function.__module__).__doc__ or "")
        )
        assert estimator.paper.split(",")[0].split()[0] in doc, estimator.name


def test_the_views_read_the_registry():
    from audit.machinery.verdict_words import verdict_tags
    from audit.statistics.attack_evaluation import BOUND_SCOPES, PROVEN_BOUNDS
    from audit.statistics.estimators import ESTIMATORS

    assert attack_row_scopes() == BOUND_SCOPES and PROVEN_BOUNDS == proven_attack_bounds() == ("one_run",)
    assert {n: e.function for n, e in ESTIMATOR_REGISTRY.items() if e.score_based} == ESTIMATORS
    tags = verdict_tags({"status": "pass", "claims": []})
    for name, scope in BOUND_SCOPES.items():
        assert tags[f"bound.{name}.assumption"] == scope["assumption"]
    # every scope entry is valid under the results schema's definition of one
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator({**schema, "$ref": "#/$defs/scope", "properties": {}, "required": []})
    for scope in BOUND_SCOPES.values():
        validator.validate(scope)
