"""tests/cli_server.py, the preloaded CLI: a command forked from it ends, prints and exits as the same
command run in this process does, and the client's exit code is the command's."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli_in_process, run_cli_preloaded

pytestmark = pytest.mark.slow  # the server imports torch, MLflow, sklearn, SciPy, pandas, Opacus (~11 s of CPU)

CASES = [
    ["presets"],  # exit 0, a table on stdout
    ["accountants", "--noise-multiplier", "-1", "--sample-rate", "0.01", "--steps", "10"],  # exit 2, one line
]


@pytest.mark.parametrize("args", CASES, ids=lambda args: args[0])
def test_a_forked_command_gives_what_the_same_command_gives_in_process(args, tmp_path, preloaded_cli_socket):
    forked = run_cli_preloaded(*args, cwd=tmp_path, socket_path=preloaded_cli_socket, timeout=300)
    here = run_cli_in_process(*args, cwd=tmp_path)
    assert (forked.returncode, forked.stdout, forked.stderr) == (here.returncode, here.stdout, here.stderr)
    assert forked.returncode == (0 if args == ["presets"] else 2)


def test_a_usage_error_names_the_program_as_a_user_sees_it(tmp_path, preloaded_cli_socket):
    # in this process the usage line would name pytest's own argv[0]: the forked command's is the user's
    forked = run_cli_preloaded("no-such-command", cwd=tmp_path, socket_path=preloaded_cli_socket, timeout=300)
    assert forked.returncode == 2 and forked.stdout == ""
    assert forked.stderr == "error: privacy-audit: No such command 'no-such-command'.\n"
