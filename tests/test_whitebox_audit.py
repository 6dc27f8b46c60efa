"""White-box Dirac-canary audits (`privacy-audit whitebox-audit`): the harness's own DP-SGD through
the vectorized trainer, and users' Opacus setups (a correct one passes, a buggy one fails, exit 1)."""

import json

import numpy as np
import pytest

from audit.cli import main
from audit.dp_validation.whitebox_audit import harness_observation_task, run_whitebox_audit
from tests.mlflow_store import fresh_store


def test_the_canary_coordinate_of_the_vectorized_trainer_is_the_claimed_gaussian_shift():
    # Nothing but the canary and the trainer's own noise reaches the coordinate: x_t = b_t + σ·z_t.
    sigma = 2.0
    seen = harness_observation_task(sigma, 1.0, 5, 1.0, 1, 0, 400, 0)["steps"]
    unseen = harness_observation_task(sigma, 1.0, 5, 1.0, 0, 0, 400, 0)["steps"]
    for x, mean in ((seen, 1.0), (unseen, 0.0)):
        assert abs(x.mean() - mean) < 4 * sigma / np.sqrt(x.size)
        assert x.std() == pytest.approx(sigma, rel=0.08)
    # Runs are seeded by their index, not by the block they are computed in.
    part = harness_observation_task(sigma, 1.0, 5, 1.0, 1, 10, 5, 0)["steps"]
    np.testing.assert_allclose(part, seen[10:15], rtol=1e-6, atol=1e-6)


def test_the_harness_dp_sgd_is_not_refuted_and_too_few_runs_are_inconclusive():
    honest = run_whitebox_audit(builtin=True, noise_multiplier=2.0, steps=4, n_runs=300, workers=1, device="cpu")
    assert honest["verdict"]["status"] == "pass", honest["verdict"]
    assert honest["device"] == "cpu"
    assert honest["gdp_bound"]["mu"] <= 1.0 and honest["ceiling"] > honest["claimed_epsilon"]
    assert honest["epsilon_lower_bound"] <= honest["gdp_bound"]["epsilon"] <= honest["claimed_epsilon"]
    # Two tests decide (the curve at the equal-error point, the (ε, δ) bound at its tail rule), α split.
    deciding = [c["name"] for c in honest["verdict"]["checks"] if c["decides"]]
    assert deciding == ["claimed Gaussian trade-off curve (q = 1)", "Clopper-Pearson (ε, δ) bound, tail rule"]
    assert "Bonferroni" in honest["verdict"]["family_wise_error"]["statement"]
    # 12 runs per side: even a perfect attack could not reach μ = √4/0.5 = 4.
    few = run_whitebox_audit(builtin=True, noise_multiplier=0.5, steps=4, n_runs=12, workers=1)
    assert few["verdict"]["status"] == "inconclusive"
    assert few["verdict"]["needed"] > 12 and few["ceiling"] <= few["claimed_epsilon"]


@pytest.mark.slow
def test_correct_opacus_passes_and_the_sigma_not_sigma_c_bug_is_flagged(tmp_path, capsys):
    spec = "audit.demos.whitebox_factories:"
    # One worker each: every worker imports torch and Opacus (~6 s of CPU) before its first run, and the
    # runs are seeded by their index, so the numbers do not depend on the worker count.
    correct = run_whitebox_audit(factory=spec + "correct_opacus", n_runs=100, workers=1)
    assert correct["verdict"]["status"] == "pass", correct["verdict"]
    assert correct["settings"]["accountant_history"] == [[2.0, 1.0, 4.0]] and not correct["accountant_disagreements"]
    with pytest.raises(SystemExit) as exited:
        main(
            [
                "whitebox-audit",
                "--factory",
                spec + "noise_not_scaled_by_clip_norm",
                "--runs",
                "100",
                "--workers",
                "1",
                "--out",
                str(tmp_path / "runs"),
                "--tracking-uri",
                fresh_store(tmp_path, "mlflow.db"),
                "--quiet",
            ]
        )
    out = capsys.readouterr()
    assert exited.value.code == 1, out.err
    assert "refuted" in out.err and "GDP-family bound" in out.out
    (folder,) = (tmp_path / "runs").iterdir()
    saved = json.loads((folder / "whitebox-audit.json").read_text())
    assert saved["verdict"]["status"] == "fail" and saved["gdp_bound"]["assumption"].startswith("the mechanism's")
    assert (folder / "report.html").exists()


def test_below_full_batch_the_claimed_curve_is_the_pld_profile_and_the_gdp_number_decides_nothing():
    # q = 0.25: not Gaussian. A claim of ε 0.3 for σ 1, T 10 (PLD: ≈ 6) is refuted against its curve.
    result = run_whitebox_audit(
        builtin=True, noise_multiplier=1.0, sample_rate=0.25, steps=10, n_runs=500, workers=1, claimed_epsilon=0.3
    )
    assert result["verdict"]["status"] == "fail"
    assert result["refutation"]["refutes_claimed_curve"] and not result["gdp_bound"]["decides"]
    gdp = [c for c in result["verdict"]["checks"] if c["name"].startswith("GDP")]
    assert gdp and gdp[0]["outcome"] == "shown" and "NOT hold" in gdp[0]["assumption"]
