"""Library errors name parameters, the commands name flags (issue #37): audit/cli/parameter_flags.py's one table."""

import pytest
import typer

from audit.cli import app
from audit.cli.parameter_flags import FLAG_COMMANDS, PARAMETER_FLAGS, flag_error
from audit.errors import AuditInputError


def _flags_of(command_name: str) -> set[str]:
    group = typer.main.get_command(app)
    command = group.commands[command_name]  # type: ignore[attr-defined]
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}


def test_every_flag_in_the_table_is_a_flag_of_a_command_that_uses_the_table():
    assert set(typer.main.get_command(app).commands) >= FLAG_COMMANDS  # type: ignore[attr-defined]
    flags = set().union(*(_flags_of(name) for name in FLAG_COMMANDS))
    assert {flag for flag in PARAMETER_FLAGS.values() if flag not in flags} == set()


def test_a_library_error_naming_a_parameter_is_shown_under_the_commands_flag():
    from audit.dp_validation.whitebox_audit import run_whitebox_audit

    with pytest.raises(AuditInputError) as info:
        run_whitebox_audit(builtin=True, noise_multiplier=2.0, n_runs=0)
    assert info.value.where == "n_runs"  # the Python caller's name
    shown = flag_error(info.value, "whitebox-audit")
    assert (shown.where, shown.message) == ("--runs", info.value.message)
    assert flag_error(info.value, "run") is info.value  # other commands: untouched
    assert flag_error(AuditInputError("members 'x.csv'", "m"), "whitebox-audit").where == "members 'x.csv'"


@pytest.mark.parametrize(
    "args, flag",
    [
        (["whitebox-audit", "--builtin", "--noise-multiplier", "2", "--runs", "0"], "--runs"),
        (["whitebox-audit", "--builtin", "--noise-multiplier", "2", "--delta", "0"], "--delta"),
        (["accountants", "--noise-multiplier", "1", "--sample-rate", "2", "--steps", "10"], "--sample-rate"),
        (["mechanism-audit", "--mechanism", "no colon"], "--mechanism"),
    ],
)
def test_the_command_line_names_the_flag(tmp_path, args, flag):
    from tests.conftest import run_cli_in_process

    done = run_cli_in_process(*args, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1].startswith(f"error: {flag}: ")
