"""The console tables as a person sees them: in a real 80-column terminal nothing is cut to `…`."""

from __future__ import annotations

import copy
import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

from rich.console import Console

from reports.console import results_summary_table, synthetic_summary_table
from tests.conftest import REPO

EXAMPLE = REPO / "tests" / "data" / "results_default_example.json"


def _with_every_attack(results: dict) -> dict:
    """The example run has one attack; the widest layout has all five, with the longest name."""
    results = copy.deepcopy(results)
    for target in results["targets"]:
        for name in ("shadow", "lira_online", "lira_offline", "rmia"):
            target["attacks"].append({**copy.deepcopy(target["attacks"][0]), "name": name})
    return results


def _run_in_terminal(args: list[str], cwd: Path, columns: int = 80) -> str:
    """Run a command on a pseudo-terminal of `columns` columns and return what it drew."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES", "NO_COLOR")}
    env.update(PYTHONPATH=str(REPO), TERM="xterm-256color")
    proc = subprocess.Popen(args, cwd=cwd, stdin=follower, stdout=follower, stderr=follower, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closes when the command exits
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=120) == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode("utf-8", errors="replace")


def test_report_tables_in_an_80_column_terminal_cut_nothing(tmp_path):
    results = _with_every_attack(json.loads(EXAMPLE.read_text()))
    (tmp_path / "results.json").write_text(json.dumps(results))
    drawn = _run_in_terminal([sys.executable, "-m", "audit", "report", "results.json", "--out", "out"], tmp_path)
    assert "lira_offline" in drawn and "0.632 (0.61–0.65)" in drawn  # the widest cells, whole
    assert "…" not in drawn


def test_every_line_of_the_tables_fits_80_columns():
    results = _with_every_attack(json.loads(EXAMPLE.read_text()))
    results["synthetic"] = [
        {
            "generator": "gaussian_copula",
            "epsilon_target": None,
            "dcr": {"dcr_share": 0.5123, "dcr_share_ci": [0.49, 0.53]},
            "nndr": {"p10": 0.61},
            "mia": {"auc": 0.51, "epsilon_lb": {"clopper_pearson": 0.0}},
            "flags": [{"check": "dcr_share"}, {"check": "nndr"}],
        }
    ]
    console = Console(width=80, record=True, file=open(os.devnull, "w"))
    console.print(results_summary_table(results))
    console.print(synthetic_summary_table(results))
    text = console.export_text()
    assert "…" not in text
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
    for target in results["targets"]:
        assert text.count(f"{target['test_accuracy']:.3f}") >= 1  # every target's block is there
