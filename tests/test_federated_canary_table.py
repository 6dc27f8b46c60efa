"""The federated job's per-level table (console, report.html, summary.md) shows the "canary clients
(one-run)" row beside the membership rows, with its status, ceiling and bound from the verdict, the way
the sweep's table shows its "white-box one-run" row; the labels say which twin it was.

tests/data/results_federated_canary_clients_example.json is a real client-level run (the `clients`
preset at n_rows 800, hidden [8], 6 clients, 3 rounds, q = 1, ε 2 and 8, 200 canary clients,
client_mia_runs 2; commit 960f0f3), its per-client attack records dropped to keep the file small (its
verdict is the run's own).
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from rich.console import Console

from reports.console import results_summary_table
from reports.federated_tables import LEVEL_HEADERS, level_rows
from reports.html_tables import _whitebox_cell
from reports.markdown_summary import render_summary_markdown

DATA = Path(__file__).parent / "data"
WORDS = {"pass": "held", "fail": "refuted", "inconclusive": "untestable"}


@pytest.fixture(scope="module")
def federated():
    from audit.machinery.verdict import verdict_for_results

    # as `report` reads a stored results.json: its verdict recomputed from its numbers in today's words
    return verdict_for_results(json.loads((DATA / "results_federated_canary_clients_example.json").read_text()))[0]


def _canary_checks(results):
    return {c["subject"]: c for c in results["verdict"]["checks"] if c["name"].endswith(" · canary clients (one-run)")}


def test_each_client_level_target_has_its_canary_row_with_the_verdicts_status_and_ceiling(federated):
    rows = [dict(zip(LEVEL_HEADERS, row)) for row in level_rows(federated)]
    canary_rows = [r for r in rows if r["attack"] == "canary clients (one-run)"]
    checks = _canary_checks(federated)
    assert len(canary_rows) == len(checks) == 2
    for index, row in enumerate(canary_rows):
        target, check = federated["targets"][index], checks[f"targets[{index}]"]
        twin = target["whitebox_one_run"]
        # canary clients have no proven or measured power: a passing row reads "not refuted", never held
        word = (
            "not refuted"
            if check["outcome"] == "pass" and check["power"]["kind"] == "none"
            else WORDS[check["outcome"]]
        )
        assert row["claim"] == word and row["level"] == "client"
        assert row["1-run ceiling"] == f"{check['ceiling']:.2f}"
        assert row["ε LB (1-run)"] == f"{twin['steinke_epsilon']:.2f}" and row["candidates"] == f"{twin['m']} canaries"
    assert {r["claim"] for r in canary_rows} == {
        "not refuted",
        "untestable",
    }  # this run: ε 2 not refuted, ε 8 untestable
    # The membership rows carry their verdict word too; the server, which client-level DP trusts, is shown only.
    assert {r["claim"] for r in rows if r["attack"].startswith("server_update")} == {"shown"}
    assert all(
        r["claim"] in ("held", "not refuted", "refuted", "untestable")
        for r in rows
        if r["level"] in ("record", "client")
    )


def test_summary_console_and_report_name_the_canary_client_row(federated):
    summary = render_summary_markdown(federated)
    assert "| " + " | ".join(LEVEL_HEADERS) + " |" in summary and "| canary clients (one-run) |" in summary
    console = Console(record=True, width=200)
    console.print(results_summary_table(federated))
    text = console.export_text()
    assert "canary clients 1-run" in text and "white-box 1-run" not in text and "twin federation" in text
    assert "canary clients in a twin federation" in _whitebox_cell(federated["targets"][0])


def test_the_sweep_keeps_its_white_box_row_and_has_no_federated_table():
    sweep = json.loads((DATA / "results_one_run_example.json").read_text())
    assert level_rows(sweep) == []
    console = Console(record=True, width=200)
    console.print(results_summary_table(sweep))
    assert "white-box 1-run" in console.export_text() and "canary clients" not in console.export_text()
    assert "canaries in a twin, every iterate" in _whitebox_cell(sweep["targets"][0])


def test_the_real_federated_result_validates_against_the_schema(federated):
    schema = json.loads((Path(__file__).resolve().parents[1] / "audit" / "schema" / "results.schema.json").read_text())
    assert [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(federated)] == []
    assert federated["targets"][0]["whitebox_one_run"]["family"] == "canary clients (one-run)"
