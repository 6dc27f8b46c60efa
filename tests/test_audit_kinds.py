"""The single-audit kinds are declared once (audit/machinery/audit_kinds.py) and that table is the wiring:
every kind has its schema definition, its command, a report method text and loadable builders, and the
consumers (policy, gate's file lookup, the ledger) answer from the table."""

from __future__ import annotations

import json

import pytest

from audit.errors import AuditInputError
from audit.machinery.audit_kinds import AUDIT_KINDS, audit_kind, load


def test_every_kind_has_its_schema_definition_command_method_and_builders():
    import audit.cli  # noqa: F401 - registers the commands
    from audit.cli.app import app
    from audit.dp_validation.result_files import SCHEMA_PATH

    defs = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))["$defs"]
    commands = {c.name for c in app.registered_commands}
    for kind in AUDIT_KINDS.values():
        assert kind.schema_def in defs, kind.name
        assert kind.name in commands, kind.name
        assert kind.result_file == f"{kind.name}.json"
        assert len(kind.method) > 100  # the report's method section says what the audit does
        for builder in (kind.verdict, kind.report_section, kind.numbers_check, kind.power, kind.ledger_source):
            assert builder is None or callable(load(builder)), (kind.name, builder)


def test_the_consumers_read_the_table():
    from audit.machinery.policy import SINGLE_AUDIT_KINDS

    assert tuple(AUDIT_KINDS) == SINGLE_AUDIT_KINDS
    with pytest.raises(AuditInputError) as info:
        audit_kind("canary-audits", "gate RESULTS")
    assert info.value.where == "gate RESULTS" and "canary-audit" in str(info.value)


def test_the_ledger_records_exactly_the_kinds_with_a_ledger_source():
    from audit.ledger.sources import releases_in_results

    canary = {"claim": {"epsilon": 2.0, "delta": 1e-5}, "trainer": "demo:train"}
    releases, _, kind = releases_in_results(canary, "canary-audit.json")
    assert kind == "canary-audit" and AUDIT_KINDS[kind].ledger_source
    assert releases[0][1] == [{"kind": "epsilon_delta", "epsilon": 2.0, "delta": 1e-5}]
    with pytest.raises(AuditInputError) as info:
        releases_in_results({"mechanism": "m", "claimed_epsilon": 1.0}, "mechanism-audit.json")
    recordable = [k.name for k in AUDIT_KINDS.values() if k.ledger_source]
    assert " / ".join(recordable) in str(info.value)
