"""Files the audit writes are readable by whoever the umask allows (CI artifact hosts read them as another user)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from audit.machinery.checkpoints import TargetCheckpoints
from audit.machinery.run_directory import write_json_atomic, write_text_atomic
from tests.conftest import REPO


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_atomic_writers_give_0644_under_umask_022(tmp_path, umask_022):
    write_text_atomic(tmp_path / "summary.md", "# hi\n")
    write_json_atomic(tmp_path / "results.json", {"a": 1})
    TargetCheckpoints(tmp_path / "ckpt").save_json("state", {"b": 2})
    assert {
        _mode(p) for p in (tmp_path / "summary.md", tmp_path / "results.json", tmp_path / "ckpt" / "state.json")
    } == {0o644}


def test_a_stricter_umask_is_respected_too(tmp_path):
    previous = os.umask(0o077)
    try:
        write_text_atomic(tmp_path / "private.md", "x")
    finally:
        os.umask(previous)
    assert _mode(tmp_path / "private.md") == 0o600


def test_every_file_of_a_report_re_render_and_gate_is_0644(tmp_path, umask_022, capsys):
    from audit.cli import main

    results = json.loads((REPO / "tests" / "data" / "results_smoke_example.json").read_text())
    (tmp_path / "results.json").write_text(json.dumps(results))
    for args in (
        ["report", str(tmp_path / "results.json"), "--out", str(tmp_path / "out")],
        [
            "gate",
            str(tmp_path / "results.json"),
            "--policy",
            str(REPO / "examples" / "policy-lenient.yaml"),
            "--out",
            str(tmp_path / "out"),
        ],
    ):
        with pytest.raises(SystemExit):
            main(args)
    written = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"report.html", "summary.md", "junit.xml"}
    assert {p.name: _mode(p) for p in written} == {p.name: 0o644 for p in written}
