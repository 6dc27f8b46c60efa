"""The exit-code flags in docs/errors.md match what each command's `--help` offers (issue 35, item 6):
`--fail-on-inconclusive` on every command that prints a verdict, `--allow-leak` where the subject is
the user's own release, `--fail-on-leak` kept (hidden) as the old spelling. Read from typer's own
command objects, so a flag added to a command without the docs (or the reverse) fails here."""

from __future__ import annotations

import re

import pytest
import typer.main

from tests.conftest import REPO

FLAG_ROW = re.compile(r"^\| `(--[a-z-]+)` \| ([a-z ,-]+) \|", re.MULTILINE)
NO_VERDICT = re.compile(r"^Commands that print no verdict: ([a-z ,-]+)\.$", re.MULTILINE)


def _commands() -> dict[str, object]:
    from audit.cli import app

    return dict(typer.main.get_command(app).commands)


def _options(command) -> dict[str, bool]:
    """Every option string of `command` (both halves of an on/off pair) → whether --help shows it."""
    out: dict[str, bool] = {}
    for param in command.params:
        for opt in (*param.opts, *getattr(param, "secondary_opts", ())):
            out[opt] = not getattr(param, "hidden", False)
    return out


def _documented() -> tuple[dict[str, set[str]], set[str]]:
    text = (REPO / "docs" / "errors.md").read_text()
    table = {flag: {c.strip() for c in commands.split(",")} for flag, commands in FLAG_ROW.findall(text)}
    (no_verdict,) = NO_VERDICT.findall(text)
    return table, {c.strip() for c in no_verdict.split(",")}


def test_the_docs_table_of_exit_code_flags_matches_every_commands_options():
    table, no_verdict = _documented()
    commands = _commands()
    assert set(table) == {"--fail-on-inconclusive", "--allow-leak", "--fail-on-leak"}
    for flag, documented in table.items():
        assert documented <= set(commands), f"{flag}: no such command {documented - set(commands)}"
        having = {name for name, command in commands.items() if flag in _options(command)}
        assert having == documented, (
            f"{flag}: --help has it on {sorted(having)}, docs/errors.md says {sorted(documented)}"
        )
    # Every command is either one that prints a verdict (and takes --fail-on-inconclusive) or named as one that does not.
    assert no_verdict | table["--fail-on-inconclusive"] == set(commands)
    assert not no_verdict & table["--fail-on-inconclusive"]


@pytest.mark.parametrize("name", ["audit-scores", "audit-model", "synth-check"])
def test_allow_leak_is_shown_and_the_old_fail_on_leak_is_hidden_but_accepted(name):
    options = _options(_commands()[name])
    assert options["--allow-leak"] and options["--fail-on-inconclusive"]
    assert options["--fail-on-leak"] is False and options["--no-fail-on-leak"] is False


def test_leak_fails_unless_allowed_and_contradicting_flags_are_refused():
    from audit.cli.verdict_flags import leak_fails
    from audit.errors import AuditInputError

    assert leak_fails(False) is True  # the default: a leak in the user's own release fails
    assert leak_fails(False, True) is True  # --fail-on-leak: the old spelling of the default
    assert leak_fails(True) is False and leak_fails(False, False) is False  # --allow-leak / --no-fail-on-leak
    with pytest.raises(AuditInputError, match="--allow-leak"):
        leak_fails(True, True)
