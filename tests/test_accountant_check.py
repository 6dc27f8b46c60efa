"""Accountant cross-check: a researcher's accountant is labelled ok / loose / unsound / invalid."""

import json
import math

import pytest

from audit.dp_validation.accountant_check import (
    AccountantGrid,
    check_accountant,
    classify,
    opacus_gdp,
    opacus_prv,
    opacus_rdp,
)
from tests.mlflow_store import fresh_store


@pytest.fixture
def cli(cli_in_process):
    """Commands run in this process (tests/conftest.py `run_cli_in_process`): these tests read what a
    command prints, writes and exits with; a fresh interpreter per call cost ~4-5 s of CPU in imports."""
    return cli_in_process


ONE_POINT = AccountantGrid(noise_multipliers=[1.0], sample_rates=[0.01], steps=[1000], deltas=[1e-5])


def test_opacus_gdp_is_unsound_at_sigma_1_q_001_t_1000_as_stats_md_says():
    (point,) = check_accountant(opacus_gdp, ONE_POINT)
    assert point.label == "unsound"
    assert point.reported == pytest.approx(1.62, abs=0.01) and point.pld_upper == pytest.approx(1.83, abs=0.01)


def test_opacus_prv_is_ok_and_rdp_is_loose_there():
    assert check_accountant(opacus_prv, ONE_POINT)[0].label == "ok"
    assert check_accountant(opacus_rdp, ONE_POINT)[0].label == "loose"


@pytest.mark.parametrize(
    "value, label",
    [
        (float("nan"), "invalid"),
        (-0.5, "invalid"),
        ("1.0", "invalid"),
        (None, "invalid"),
        (True, "invalid"),
        (1.0, "unsound"),
        (1.8, "ok"),
        (5.0, "loose"),
        (math.inf, "loose"),
    ],
)
def test_classification_of_reported_values(value, label):
    assert classify(value, lower=1.7, upper=1.83, margin=0.1)[0] == label


def test_an_accountant_that_raises_is_reported_invalid_not_a_crash():
    def broken(*_):
        raise RuntimeError("no")

    (point,) = check_accountant(broken, ONE_POINT)
    assert point.label == "invalid" and "RuntimeError" in point.message


@pytest.fixture
def user_module(tmp_path):
    (tmp_path / "my_accountants.py").write_text(
        "from audit.dp_validation.accountant_check import opacus_prv, opacus_gdp\n"
        "def halved(s, q, t, d):\n    return opacus_prv(s, q, t, d) / 2\n"
        "def raises(s, q, t, d):\n    raise ValueError('bad')\n"
        "NOT_CALLABLE = 3\n"
    )
    (tmp_path / "grid.yaml").write_text("noise_multipliers: [1.0]\nsample_rates: [0.01]\nsteps: [1000]\n")
    (tmp_path / "bad_grid.yaml").write_text("noise_multipliers: [-1.0]\nsample_rates: [0.01]\nsteps: [1000]\n")
    return tmp_path


def test_cli_flags_an_unsound_user_accountant_with_exit_1_and_writes_json(cli, user_module, tmp_path):
    proc = cli(
        "accountant-check",
        "--accountant",
        "my_accountants:halved",
        "--grid",
        "grid.yaml",
        "--json",
        "check.json",
        "--tracking-uri",
        fresh_store(tmp_path),
    )
    assert proc.returncode == 1, proc.stderr
    assert "unsound" in proc.stdout
    reported = f"{opacus_prv(1.0, 0.01, 1000, 1e-5) / 2:.4f}"
    # Once in its table row and once in its claim's line (the verdict names every claim), nowhere else.
    output = proc.stdout + proc.stderr
    assert output.count(reported) == 2, "each unsound point is printed in its row and its claim line only"
    (claim_line,) = [line for line in proc.stderr.splitlines() if line.startswith("claim refuted")]
    assert reported in claim_line and claim_line.count("σ=1") == 1
    summary = json.loads((tmp_path / "check.json").read_text())
    assert summary["counts"]["unsound"] == 1 and summary["passed"] is False
    (report,) = tmp_path.glob("runs/*-accountant-check/report.html")
    assert "FAIL" in report.read_text() and "my_accountants:halved" in report.read_text()


def test_cli_passes_opacus_prv_with_exit_0(cli, user_module, tmp_path):
    proc = cli(
        "accountant-check",
        "--accountant",
        "audit.dp_validation.accountant_check:opacus_prv",
        "--grid",
        "grid.yaml",
        "--tracking-uri",
        fresh_store(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    "spec, grid, message",
    [
        ("no_colon", "grid.yaml", "module:function"),
        ("missing_mod:f", "grid.yaml", "cannot import"),
        ("my_accountants:nope", "grid.yaml", "no attribute 'nope'"),
        ("my_accountants:NOT_CALLABLE", "grid.yaml", "not callable"),
        ("my_accountants:halved", "bad_grid.yaml", "grid file 'bad_grid.yaml'"),
    ],
)
def test_cli_bad_accountant_specs_exit_2(cli, user_module, spec, grid, message):
    proc = cli("accountant-check", "--accountant", spec, "--grid", grid)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_cli_a_raising_accountant_fails_the_check_with_exit_1(cli, user_module, tmp_path):
    proc = cli(
        "accountant-check",
        "--accountant",
        "my_accountants:raises",
        "--grid",
        "grid.yaml",
        "--tracking-uri",
        fresh_store(tmp_path),
    )
    assert proc.returncode == 1 and "invalid" in proc.stdout
