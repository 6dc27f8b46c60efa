"""The README's commands run as written, from a fresh copy of `examples/`, in a temporary folder.

Every ```bash block of README.md is run in order, each in a fresh `bash` whose working folder is
the temporary root (so each block starts with `cd examples`, as a reader's would). A command's
trailing comment may carry markers (the convention is documented in CONTRIBUTING.md):

* `# exit N` — the exit code the command must return (default 0);
* `# ci: skip (why)` — not run here (it installs, or it is the long default run another test covers);
* `# ci: --flag value …` — run with these arguments appended (options given twice: the last wins),
  e.g. `--dry-run` or a smaller `--models` for a slow audit.

Both markers may share a comment: `# exit 1; ci: --models 400`.

The blocks run in two files so that `make test`'s two workers share them (`--dist loadfile` keeps a
file on one worker; run in one test they were the suite's longest, ~2-3 min of ~25 fresh processes):
this file runs `make_inputs.py`'s block and every block that reads what it writes (`data/`, `gated/`),
in README order; `tests/test_readme_examples_no_inputs.py` runs the others, each half in its own fresh
copy of `examples/`. Every runnable block belongs to exactly one half (`readme_blocks_for`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import preloaded_cli_command

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_README_LINES = 350


@dataclass(frozen=True)
class ReadmeCommand:
    text: str  # the command as the README shows it (continuations joined)
    expected_exit: int
    ci_args: str  # appended in CI
    skip: str | None  # reason, when not run here

    def script_line(self) -> str:
        return f"{self.text} {self.ci_args}".strip()


def bash_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", markdown, flags=re.S | re.M)


def parse_block(block: str) -> list[ReadmeCommand]:
    logical: list[str] = []
    pending = ""
    for raw in block.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    commands = []
    for line in logical:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        command, _, comment = stripped.partition(" # ")
        expected, ci_args, skip = 0, "", None
        for marker in (m.strip() for m in comment.split(";")):
            if m := re.search(r"\bexit (\d+)\b", marker):
                expected = int(m.group(1))
            elif marker.startswith("ci: skip"):
                skip = marker[len("ci: skip") :].strip(" ()") or "marked skip"
            elif marker.startswith("ci:"):
                ci_args = marker[len("ci:") :].strip()
        commands.append(ReadmeCommand(" ".join(command.split()), expected, ci_args, skip))
    return commands


def readme_commands() -> list[list[ReadmeCommand]]:
    return [parse_block(block) for block in bash_blocks(README.read_text(encoding="utf-8"))]


def test_marker_parsing_reads_exit_codes_and_ci_arguments():
    block = "cd examples\nprivacy-audit a --x 1   # exit 1; ci: --x 2\nmake audit  # ci: skip (slow)\nfoo \\\n  --bar\n"
    parsed = parse_block(block)
    assert [c.text for c in parsed] == ["cd examples", "privacy-audit a --x 1", "make audit", "foo --bar"]
    assert parsed[1].expected_exit == 1 and parsed[1].script_line() == "privacy-audit a --x 1 --x 2"
    assert parsed[2].skip == "slow" and parsed[3].skip is None and parsed[3].expected_exit == 0


def test_readme_is_short_and_every_command_it_shows_exists():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_README_LINES
    from typer.main import get_command

    from audit.cli.app import app

    known = set(get_command(app).commands)
    shown = {m for block in readme_commands() for c in block for m in re.findall(r"privacy-audit ([a-z-]+)", c.text)}
    assert shown and shown <= known, shown - known
    for block in readme_commands():  # every block that does something runs something here
        assert any(c.skip is None for c in block) or all(c.skip for c in block)


def _shims(folder: Path, cli_socket: Path) -> dict[str, str]:
    """`python` and `privacy-audit` on PATH = this interpreter, running this checkout's code. Each
    `privacy-audit` command is its own process forked from tests/cli_server.py, which imported torch,
    MLflow, scikit-learn, SciPy, pandas and Opacus once: ~20 commands would each pay ~4-11 s of CPU
    importing them in a fresh interpreter (tests/test_cli_startup.py checks a fresh one's start-up)."""
    folder.mkdir()
    client = " ".join(f'"{part}"' for part in preloaded_cli_command(cli_socket))
    for name, target in (
        ("python", f'exec "{sys.executable}" "$@"'),
        ("privacy-audit", f'exec {client} "$@"'),
    ):
        shim = folder / name
        shim.write_text(f"#!/bin/sh\n{target}\n")
        shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "PRIVACY_AUDIT_"))}
    env["PATH"] = f"{folder}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)
    return env


def uses_example_inputs(block: list[ReadmeCommand]) -> bool:
    """A block that runs `make_inputs.py` or reads what it writes (`examples/data/`, then `gated/`)."""
    return any(re.search(r"make_inputs\.py|\bdata/|\bgated/", c.text) for c in block if c.skip is None)


def readme_blocks_for(needs_inputs: bool) -> list[tuple[int, list[ReadmeCommand]]]:
    """The README's runnable blocks (README order, with their index) of one half: those that use
    `make_inputs.py`'s outputs (this file) or those that do not (`test_readme_examples_no_inputs.py`)."""
    return [
        (index, block)
        for index, block in enumerate(readme_commands())
        if not all(c.skip for c in block) and uses_example_inputs(block) == needs_inputs
    ]


def test_the_two_halves_run_every_runnable_block_once_and_inputs_come_first():
    with_inputs, without = readme_blocks_for(True), readme_blocks_for(False)
    runnable = [i for i, block in enumerate(readme_commands()) if not all(c.skip for c in block)]
    assert sorted(i for i, _ in with_inputs + without) == runnable
    assert with_inputs and without
    # the half that reads data/ starts with the block that writes it
    assert any("make_inputs.py" in c.text for c in with_inputs[0][1])
    assert sum(1 for _, block in with_inputs + without for c in block if c.skip is None) >= 10


def run_readme_blocks(tmp_path: Path, blocks: list[tuple[int, list[ReadmeCommand]]], cli_socket: Path) -> int:
    """Run the blocks, in order, from one fresh copy of `examples/`; return how many commands ran."""
    workdir = tmp_path / "clone"
    workdir.mkdir()
    shutil.copytree(
        ROOT / "examples",
        workdir / "examples",
        symlinks=False,
        ignore=shutil.ignore_patterns("data", "runs", "gated", "mlflow.db", "mlartifacts", "__pycache__"),
    )
    env = _shims(tmp_path / "bin", cli_socket)
    ran = 0
    for index, block in blocks:
        script = ["set -u"]
        for command in block:
            if command.skip:
                continue
            line = command.script_line()
            script.append(
                f'{line}\nrc=$?; if [ "$rc" != {command.expected_exit} ]; then '
                f'echo "README block {index}: exit $rc, expected {command.expected_exit}: {line}" >&2; exit 99; fi'
            )
            ran += 1
        result = subprocess.run(
            ["bash", "-c", "\n".join(script)], cwd=workdir, env=env, capture_output=True, text=True, timeout=1800
        )
        assert result.returncode == 0, (result.stderr[-4000:], result.stdout[-2000:])
    # no command left an internal error's log behind, wherever it ran
    assert not list(workdir.rglob("privacy-audit-crash*"))
    return ran


@pytest.mark.slow  # ~10 CLI processes, make_inputs.py's training included
def test_readme_code_blocks_run_from_a_fresh_copy(tmp_path, preloaded_cli_socket):
    """The blocks that use `make_inputs.py`'s outputs; the others: test_readme_examples_no_inputs.py."""
    assert run_readme_blocks(tmp_path, readme_blocks_for(True), preloaded_cli_socket) >= 4
