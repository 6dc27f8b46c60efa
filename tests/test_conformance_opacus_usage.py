"""`conformance --factory` and `whitebox-audit --mode one-run --factory` on Opacus as it is used
(issue #38; setups in audit.demos.whitebox_factories): correct ones hold (exit 0), broken ones are
findings (exit 1) naming what broke, never bad input (exit 2)."""

from __future__ import annotations

import json

import pytest

F = "audit.demos.whitebox_factories:"


@pytest.fixture
def cli(cli_in_process):
    return cli_in_process


def _result(tmp_path, kind: str) -> dict:
    (path,) = (tmp_path / "runs").glob(f"*-{kind}/{kind}.json")
    return json.loads(path.read_text())


def _conformance(cli, tmp_path, factory: str):
    done = cli("conformance", "--factory", F + factory, "--out", str(tmp_path / "runs"))
    checks = {c["check"]: c for c in _result(tmp_path, "conformance")["checks"]} if done.returncode in (0, 1) else {}
    return done, checks


@pytest.mark.slow
@pytest.mark.parametrize("factory", ["usage_batch_memory_manager", "usage_frozen_param_groups"])
def test_conformance_correct_usage_passes(cli, tmp_path, factory):
    done, checks = _conformance(cli, tmp_path, factory)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert checks["parameters"]["passed"]


@pytest.mark.slow
def test_conformance_names_a_parameter_the_dp_optimizer_does_not_privatise(cli, tmp_path):
    done, checks = _conformance(cli, tmp_path, "usage_parameter_outside")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert not checks["parameters"]["passed"] and "logit_offset" in checks["parameters"]["detail"]


@pytest.mark.slow
def test_conformance_noise_skipped_is_a_finding_not_bad_input(cli, tmp_path):
    done, checks = _conformance(cli, tmp_path, "usage_noise_skipped")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert not checks["noisy_steps"]["passed"] and "skipped" in checks["noisy_steps"]["detail"]


@pytest.mark.slow
def test_one_run_factory_batch_memory_manager_holds(cli, tmp_path):
    done = cli(
        "whitebox-audit",
        "--mode",
        "one-run",
        "--factory",
        F + "usage_batch_memory_manager",
        "--no-compare-plain",
        "--out",
        str(tmp_path / "runs"),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    result = _result(tmp_path, "whitebox-audit")
    assert result["verdict"]["claims"][0]["status"] == "held"
    assert result["steps"] == sum(h[2] for h in result["settings"]["accountant_history"])
    assert result["physical_steps"] > result["steps"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "factory, words", [("usage_noise_skipped", "without a noisy step"), ("usage_shuffled_batches", "Poisson")]
)
def test_one_run_factory_broken_usage_is_refuted(cli, tmp_path, factory, words):
    done = cli(
        "whitebox-audit",
        "--mode",
        "one-run",
        "--factory",
        F + factory,
        "--no-compare-plain",
        "--out",
        str(tmp_path / "runs"),
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    failed = " ".join(c["message"] for c in _result(tmp_path, "whitebox-audit")["verdict"]["checks"] if c.get("failed"))
    assert words in failed
