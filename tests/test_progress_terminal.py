"""Progress that never goes blind: `run --preset smoke` on an 80-column terminal (a real pseudo-terminal, python's
`pty`) shows, for every step, its done/total and — for a step with a total, once one unit is done — the time left;
a narrow terminal shortens the description, never the counts or the time left (issue #40, item 3)."""

from __future__ import annotations

import os
import re
import select
import struct
import sys
import time
from pathlib import Path

import pytest

pty = pytest.importorskip("pty")
fcntl = pytest.importorskip("fcntl")
termios = pytest.importorskip("termios")

ROOT = Path(__file__).resolve().parent.parent
COLUMNS = 80
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
# One live row: spinner, description (maybe shortened with …), bar, counts, elapsed, time left.
ROW = re.compile(
    r"^[" + SPINNER + r"] (?P<description>.+?) [━╸╺ ]+ (?P<counts>\d+(/\d+)?) +(?P<elapsed>\d+:\d\d:\d\d)"
    r"(?: (?P<left>left \?|left (\d+:)?\d\d:\d\d|finishing))?$"
)


def _run_under_pty(args: list[str], cwd: Path, timeout_s: float = 900) -> tuple[int, str]:
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, on the terminal
        os.chdir(cwd)
        os.environ.update(COLUMNS=str(COLUMNS), LINES="40", TERM="xterm-256color")
        os.environ.pop("NO_COLOR", None)
        os.execv(sys.executable, [sys.executable, "-m", "audit", *args])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, COLUMNS, 0, 0))
    chunks, deadline = [], time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if not ready:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode("utf-8", "replace")


def terminal_rows(raw: str) -> list[str]:
    """Every row the terminal showed, from what rich's live display sends (text, CR, LF, erase line, cursor up);
    colours dropped. A tiny emulator: enough for rich's live progress, nothing more."""
    screen, row, col, shown = [""], 0, 0, []
    for token in re.split(r"(\x1b\[[0-9;?]*[A-Za-z]|\r|\n)", raw):
        if not token:
            continue
        if token == "\n":
            shown.append(screen[row])
            row, col = row + 1, 0
            if row == len(screen):
                screen.append("")
        elif token == "\r":
            col = 0
        elif token == "\x1b[2K":
            shown.append(screen[row])
            screen[row] = ""
        elif token == "\x1b[1A":
            row = max(0, row - 1)
        elif not token.startswith("\x1b"):
            line = screen[row].ljust(col)
            screen[row] = line[:col] + token + line[col + len(token) :]
            col += len(token)
    return [r.rstrip() for r in shown + screen if r.strip()]


def _seconds(clock: str) -> int:
    h, m, s = (int(v) for v in clock.split(":"))
    return 3600 * h + 60 * m + s


@pytest.mark.slow  # the smoke preset's steps for one small ε = 1 target, in a fresh process on a terminal
def test_smoke_run_on_an_80_column_terminal_shows_counts_and_time_left_for_every_step(tmp_path):
    # The smoke preset cut to one small DP target: every kind of step it shows (training epochs, all five attacks,
    # shadow and reference models, the white-box twin, conformance probes, figures, report). What is checked is how
    # each row is drawn at 80 columns, not the audit's size: 600 rows, a [32] MLP, 4 reference models, 100 canaries;
    # batch 16 keeps Opacus's Poisson rate low (PRV's calibration at the small set's q = 1/2 took ~10 s of CPU).
    (tmp_path / "one-target.yaml").write_text(
        "data:\n  n_rows: 600\n"
        "training:\n  hidden_sizes: [32]\n  epochs: 4\n  batch_size: 16\n"
        "privacy:\n  epsilons: [1.0]\n  one_run_canaries: 100\n"
        "attacks:\n  n_shadow_models: 2\n  n_reference_models: 4\n  rmia_population: 100\n",
        encoding="utf-8",
    )
    code, raw = _run_under_pty(
        [
            "run",
            "--preset",
            "smoke",
            "--config",
            str(tmp_path / "one-target.yaml"),
            "--out",
            str(tmp_path / "runs"),
            "--tracking-uri",
            f"sqlite:///{tmp_path}/m.db",
        ],
        tmp_path,
    )
    assert code == 0, raw[-3000:]
    rows = terminal_rows(raw)
    live = [r for r in rows if r[:1] in SPINNER]
    assert live, "no live progress row was shown"
    assert all(len(r) <= COLUMNS for r in live)
    by_step: dict[str, list[re.Match]] = {}
    for r in live:
        match = ROW.match(r)
        assert match, f"a progress row lost its counts or its time left at {COLUMNS} columns: {r!r}"
        by_step.setdefault(match["description"].strip(), []).append(match)
    # The reference models' row by its start: with the side lane's rows beside it (the twin, the conformance probes)
    # rich aligns the columns and cuts its description shorter ("8 reference mode…"); counts and time left stay.
    assert any(re.search(r": \d+ ref", d) for d in by_step) and any(d.startswith("targets") for d in by_step)
    for description, matches in by_step.items():
        assert all(m["counts"] for m in matches), description
        with_total = [m for m in matches if "/" in m["counts"]]
        long = max(_seconds(m["elapsed"]) for m in matches) >= 10
        if with_total:
            # Once a unit is done (and before the last), the time left is a clock, not "?".
            done_total = [(m, *(int(v) for v in m["counts"].split("/"))) for m in with_total]
            between = [m for m, done, total in done_total if 0 < done < total]
            assert all(m["left"] not in (None, "left ?", "finishing") for m in between), description
            if long and done_total[0][2] > 1:
                assert between, f"{description!r} ran ≥ 10 s and never showed a unit done before the last"
        elif long:
            pytest.fail(f"the step {description!r} ran ≥ 10 s without a total: {matches[-1].group(0)!r}")
