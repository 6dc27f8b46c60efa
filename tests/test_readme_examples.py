"""The README's commands run as written, from a fresh copy of `examples/`, in a temporary folder.

Every ```bash block of README.md is run in order, each in a fresh `bash` whose working folder is
the temporary root (so each block starts with `cd examples`, as a reader's would). A command's
trailing comment may carry markers (the convention is documented in CONTRIBUTING.md):

* `# exit N` — the exit code the command must return (default 0);
* `# ci: skip (why)` — not run here (it installs, or it is the long default run another test covers);
* `# ci: --flag value …` — run with these arguments appended (options given twice: the last wins),
  e.g. `--dry-run` or a smaller `--models` for a slow audit.

Both markers may share a comment: `# exit 1; ci: --models 400`.
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


def _shims(folder: Path) -> dict[str, str]:
    """`python` and `privacy-audit` on PATH = this interpreter, running this checkout's code."""
    folder.mkdir()
    for name, target in (
        ("python", f'exec "{sys.executable}" "$@"'),
        ("privacy-audit", f'exec "{sys.executable}" -m audit.cli "$@"'),
    ):
        shim = folder / name
        shim.write_text(f"#!/bin/sh\n{target}\n")
        shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "PRIVACY_AUDIT_"))}
    env["PATH"] = f"{folder}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)
    return env


@pytest.mark.slow
def test_readme_code_blocks_run_from_a_fresh_copy(tmp_path):
    workdir = tmp_path / "clone"
    workdir.mkdir()
    shutil.copytree(
        ROOT / "examples",
        workdir / "examples",
        symlinks=False,
        ignore=shutil.ignore_patterns("data", "runs", "gated", "mlflow.db", "mlartifacts", "__pycache__"),
    )
    env = _shims(tmp_path / "bin")
    ran = 0
    for index, block in enumerate(readme_commands()):
        if all(c.skip for c in block):
            continue
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
    assert ran >= 10
    assert not list(workdir.glob("runs")) or not any(
        p.name.startswith("privacy-audit-crash") for p in (workdir / "runs").iterdir()
    )
