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
HEAVY = (
    "torch",
    "mlflow",
    "opacus",
    "sklearn",
    "scipy",
    "pandas",
    "matplotlib",
    "transformers",
    "sqlalchemy",
    "ray",
    "onnxruntime",
    "skops",
    "dp_accounting",
)

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
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["commands"] > 10  # the probe really walked the command tree
    assert seen["after_import"] == [], (
        f"`import audit.cli` imports {seen['after_import']}: import them inside the command"
    )
    assert seen["after_help"] == [], f"a command's --help imports {seen['after_help']}: import them inside the command"


# What a module imports that its users should not pay for: the modules a fresh `privacy-audit`
# command or an isolated worker imports before it does anything, each with the libraries it must
# not load. One fresh interpreter imports them in this order (lightest first), checking after each
# that none of its libraries is loaded yet (so nothing imported before it hides what it loads).
LIGHT_MODULES = (
    ("audit.machinery.workers", ("torch", "numpy")),  # every isolated worker, before its task
    ("attacks", ("torch", "sklearn", "scipy")),  # the registry: names without the attack modules
    ("audit.ledger.store", ("dp_accounting", "scipy")),  # a writer without a budget composes nothing
    ("audit.model_audits.user_models", ("torch",)),  # the worker holding an ONNX graph or a skops model
    ("audit.dp_validation.canary_audit", ("torch", "sklearn")),  # a canary worker running a numpy trainer
    ("audit.machinery.verdict", ("torch", "sklearn", "mlflow")),  # `gate`, every verdict
    ("audit.sweep.inputs", ("matplotlib", "mlflow", "sklearn", "dp_accounting")),  # all `run --dry-run` needs
)

_LIGHT_PROBE = """
import importlib, json, sys
loaded = {}
for module, heavy in %r:
    importlib.import_module(module)
    if module == "attacks":  # looking a name up does not import the attack either
        from attacks import ATTACKS, TEXT_ATTACKS
        assert "loss" in ATTACKS and "lm_loss" in TEXT_ATTACKS and "nope" not in ATTACKS and sorted(ATTACKS)
    loaded[module] = sorted(m for m in heavy if m in sys.modules)
print(json.dumps(loaded))
"""


def test_modules_on_the_start_up_path_of_commands_and_workers_import_only_what_they_use():
    done = subprocess.run(
        [sys.executable, "-c", _LIGHT_PROBE % (LIGHT_MODULES,)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded == {module: [] for module, _ in LIGHT_MODULES}, "import these inside the function that uses them"
