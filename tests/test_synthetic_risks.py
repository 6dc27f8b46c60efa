"""Claims about the synthetic-data re-identification risks (audit/statistics/synthetic_risks.py):
singling out, linkability and attribute inference against a control set (Giomi et al. 2022), and
the DCR-vs-random baseline."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pandas as pd
import pytest

from audit.statistics.synthetic_risks import (
    attack_success_rate,
    dcr_baseline_protection,
    inference_risk,
    linkability_risk,
    residual_risk,
    risk_test_count,
    synthetic_risks,
)
from tests.conftest import REPO


def population(n: int, rng: np.random.Generator) -> pd.DataFrame:
    """A mixed-type population: integer, skewed float and rounded numerics, three categoricals."""
    age = rng.integers(18, 90, n)
    income = np.round(rng.lognormal(10 + 0.01 * (age - 50), 0.5), 2)
    return pd.DataFrame(
        {
            "age": age,
            "sex": rng.choice(["f", "m"], n),
            "region": rng.choice(["north", "south", "east", "west", "centre"], n, p=[0.3, 0.2, 0.2, 0.2, 0.1]),
            "income": income,
            "job": np.where(
                income > 30000,
                rng.choice(["manager", "engineer", "clerk"], n),
                rng.choice(["clerk", "driver", "nurse", "teacher"], n),
            ),
            "hours": np.clip(np.round(rng.normal(38, 8, n)), 5, 80),
        }
    )


def near_copy(train: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """The training rows, shuffled, with 1 % multiplicative noise on income: a disguised copy."""
    copy = train.copy()
    copy["income"] = np.round(copy["income"] * rng.normal(1, 0.01, len(copy)), 2)
    return copy.sample(frac=1, random_state=0).reset_index(drop=True)


def test_wilson_success_rate_matches_the_textbook_interval():
    # Wilson 95 % intervals: 50/100 → [0.4038, 0.5962]; 0/10 → [0, 0.2775] (Wilson 1927; Newcombe 1998).
    half = attack_success_rate(50, 100, 0.95)
    assert half.value == pytest.approx(0.5)
    assert (half.value - half.error, half.value + half.error) == pytest.approx((0.4038, 0.5962), abs=1e-4)
    none = attack_success_rate(0, 10, 0.95)
    assert none.value + none.error == pytest.approx(0.2775, abs=1e-4)
    assert none.value - none.error == pytest.approx(0.0, abs=1e-12)


def test_residual_risk_is_zero_when_training_rows_are_no_easier_than_control_rows():
    same = residual_risk(attack_success_rate(30, 100, 0.95), attack_success_rate(30, 100, 0.95))
    assert same["value"] == 0 and same["ci"][0] == 0 and same["ci"][1] > 0
    full = residual_risk(attack_success_rate(100, 100, 0.95), attack_success_rate(0, 100, 0.95))
    assert full["value"] > 0.95


def test_risks_flag_a_near_copy_and_not_an_independent_sample():
    """Acceptance (issue 16): mixed-type table, 3000 rows; a near-copy release vs an independent sample."""
    rng = np.random.default_rng(1)
    train, control, independent = population(3000, rng), population(3000, rng), population(3000, rng)
    alpha_each = 0.05 / risk_test_count(train.shape[1])

    copied = synthetic_risks(train, control, near_copy(train, rng), alpha_each=alpha_each, n_attacks=300, seed=3)
    flagged = {flag["check"] for flag in copied["flags"]}
    assert {"risk_singling_out", "risk_linkability", "risk_inference"} <= flagged
    assert copied["singling_out"]["ci"][0] > 0.3
    assert copied["linkability"]["ci"][0] > 0.1
    assert min(r["value"] for r in copied["inference"]) > 0.9
    assert copied["dcr_baseline_protection"]["score"] < 0.05

    honest = synthetic_risks(train, control, independent, alpha_each=alpha_each, n_attacks=300, seed=3)
    assert honest["flags"] == []
    assert honest["singling_out"]["ci"][0] == 0 and honest["linkability"]["ci"][0] == 0
    assert all(r["ci"][0] == 0 for r in honest["inference"])
    assert honest["dcr_baseline_protection"]["score"] > copied["dcr_baseline_protection"]["score"] + 0.1


def test_no_false_alarm_on_null_data_in_at_least_95_percent_of_repeats():
    """Train, control and release drawn independently: no risk may be flagged (family α = 0.05)."""
    flagged = 0
    repeats = 20
    for repeat in range(repeats):
        rng = np.random.default_rng(100 + repeat)
        train, control, release = population(400, rng), population(400, rng), population(400, rng)
        result = synthetic_risks(
            train, control, release, alpha_each=0.05 / risk_test_count(train.shape[1]), n_attacks=200, seed=repeat
        )
        flagged += bool(result["flags"])
    assert flagged <= repeats * 0.05


@pytest.mark.parametrize(("n_numeric", "n_categorical"), [(0, 2), (1, 0), (4, 0), (4, 2), (7, 2), (8, 0), (12, 2)])
def test_small_distance_blocks_summed_in_numpy_equal_torch_cdist(n_numeric, n_categorical):
    # _gower_l1 sums small blocks in numpy (torch.cdist's set-up costs 20× their arithmetic): the
    # distances must be torch's float32 ones, so nearest rows and ties come out the same.
    import torch

    from audit.statistics import synthetic_risks as risks

    rng = np.random.default_rng(n_numeric * 10 + n_categorical)
    q_num, s_num = rng.lognormal(size=(70, n_numeric)) / 3.7, rng.lognormal(size=(90, n_numeric)) / 3.7
    q_num[:5] = s_num[:5]  # exact copies: distance 0 must stay 0
    q_cat, s_cat = rng.integers(-1, 4, (70, n_categorical)), rng.integers(-1, 4, (90, n_categorical))
    got = risks._gower_l1(q_num, q_cat, s_num, s_cat)
    low = s_num.min(axis=0)
    want = torch.zeros((70, 90))
    if n_numeric:
        want = torch.cdist(
            torch.from_numpy((q_num - low).astype(np.float32)), torch.from_numpy((s_num - low).astype(np.float32)), p=1
        )
    if n_categorical:
        want = want + torch.cdist(
            torch.from_numpy(q_cat.astype(np.float32)), torch.from_numpy(s_cat.astype(np.float32)), p=0
        )
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want.numpy())


def test_linkability_and_inference_take_explicit_columns_and_reject_bad_ones():
    rng = np.random.default_rng(5)
    train, control = population(300, rng), population(300, rng)
    release = near_copy(train, rng)
    link = linkability_risk(train, control, release, aux_cols=(["age", "hours", "region"], ["income"]), n_attacks=100)
    assert link["aux_cols"] == [["age", "hours", "region"], ["income"]] and link["ci"][0] > 0
    guess = inference_risk(train, control, release, secret="job", aux_cols=["age", "income"], n_attacks=100)
    assert guess["secret_kind"] == "categorical" and guess["value"] > 0.5
    with pytest.raises(ValueError, match="aux_cols"):
        linkability_risk(train, control, release, aux_cols=(["age"], ["age"]))
    with pytest.raises(ValueError, match="secret"):
        inference_risk(train, control, release, secret="nope")


def test_dcr_baseline_protection_is_near_zero_for_copies_and_one_for_noise():
    rng = np.random.default_rng(6)
    train = population(500, rng)
    assert dcr_baseline_protection(train, train)["score"] == 0
    noise = pd.DataFrame({c: rng.permutation(train[c].to_numpy()) for c in train.columns})  # marginals only
    assert (
        dcr_baseline_protection(train, noise)["score"] > dcr_baseline_protection(train, near_copy(train, rng))["score"]
    )


def _anonymeter_evaluators():
    """anonymeter's evaluators in this process, or None after running this test in the side venv.

    anonymeter is not a dependency: it pins numpy < 1.27 (it runs on numpy 2) and pulls numba,
    llvmlite and polars. `make test` builds .venv-anonymeter: the project's venv on its path plus
    `pip install --no-deps anonymeter numba llvmlite polars polars-runtime-32` (docs/test-suite.md), and
    passes its interpreter in PRIVACY_AUDIT_ANONYMETER_PYTHON; this test then re-runs itself there."""
    try:
        from anonymeter import evaluators

        return evaluators
    except ImportError:
        pass
    side = os.environ.get("PRIVACY_AUDIT_ANONYMETER_PYTHON")
    if not side:
        pytest.skip("needs anonymeter: `make test` builds .venv-anonymeter and sets PRIVACY_AUDIT_ANONYMETER_PYTHON")
    proc = subprocess.run(
        [
            side,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            f"{__file__}::test_agrees_with_anonymeter_on_the_same_data",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PRIVACY_AUDIT_ANONYMETER_PYTHON": ""},
    )
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout[-4000:] + proc.stderr[-2000:]
    return None


@pytest.mark.slow  # anonymeter's numba kernels compile on first use (~10 s), then 5 evaluations × 2 releases
def test_agrees_with_anonymeter_on_the_same_data():
    """Cross-check against anonymeter 1.1.0 itself (the README cites it): same data, same attacks."""
    evaluators = _anonymeter_evaluators()
    if evaluators is None:
        return  # it ran, and passed, in .venv-anonymeter
    rng = np.random.default_rng(7)
    train, control = population(1500, rng), population(1500, rng)
    for release in (near_copy(train, rng), population(1500, rng)):
        aux = (["age", "region", "hours"], ["sex", "income", "job"])
        theirs = (
            evaluators.LinkabilityEvaluator(train, release, aux_cols=aux, n_attacks=500, control=control)
            .evaluate(n_jobs=1)
            .risk()
        )
        ours = linkability_risk(train, control, release, aux_cols=aux, n_attacks=500)
        assert abs(ours["value"] - theirs.value) < 0.08, (ours, theirs)
        for secret in ("job", "age"):
            columns = [c for c in train.columns if c != secret]
            theirs = (
                evaluators.InferenceEvaluator(
                    train,
                    release,
                    aux_cols=columns,
                    secret=secret,
                    n_attacks=500,
                    control=control,
                    regression=secret == "age",
                )
                .evaluate(n_jobs=1)
                .risk()
            )
            ours = inference_risk(train, control, release, secret=secret, n_attacks=500)
            assert abs(ours["value"] - theirs.value) < 0.08, (secret, ours, theirs)
        theirs = (
            evaluators.SinglingOutEvaluator(train, release, n_attacks=300, n_cols=3, control=control, seed=1)
            .evaluate(mode="multivariate")
            .risk()
        )
        ours = synthetic_risks(train, control, release, alpha_each=0.01, n_attacks=300)["singling_out"]
        assert abs(ours["value"] - theirs.value) < 0.12, (ours, theirs)
