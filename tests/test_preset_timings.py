"""One source of time estimates: `presets`, `run --dry-run`, the README and the docs show the same
measured figures, all from audit/machinery/preset_timings.py."""

from __future__ import annotations

import pytest

from audit.cli import main
from audit.machinery.config import PRESETS
from audit.machinery.preset_timings import PRESET_WALL_TIMES, duration_text, expected_time_line
from tests.conftest import REPO


def _invoke(capsys, *args):
    with pytest.raises(SystemExit) as ended:
        main(list(args))
    out = capsys.readouterr()
    return ended.value.code, out.out, out.err


def test_every_preset_has_an_entry_measured_or_marked_not_measured():
    assert set(PRESET_WALL_TIMES) == set(PRESETS)
    for measured in PRESET_WALL_TIMES.values():
        if measured is not None:
            assert 0 < measured.low_s <= measured.high_s and measured.command and measured.machine


def test_every_preset_says_what_it_is_for():
    # `presets` listed the llm preset as "llm              ; measured …": no description had been written.
    from audit.cli.presets_command import _DESCRIPTIONS

    assert set(_DESCRIPTIONS) == set(PRESETS)
    assert all(text.strip() for text in _DESCRIPTIONS.values())


def test_durations_read_as_a_person_says_them():
    assert duration_text(40) == "40 s" and duration_text(68) == "1 min 8 s" and duration_text(420) == "7 min"
    assert duration_text(3 * 3600 + 120) == "3 h 2 min"


def test_presets_and_dry_run_print_the_table_s_figures(capsys, tmp_path):
    code, out, _ = _invoke(capsys, "presets")
    assert code == 0
    for name in PRESETS:
        assert expected_time_line(name) in out
    code, out, err = _invoke(
        capsys,
        "run",
        "--preset",
        "smoke",
        "--dry-run",
        "--out",
        str(tmp_path / "runs"),
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'm.db'}",
    )
    assert code == 0, err
    assert expected_time_line("smoke") in out
    assert "presets" not in " ".join(p.name for p in tmp_path.iterdir())  # nothing written but what it checked


def test_the_docs_table_and_the_readme_show_the_same_figures():
    docs = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    for name, measured in PRESET_WALL_TIMES.items():
        row = next(line for line in docs.splitlines() if line.startswith(f"| `{name}` |"))
        if measured is None:
            assert "not measured" in row
        else:
            assert f"| {measured.text()} | `{measured.command}` | {measured.machine} |" in row
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert PRESET_WALL_TIMES["default"].text() in readme
