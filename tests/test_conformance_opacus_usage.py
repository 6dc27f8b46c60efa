"""`conformance --factory` and `whitebox-audit --mode one-run --factory` on Opacus as it is used
(issue #38; setups in audit.demos.whitebox_factories): correct ones hold (exit 0), broken ones are
findings (exit 1) naming what broke, never bad input (exit 2).

One row per command and exit code goes through the real CLI: `conformance` and `whitebox-audit` exit 0
on the batch-memory-manager setup here; both exit 1 on a finding in tests/test_opacus_setup_table.py
(`test_factory_commands_exit_1_on_an_undeclared_finding`, whose conformance row is this file's
parameter-outside factory). The other rows run the commands' task and decision in this process
(tests/opacus_usage_support.py): what each check finds is the same, without a spawned worker's imports."""

from __future__ import annotations

import json

import pytest

from tests.opacus_sigma_memo import memoised_noise_multiplier  # noqa: F401 - the module fixture
from tests.opacus_usage_support import F, conformance_in_process, one_run_in_process

# The usage setups all ask Opacus for the same σ (ε 2, δ 1e-5, q 0.1, 2 epochs): computed once here.
pytestmark = pytest.mark.usefixtures("memoised_noise_multiplier")


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
def test_conformance_correct_usage_passes_exit_0(cli, tmp_path):
    done, checks = _conformance(cli, tmp_path, "usage_batch_memory_manager")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert checks["parameters"]["passed"]


@pytest.mark.slow
def test_conformance_frozen_layer_and_param_groups_pass():
    failed, found = conformance_in_process("usage_frozen_param_groups")
    assert failed == set(), found["checks"]  # what exits 0 in the command


@pytest.mark.slow
def test_conformance_names_a_parameter_the_dp_optimizer_does_not_privatise():
    failed, found = conformance_in_process("usage_parameter_outside")
    checks = {c["check"]: c for c in found["checks"]}
    assert "parameters" in failed and "logit_offset" in checks["parameters"]["detail"]


@pytest.mark.slow
def test_conformance_noise_skipped_is_a_finding_not_bad_input():
    # A finding (a failed check, the command's exit 1), not an AuditInputError (exit 2), which would raise here.
    failed, found = conformance_in_process("usage_noise_skipped")
    checks = {c["check"]: c for c in found["checks"]}
    assert "noisy_steps" in failed and "skipped" in checks["noisy_steps"]["detail"]


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
def test_one_run_factory_broken_usage_is_refuted(factory, words):
    verdict = one_run_in_process(factory)["verdict"]
    assert verdict["status"] == "fail"  # the command's exit 1
    failed = " ".join(c["message"] for c in verdict["checks"] if c.get("failed"))
    assert words in failed
