"""The package installs like one: a wheel built from this tree carries its schema, example policies and
licence, and, installed into a clean virtual environment, works from outside the checkout."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.packaging  # builds the wheel, installs it into a fresh venv


def _run(args: list[str], cwd: Path, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """`pip wheel .` of a copy of this tree (no network: this environment's setuptools builds it).

    A copy, because setuptools builds in place and its build/ folder keeps files deleted since."""
    source = tmp_path_factory.mktemp("source") / "privacy-audit"
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv",
            ".venv-*",
            "build",
            "runs",
            "mlartifacts",
            "mlruns",
            "*.egg-info",
            "__pycache__",
            ".pytest_cache",
            "*.db",
        ),
    )
    out = tmp_path_factory.mktemp("wheel")
    proc = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(source)],
        cwd=out,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (built,) = out.glob("privacy_audit-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_holds_the_schema_policies_licence_and_no_tests(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "audit/schema/results.schema.json" in names
    assert {"audit/policies/policy-strict.yaml", "audit/policies/policy-lenient.yaml"} <= set(names)
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert "audit/__main__.py" in names and "reports/figures.py" in names
    assert not any(name.startswith("tests/") for name in names)
    metadata = next(zipfile.ZipFile(wheel).read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert "License-Expression: Apache-2.0" in metadata


@pytest.mark.slow
def test_installed_into_a_clean_venv_it_works_from_outside_the_checkout(wheel, tmp_path):
    """A fresh venv gets the wheel (and only the wheel: `--no-deps`); the heavy dependencies (torch,
    MLflow, ...) are this environment's, reached through a .pth line, so nothing is downloaded. The
    commands run in an empty folder with no PYTHONPATH: the checkout cannot be what answers."""
    venv = tmp_path / "venv"
    # Without a pip of its own (ensurepip: ~7 s of CPU unpacking and compiling pip): this environment's pip
    # installs into it (`--python`), as `make test` builds the anonymeter venv; what lands in the venv is the same.
    assert _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path).returncode == 0
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    installed = _run([*pip, "install", "-q", "--no-deps", "--no-index", str(wheel)], cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr[-3000:]
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp_path)
    dependencies = site.getsitepackages() + [sysconfig.get_paths()["purelib"]]
    # Appended after the venv's own site-packages, so the installed wheel is found first.
    (Path(purelib.stdout.strip()) / "zz_dependencies.pth").write_text("\n".join(dict.fromkeys(dependencies)) + "\n")

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["MLFLOW_DISABLE_TELEMETRY"] = "true"

    where = _run(
        [str(python), "-c", "import audit, reports; print(audit.__file__); print(reports.__file__)"],
        cwd=outside,
        env=env,
    )
    assert where.returncode == 0, where.stderr
    assert all(str(venv) in line for line in where.stdout.splitlines()), where.stdout

    version = _run([str(venv / "bin" / "privacy-audit"), "--version"], cwd=outside, env=env)
    assert version.returncode == 0 and version.stdout.startswith("privacy-audit 0."), version.stderr

    help_text = _run([str(python), "-m", "audit", "--help"], cwd=outside, env=env)
    assert help_text.returncode == 0 and "gate" in help_text.stdout and "presets" in help_text.stdout

    dumped = _run(
        [str(venv / "bin" / "privacy-audit"), "presets", "dump", "policy-lenient", "policy.yaml"], cwd=outside, env=env
    )
    assert dumped.returncode == 0, dumped.stderr

    results = json.loads((REPO / "tests" / "data" / "results_smoke_example.json").read_text())
    (outside / "results.json").write_text(json.dumps(results))
    gate = _run(
        [str(venv / "bin" / "privacy-audit"), "gate", "--policy", "policy.yaml", "results.json"], cwd=outside, env=env
    )
    assert gate.returncode in (0, 1), gate.stderr
    assert (outside / "junit.xml").is_file()

    # Schema validation really runs from the installed package: a field of the wrong type is refused.
    results["targets"][0]["attacks"][0]["auc"] = "high"
    (outside / "broken.json").write_text(json.dumps(results))
    refused = _run(
        [str(venv / "bin" / "privacy-audit"), "gate", "--policy", "policy.yaml", "broken.json"], cwd=outside, env=env
    )
    assert refused.returncode == 2
    assert "targets[0].attacks[0].auc" in refused.stderr and "is not of type" in refused.stderr
