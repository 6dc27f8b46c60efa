"""`conformance --factory`: the checks through the user's own Opacus objects (tiny setups, seconds each)."""

from __future__ import annotations

import json
import warnings

import pytest

from audit.dp_validation.opacus_conformance import FACTORY_CHECKS, opacus_conformance_task, run_factory_conformance
from tests.opacus_sigma_memo import memoised_noise_multiplier  # noqa: F401 - the module fixture

BUGS = "audit.demos.opacus_planted_bugs"
pytestmark = pytest.mark.usefixtures("memoised_noise_multiplier")


def _conformance(factory: str, isolated: bool) -> tuple[list[dict], str]:
    """The checks and the verdict's status of `conformance --factory`. The first row goes through
    `run_factory_conformance` (the task in its isolated, spawned worker); the others run the same task
    in this process (a spawned worker imports torch and Opacus afresh: ~6 s of CPU per row), and the
    verdict is the command's rule: fail when any check failed."""
    if isolated:
        result = run_factory_conformance(factory, timeout=600)
        return result["checks"], result["verdict"]["status"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        checks = opacus_conformance_task(factory, 0, 0.01)["checks"]  # the command's default seed and α
    return checks, "fail" if any(not c["passed"] for c in checks) else "pass"


@pytest.mark.parametrize(
    "factory, failing",
    [
        ("correct_eps_1_0_seed_0", set()),
        ("correct_eps_8_0_seed_1", set()),
        ("per_layer_clip", {"per_example_clipping"}),
        ("noise_missing_steps", {"noise_std"}),
        ("shuffled_batches", {"poisson_sampling"}),
        ("accountant_half_steps", {"steps"}),
        ("fixed_noise_seed", {"noise_independence"}),
    ],
)
def test_each_planted_opacus_bug_fails_its_check_and_correct_setups_pass(factory, failing):
    checks, status = _conformance(f"{BUGS}:{factory}", isolated=factory == "correct_eps_1_0_seed_0")
    assert [c["check"] for c in checks] == list(FACTORY_CHECKS)
    failed = {c["check"] for c in checks if not c["passed"]}
    assert failing <= failed and (failed == set()) == (failing == set()), checks
    assert status == ("fail" if failing else "pass")


def test_cli_conformance_factory_exits_1_on_a_bug_and_2_without_a_subject(tmp_path):
    # In-process (the conftest convention): the test reads the exit code and what was written; the factory's
    # training still runs in its isolated worker.
    from tests.conftest import run_cli_in_process

    run = lambda *a: run_cli_in_process(
        "conformance",
        *a,
        "--out",
        str(tmp_path / "runs"),  # noqa: E731
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'm.db'}",
        cwd=tmp_path,
    )
    bad = run("--factory", f"{BUGS}:noise_without_c")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    (path,) = (tmp_path / "runs").glob("*-conformance/conformance.json")
    assert json.loads(path.read_text())["verdict"]["status"] == "fail"
    neither = run()
    assert neither.returncode == 2 and "--trainer" in neither.stdout + neither.stderr
