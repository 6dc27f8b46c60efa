"""`privacy-audit --help` and every command's `--help` start without the heavy libraries.

Each command imports what it needs inside its function (torch for training, MLflow for tracking, Opacus,
scikit-learn, pandas, SciPy for the statistics), so starting the CLI costs ~0.2 s of CPU rather than seconds:
that is paid by every user, every CI step and every test that runs the CLI in a fresh process. One fresh
interpreter checks all of it (this test process has long imported everything)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO

# Libraries that cost from ~0.1 s (pydantic) to seconds (torch) to import, none needed to parse flags or
# print help. A command imports them when it runs.
HEAVY = ("torch", "mlflow", "opacus", "sklearn", "scipy", "pandas", "matplotlib", "transformers",
         "sqlalchemy", "ray", "onnxruntime", "skops", "dp_accounting")

_PROBE = """
import json, sys
import typer.main
import audit.cli
after_import = sorted(m for m in {heavy} if m in sys.modules)

def commands(group, prefix=()):
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from commands(command, (*prefix, name))
        yield (*prefix, name)

paths = [()] + list(commands(typer.main.get_command(audit.cli.app)))
for path in paths:
    try:
        audit.cli.app(args=[*path, "--help"], standalone_mode=False)
    except SystemExit:
        pass
after_help = sorted(m for m in {heavy} if m in sys.modules)
print(json.dumps({{"after_import": after_import, "after_help": after_help, "commands": len(paths)}}))
"""


def test_importing_the_cli_and_every_commands_help_loads_no_heavy_library():
    probe = _PROBE.format(heavy=repr(HEAVY))
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["commands"] > 10  # the probe really walked the command tree
    assert seen["after_import"] == [], f"`import audit.cli` imports {seen['after_import']}: import them inside the command"
    assert seen["after_help"] == [], f"a command's --help imports {seen['after_help']}: import them inside the command"
