"""`whitebox-audit --mode one-run`: the statistics on exact Gaussian shifts, and real Opacus runs with canaries."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, stats

from audit.statistics.epsilon_bounds import epsilon_from_gdp_mu
from audit.statistics.one_run_audit import (
    delta_two_gaussians,
    epsilon_andrew,
    epsilon_two_gaussians,
    one_run_claim_audit,
)
from audit.statistics.tradeoff_curves import dpsgd_privacy_profile
from tests.mlflow_store import fresh_store

ROOT = Path(__file__).resolve().parent.parent
DELTA = 1e-5
# q = 1, T = 20, σ = √20: exactly 1-GDP, ε ≈ 4.38 at δ = 1e-5.
SIGMA, STEPS = math.sqrt(20.0), 20


def test_two_gaussians_with_equal_spread_is_the_gdp_conversion():
    # Reference: μ = 1 → ε 4.38, μ = 2 → ε 10.0 at δ = 1e-5 (docs/statistics.md, Dong, Roth, Su 2019).
    assert epsilon_two_gaussians(0, 1, 1, 1, DELTA) == pytest.approx(4.38, abs=0.01)
    assert epsilon_two_gaussians(3, 2, 7, 2, DELTA) == pytest.approx(10.0, abs=0.01)
    assert epsilon_two_gaussians(0, 1, 1, 1, DELTA) == pytest.approx(epsilon_from_gdp_mu(1.0, DELTA), abs=1e-6)


@pytest.mark.parametrize("m0, s0, m1, s1, eps", [(0, 1, 1, 1.5, 1.0), (0, 1.3, 0.5, 1, 0.3), (1, 1, 0, 2, 2.0)])
def test_delta_of_two_gaussians_matches_numerical_integration(m0, s0, m1, s1, eps):
    def integrand(x):
        return max(0.0, stats.norm.pdf(x, m1, s1) - math.exp(eps) * stats.norm.pdf(x, m0, s0))

    reference = integrate.quad(integrand, -40, 40, limit=500, points=[m0, m1])[0]
    assert delta_two_gaussians(eps, m0, s0, m1, s1) == pytest.approx(reference, abs=1e-7)


def test_andrew_estimate_recovers_the_shift():
    rng = np.random.default_rng(1)
    coins = rng.random(20_000) < 0.5
    scores = coins * 1.0 + rng.normal(size=coins.size)
    assert epsilon_andrew(scores, coins, DELTA)["epsilon"] == pytest.approx(4.38, abs=0.35)


def test_the_exact_claimed_mechanism_is_never_refuted_over_repeats():
    """Soundness: canaries that are exactly the claimed 1-GDP shift (the best case of a correct
    q = 1 DP-SGD with Dirac canaries); both sound tests at α/2 each; false alarms ≤ 5 %."""
    profile = dpsgd_privacy_profile(SIGMA, 1.0, STEPS)
    claim = epsilon_from_gdp_mu(1.0, DELTA)
    repeats, refuted = 40, 0
    rng = np.random.default_rng(7)
    coins = rng.random((repeats, 1000)) < 0.5
    scores = coins * 1.0 + rng.normal(size=coins.shape)
    for i in range(repeats):
        audit = one_run_claim_audit(
            scores[i], coins[i], claimed_epsilon=claim, delta=DELTA, profile=profile, with_estimates=False
        )
        refuted += audit["status"] == "refuted"
        assert audit["status"] in ("held", "refuted")  # the f-DP test could refute the curve: testable
    assert refuted <= stats.binom.ppf(0.999, repeats, 0.05)


def test_a_doubled_shift_refutes_the_claim():
    profile = dpsgd_privacy_profile(SIGMA, 1.0, STEPS)
    rng = np.random.default_rng(3)
    # 3000 canaries: the one-run tests choose their guesses on a 30 % pilot and test on the rest, so at
    # 2000 a shift of 2 against a claim of 1 is near the edge of their power (refuted at 2 of 3 seeds).
    coins = rng.random(3000) < 0.5
    scores = coins * 2.0 + rng.normal(size=coins.size)
    audit = one_run_claim_audit(
        scores, coins, claimed_epsilon=epsilon_from_gdp_mu(1.0, DELTA), delta=DELTA, profile=profile
    )
    assert audit["status"] == "refuted" and audit["fdp"]["refuted"]
    assert audit["gaussian_sum"]["epsilon"] > 7 and audit["andrew"]["epsilon"] > 7


def test_too_few_canaries_leave_a_large_claim_untestable_and_say_how_many_are_needed():
    rng = np.random.default_rng(5)
    coins = rng.random(100) < 0.5
    scores = coins * 0.2 + rng.normal(size=coins.size)
    audit = one_run_claim_audit(scores, coins, claimed_epsilon=8.0, delta=DELTA, profile=None, with_estimates=False)
    assert audit["status"] == "untestable" and audit["ceiling"] < 8.0
    needed = audit["canaries_needed"]
    assert needed is None or needed > 100


# -- real Opacus runs ---------------------------------------------------------------------------


def test_one_run_on_opacus_holds_a_correct_setup_and_refutes_noise_without_c():
    from audit.dp_validation.one_run_whitebox import run_one_run_whitebox_audit

    good = run_one_run_whitebox_audit(
        factory="audit.demos.whitebox_factories:wide_correct_opacus", n_canaries=2000, compare_plain=False, timeout=600
    )
    bad = run_one_run_whitebox_audit(
        factory="audit.demos.whitebox_factories:wide_noise_not_scaled_by_clip_norm",
        n_canaries=2000,
        compare_plain=False,
        timeout=600,
    )
    assert good["canaries"]["kind"] == "dirac" and good["steps"] == 4
    assert good["one_run"]["status"] == "held" and good["verdict"]["status"] == "pass"
    assert bad["one_run"]["status"] == "refuted" and bad["verdict"]["status"] == "fail"
    assert bad["verdict"]["claims"][0]["status"] == "refuted"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    # In this process: these tests read what the command prints, writes and exits with; a fresh
    # interpreter would re-pay ~4-5 s of CPU of imports (the README runs whitebox-audit in a fresh one).
    from tests.conftest import run_cli_in_process

    return run_cli_in_process(*args, cwd=cwd)


def test_cli_one_run_builtin_reports_cost_accuracy_and_claim_status(tmp_path):
    done = _cli(
        "whitebox-audit",
        "--mode",
        "one-run",
        "--builtin",
        "--noise-multiplier",
        "2",
        "--sample-rate",
        "0.5",
        "--steps",
        "6",
        "--canaries",
        "200",
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "runs"),
        "--tracking-uri",
        fresh_store(tmp_path),
        cwd=tmp_path,
    )
    assert done.returncode in (0,), done.stdout + done.stderr
    (path,) = (tmp_path / "runs").glob("*-whitebox-audit/whitebox-audit.json")
    result = json.loads(path.read_text())
    assert result["mode"] == "one-run" and result["canaries"]["m"] == 200 and result["device"] == "cpu"
    assert result["cost"]["overhead"] > 0 and result["accuracy"]["plain"] is not None
    assert result["verdict"]["claims"][0]["status"] in ("held", "untestable")
    assert "test accuracy" in done.stdout
    from audit.dp_validation.result_files import load_audit_result

    load_audit_result(path, "whitebox-audit")  # what `gate` reads: the shipped schema, the flags vs the numbers


def test_cli_one_run_rejects_an_unknown_canary_kind(tmp_path):
    done = _cli(
        "whitebox-audit",
        "--mode",
        "one-run",
        "--builtin",
        "--noise-multiplier",
        "2",
        "--canary-kind",
        "spiral",
        "--out",
        str(tmp_path / "runs"),
        cwd=tmp_path,
    )
    assert done.returncode == 2 and "--canary-kind" in done.stdout + done.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").glob("*-whitebox-audit"))


@pytest.mark.slow  # ~1-2 min: two tiny setups, each one canary run + conformance
def test_the_one_run_planted_bug_bench_flags_a_bug_and_not_a_correct_setup():
    proc = subprocess.run(
        [
            sys.executable,
            "-W",
            "ignore",
            str(ROOT / "benchmarks" / "bench_one_run_whitebox.py"),
            "--size",
            "tiny",
            "--only",
            "fixed_noise_seed,correct_eps_4_0_seed_2",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")]
        for line in proc.stdout.splitlines()
        if line.startswith("| ") and not line.startswith("| setup")
    }
    assert rows["fixed_noise_seed"][9] == "yes" and "noise_independence" in rows["fixed_noise_seed"][8]
    assert rows["correct_eps_4_0_seed_2"][9] == "no"
    assert "bugs flagged: 1 of 1; correct setups flagged: 0 of 1" in proc.stdout
