"""Conformance checks: each planted bug fails the check it breaks; correct DP-SGD passes every check."""

import json

import numpy as np
import pytest

from audit.conformance.opacus_objects import inclusion_check as _inclusion_check
from audit.demos import planted_bugs
from audit.dp_validation.conformance import CHECKS, conformance_checks, run_conformance
from audit.errors import AuditInputError


@pytest.fixture
def cli(cli_in_process):
    """Commands run in this process (tests/conftest.py `run_cli_in_process`): these tests read what a
    command prints, writes and exits with; a fresh interpreter per call cost ~4-5 s of CPU in imports."""
    return cli_in_process


EXPECTED_FAILURE = {
    "batch_clip": "per_example_clipping",
    "clip_after_noise": "per_example_clipping",
    "per_layer_clip": "per_example_clipping",
    "sigma_not_sigma_c": "noise_std",
    "noise_divided_twice": "noise_std",
    "noise_missing_steps": "noise_std",
    "shuffled_batches": "poisson_sampling",
    "batch_reused": "independent_inclusion",
    "wrong_steps": "steps",
    "fixed_noise_seed": "noise_independence",
}


def test_every_planted_bug_has_an_expected_failure():
    assert set(EXPECTED_FAILURE) == set(planted_bugs.PLANTED_BUGS)


@pytest.mark.parametrize("bug, check", sorted(EXPECTED_FAILURE.items()))
def test_a_planted_bug_fails_the_check_it_breaks(bug, check):
    results = {c["check"]: c for c in conformance_checks(planted_bugs.PLANTED_BUGS[bug], seed=0)}
    assert set(results) == set(CHECKS)
    assert not results[check]["passed"], results[check]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("recipe", sorted(planted_bugs.CORRECT))
def test_correct_dpsgd_passes_every_check(recipe, seed):
    # 6 recipes (ε 0.5 to 8, C = 1 and 4) × 4 seeds = 24 conformance audits of correct code.
    results = conformance_checks(planted_bugs.CORRECT[recipe], seed=seed)
    assert all(c["passed"] for c in results), [c for c in results if not c["passed"]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_batch_drawn_once_and_reused_puts_records_in_all_or_no_batches(seed):
    # Its batch sizes are Binomial(n, q) draw by draw; what breaks is independence across steps:
    # a record's count is 0 or T, variance T²q(1−q) = T times Binomial(T, q)'s.
    results = {c["check"]: c for c in conformance_checks(planted_bugs.batch_reused, seed=seed)}
    assert results["sampling_rate"]["passed"]
    assert not results["independent_inclusion"]["passed"]
    assert results["independent_inclusion"]["value"] == pytest.approx(planted_bugs.STEPS, rel=0.25)


@pytest.mark.parametrize("q, steps", [(0.25, 20), (0.01, 100), (0.5, 3)])
def test_the_inclusion_check_holds_its_level_on_true_poisson_sampling(q, steps):
    # Small T·q makes batch counts far from normal: the z-test uses the binomial's fourth moment.
    rng = np.random.default_rng(7)
    rejected = 0
    for _ in range(400):
        draws = [(steps, rng.binomial(steps, q, size=256)) for _ in range(10)]
        rejected += not _inclusion_check(draws, q, 0.05)["passed"]
    assert rejected <= 0.05 * 400 + 3 * np.sqrt(0.05 * 0.95 * 400)


def test_a_sampler_returning_indices_outside_the_table_is_bad_input():
    import dataclasses

    class OutOfRange(planted_bugs.DPSGDRecipe):
        def sample_batches(self, n, rng):
            return [np.array([0, n])] * self.steps

    with pytest.raises(AuditInputError) as info:
        conformance_checks(
            OutOfRange(
                **{
                    f.name: getattr(planted_bugs.correct_eps_1, f.name)
                    for f in dataclasses.fields(planted_bugs.DPSGDRecipe)
                }
            )
        )
    assert info.value.where == "trainer" and "outside [0, 256)" in str(info.value)


def test_the_checks_run_in_a_worker_and_give_a_verdict():
    result = run_conformance("audit.demos.planted_bugs:shuffled_batches")
    assert result["verdict"]["status"] == "fail" and "poisson_sampling" in result["verdict"]["reasons"][0]
    json.dumps(result, allow_nan=False)
    with pytest.raises(AuditInputError) as info:
        run_conformance("audit.demos.planted_bugs:SoftmaxRegression")
    assert info.value.where == "trainer"


@pytest.mark.slow  # ~7 s of CPU: trains the planted bug in a fresh process
def test_the_conformance_command_exits_1_on_a_bug_with_json_report_and_mlflow(cli, tmp_path):
    db = f"sqlite:///{tmp_path}/m.db"
    bad = cli("conformance", "--trainer", "audit.demos.planted_bugs:noise_missing_steps", "--tracking-uri", db)
    assert bad.returncode == 1 and "noise_std" in bad.stderr
    (path,) = tmp_path.glob("runs/*-conformance/conformance.json")
    result = json.loads(path.read_text())
    assert result["verdict"]["status"] == "fail" and result["mlflow"]["run_id"]
    assert "FAIL" in (path.parent / "report.html").read_text()
