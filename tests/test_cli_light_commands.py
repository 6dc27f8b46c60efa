"""Commands that never train start without the training libraries: `gate`, `report`, `presets` and a bad-input
exit import no torch, Opacus, MLflow (for results that name no MLflow run), scikit-learn, pandas, transformers,
dp_accounting, SQLAlchemy or Ray. A fresh interpreter pays ~7 s of CPU for torch and Opacus alone: every CI
step that gates a results file, and every test that runs such a command in a fresh process, would pay it.
(`gate` and `report` do load SciPy, to recompute the verdict's statistics, and matplotlib, to redraw the
figures.) `tests/test_cli_startup.py` checks the same for importing the CLI and every `--help`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO

TRAINING_LIBRARIES = (
    "torch",
    "opacus",
    "mlflow",
    "sklearn",
    "pandas",
    "transformers",
    "dp_accounting",
    "sqlalchemy",
    "ray",
)

# One fresh interpreter runs the commands one after another through the console script's `main` (which maps
# each ending to its exit code), recording what each has loaded by its end.
_PROBE = """
import json, sys
from audit.cli import main

seen = {{}}
for name, argv in {commands!r}:
    try:
        main(argv)
    except SystemExit as ended:
        code = ended.code
    seen[name] = {{"exit": code, "loaded": sorted(m for m in {heavy!r} if m in sys.modules)}}
print(json.dumps(seen))
"""


@pytest.mark.slow  # one fresh interpreter: gate and report recompute the verdict and redraw the figures (~6 s)
def test_gate_report_presets_and_a_bad_input_exit_load_no_training_library(tmp_path):
    results = tmp_path / "results.json"
    shutil.copyfile(REPO / "tests" / "data" / "results_smoke_example.json", results)
    commands = [
        ("bad input", ["gate", "--policy", str(tmp_path / "no-such-policy.yaml"), str(results)]),
        ("presets", ["presets"]),
        ("gate", ["gate", "--policy", str(REPO / "examples" / "policies" / "run.yaml"), str(results)]),
        ("report", ["report", str(results), "--out", str(tmp_path / "report")]),
    ]
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(commands=commands, heavy=TRAINING_LIBRARIES)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    # The commands did their work: the probe is not reading a process that stopped at its first line.
    assert seen["bad input"]["exit"] == 2
    assert seen["presets"]["exit"] in (0, None)
    assert seen["gate"]["exit"] in (0, 1, None)  # the verdict, whatever it is
    assert (tmp_path / "report" / "report.html").is_file()
    for name, what in seen.items():
        assert what["loaded"] == [], f"`{name}` imported {what['loaded']}: import them where they are used"
