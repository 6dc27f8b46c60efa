"""`whitebox-audit --builtin --device auto|cpu|cuda`, like `run --device`: checked before any worker starts.

CPU only here (no GPU on CI); CUDA without a GPU must be one bad-input line, exit 2, nothing written.
"""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def cli(cli_in_process):
    """Commands run in this process (tests/conftest.py `run_cli_in_process`): these tests read what a
    command prints, writes and exits with."""
    return cli_in_process


def _runs(tmp_path):
    return list((tmp_path / "runs").glob("*-whitebox-audit")) if (tmp_path / "runs").exists() else []


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: --device cuda is valid here")
@pytest.mark.parametrize("mode", ["runs", "one-run"])
def test_cuda_without_a_gpu_is_one_bad_input_line_and_writes_nothing(cli, tmp_path, mode):
    done = cli(
        "whitebox-audit",
        "--mode",
        mode,
        "--builtin",
        "--noise-multiplier",
        "2",
        "--device",
        "cuda",
        "--out",
        str(tmp_path / "runs"),
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and "--device" in lines[0] and "CUDA" in lines[0]
    assert _runs(tmp_path) == []


def test_an_unknown_device_and_a_device_for_a_factory_are_bad_input(cli, tmp_path):
    done = cli(
        "whitebox-audit", "--builtin", "--noise-multiplier", "2", "--device", "tpu", "--out", str(tmp_path / "runs")
    )
    assert done.returncode == 2 and "--device" in done.stdout + done.stderr
    done = cli(
        "whitebox-audit",
        "--mode",
        "one-run",
        "--factory",
        "audit.demos.whitebox_factories:wide_correct_opacus",
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "runs"),
    )
    assert done.returncode == 2 and "--builtin only" in done.stdout + done.stderr
    assert _runs(tmp_path) == []
