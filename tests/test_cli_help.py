"""What a person reads first: `--help` of every command, `--version`, `python -m audit`, `presets`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import typer.main
import yaml

from audit.cli import app, main
from audit.machinery.config import PRESETS, resolve_config
from tests.conftest import REPO

COMMAND = typer.main.get_command(app)


def _all_commands(group=COMMAND, prefix=()):
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _all_commands(command, (*prefix, name))
        yield (*prefix, name), command


def _invoke(capsys, *args: str) -> tuple[int, str, str]:
    """`privacy-audit ARGS` in this process (a fresh interpreter per case would cost seconds each)."""
    with pytest.raises(SystemExit) as ended:
        main(list(args))
    out = capsys.readouterr()
    return ended.value.code, out.out, out.err


def _help(monkeypatch, capsys, *path: str) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = _invoke(capsys, *path, "--help")
    assert code == 0, err
    return out


def test_every_option_of_every_command_has_help_text():
    missing = [
        f"{' '.join(path)} {param.opts[0]}"
        for path, command in _all_commands()
        for param in command.params
        if param.name != "help" and not getattr(param, "help", None) and param.param_type_name == "option"
    ]
    assert missing == []


def test_every_boolean_option_is_an_on_off_switch():
    # `--flag <bool>` invites `--flag true`, which click refuses; a `--x/--no-x` pair takes no value.
    flags = [
        (path, param)
        for path, command in _all_commands()
        for param in command.params
        if getattr(param, "is_flag", False) and param.name not in ("help", "version")
    ]
    assert flags, "expected boolean options (e.g. synth-check --membership-randomized)"
    assert [f"{' '.join(path)} {param.opts[0]}" for path, param in flags if not param.secondary_opts] == []


@pytest.mark.parametrize("path", [(), *(path for path, _ in _all_commands())], ids=" ".join)
def test_help_at_80_columns_is_neither_cut_nor_templated(monkeypatch, capsys, path):
    text = _help(monkeypatch, capsys, *path)
    assert "…" not in text and "..." not in text.replace("[ARGS]...", "")
    assert "{" not in text.splitlines()[0] + text.splitlines()[1] and "<bool>" not in text


def test_usage_line_names_the_argument_plainly(monkeypatch, capsys):
    assert "gate [OPTIONS] RESULTS\n" in _help(monkeypatch, capsys, "gate")


def test_a_value_after_a_switch_is_one_error_line_exit_2(capsys):
    code, _, err = _invoke(
        capsys,
        "synth-check",
        "--membership-randomized",
        "true",
        "--train",
        "a.csv",
        "--holdout",
        "b.csv",
        "--synthetic",
        "c.csv",
    )
    assert code == 2
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1


def test_version_matches_the_installed_distribution():
    # A real `python -m audit`: the module entry point and the eager --version option end to end.
    from importlib.metadata import version

    proc = subprocess.run(
        [sys.executable, "-m", "audit", "--version"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0 and proc.stdout.strip() == f"privacy-audit {version('privacy-audit')}"


def test_presets_lists_every_preset_and_policy(capsys):
    code, out, err = _invoke(capsys, "presets")
    assert code == 0, err
    for name in (*PRESETS, "policy-strict", "policy-lenient"):
        assert name in out


def test_a_dumped_preset_is_a_config_that_resolves_to_the_preset(capsys, tmp_path):
    target = tmp_path / "smoke.yaml"
    code, _, err = _invoke(capsys, "presets", "dump", "smoke", str(target))
    assert code == 0, err
    assert resolve_config("default", target) == resolve_config("smoke")
    code, _, err = _invoke(capsys, "presets", "dump", "smoke", str(target))
    assert code == 2 and "--force" in err


def test_presets_show_prints_a_policy_that_loads(capsys, tmp_path):
    from audit.machinery.policy import load_policy

    code, out, err = _invoke(capsys, "presets", "show", "policy-strict")
    assert code == 0, err
    assert yaml.safe_load(out)["name"] == "strict"
    (tmp_path / "p.yaml").write_text(out)
    assert load_policy(tmp_path / "p.yaml") is not None


def test_an_unknown_preset_name_is_exit_2_with_the_choices(capsys):
    code, _, err = _invoke(capsys, "presets", "show", "nope")
    assert code == 2 and "smoke" in err and "policy-strict" in err


def test_ctrl_c_in_a_command_exits_130_and_a_bug_exits_3_not_1(capsys, monkeypatch, tmp_path):
    import audit.cli.presets_command as presets_command

    def interrupted(name):
        raise KeyboardInterrupt

    monkeypatch.setattr(presets_command, "preset_yaml", interrupted)
    code, _, err = _invoke(capsys, "presets", "show", "smoke")
    assert code == 130

    def broken(name):
        raise RuntimeError("a bug")

    monkeypatch.setattr(presets_command, "preset_yaml", broken)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    code, _, err = _invoke(capsys, "presets", "show", "smoke")
    assert code == 3 and "internal error: RuntimeError" in err and "Traceback" not in err
