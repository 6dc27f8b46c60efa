"""`conformance --factory`: the checks through the user's own Opacus objects (tiny setups, seconds each)."""

from __future__ import annotations

import json

import pytest

from audit.dp_validation.opacus_conformance import FACTORY_CHECKS, run_factory_conformance

BUGS = "audit.demos.opacus_planted_bugs"


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
    result = run_factory_conformance(f"{BUGS}:{factory}", timeout=600)
    assert [c["check"] for c in result["checks"]] == list(FACTORY_CHECKS)
    failed = {c["check"] for c in result["checks"] if not c["passed"]}
    assert failing <= failed and (failed == set()) == (failing == set()), result["checks"]
    assert result["verdict"]["status"] == ("fail" if failing else "pass")


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
