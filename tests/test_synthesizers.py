"""Claims about the synthesizers in targets/synthesizers.py, and how the synthetic check sees them."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from audit.statistics.synthetic_evaluation import synthetic_privacy_checks
from targets.synthesizers import (
    SYNTHESIZERS,
    DPVAESynthesizer,
    GaussianCopulaSynthesizer,
    NoisyCopySynthesizer,
)
from targets.tabular_encoding import SyntheticDataError


def population(n: int, seed: int) -> pd.DataFrame:
    """Seeded mixed-type rows: 6 numeric (float, skewed, integer) + 4 categorical columns."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 4))
    return pd.DataFrame(
        {
            "age": np.rint(40 + 12 * z[:, 0]).astype(np.int64),
            "income": np.exp(10 + 0.5 * z[:, 1] + 0.3 * z[:, 0]),
            "score": z[:, 2] + 0.5 * z[:, 1],
            "tenure": np.rint(np.abs(5 + 3 * z[:, 3])).astype(np.int64),
            "balance": 1000 * z[:, 1] - 300 * z[:, 3],
            "visits": rng.poisson(3, n).astype(np.int64),
            "city": rng.choice(["north", "south", "east", "west"], n, p=[0.4, 0.3, 0.2, 0.1]),
            "plan": np.where(z[:, 3] > 0.5, "gold", np.where(z[:, 3] > -0.5, "silver", "basic")),
            "member": rng.random(n) < 0.3,
            "label": np.where(z[:, 0] + rng.normal(size=n) > 0, "yes", "no"),
        }
    )


N = 2000
TRAIN, HOLDOUT = population(N, 11), population(N, 12)


def _assert_same_schema(sample: pd.DataFrame, n: int) -> None:
    assert sample.shape == (n, TRAIN.shape[1])
    assert list(sample.columns) == list(TRAIN.columns)
    pd.testing.assert_series_equal(sample.dtypes, TRAIN.dtypes)
    assert not sample.isna().any().any()


@pytest.fixture(scope="module")
def dp_vae() -> tuple[DPVAESynthesizer, float]:
    started = time.perf_counter()
    synthesizer = DPVAESynthesizer(epsilon=1.0, delta=1e-5, epochs=10, seed=0).fit(TRAIN)
    return synthesizer, time.perf_counter() - started


def test_the_dp_vae_trains_at_epsilon_1_in_seconds_and_its_accountant_agrees(dp_vae):
    synthesizer, seconds = dp_vae
    assert seconds < 30  # typically ~3 s on 2 CPU cores
    # Opacus picks σ so that the accountant's ε is within its tolerance (0.01) below the target.
    assert synthesizer.accountant_epsilon <= 1.0 * 1.01
    assert synthesizer.accountant_epsilon > 0.9
    record = synthesizer.privacy_record()
    assert record["noise_multiplier"] > 1.0
    assert record["sample_rate"] == pytest.approx(128 / N, rel=0.05)
    assert record["steps"] == 10 * round(1 / record["sample_rate"])
    assert record["accountant"] == "prv" and record["poisson_sampling"] is True


def test_dp_vae_samples_have_the_training_columns_and_dtypes(dp_vae):
    synthesizer, _ = dp_vae
    sample = synthesizer.sample(500, seed=1)
    _assert_same_schema(sample, 500)
    assert set(sample["city"]) <= set(TRAIN["city"])
    assert sample["age"].between(TRAIN["age"].min(), TRAIN["age"].max()).all()
    pd.testing.assert_frame_equal(sample, synthesizer.sample(500, seed=1))  # seeded
    assert not sample.equals(synthesizer.sample(500, seed=2))


def test_a_dp_vae_at_epsilon_1_is_not_flagged_and_its_lower_bound_respects_its_epsilon(dp_vae):
    synthesizer, _ = dp_vae
    result = synthetic_privacy_checks(
        TRAIN, HOLDOUT, synthesizer.sample(N, seed=3), accountant_epsilon=synthesizer.accountant_epsilon
    )
    assert result["passed"], result["flags"]
    assert max(v for v in result["mia"]["epsilon_lb"].values() if v is not None) <= synthesizer.accountant_epsilon


def test_noisy_copy_is_flagged():
    sample = NoisyCopySynthesizer(noise_scale=0.01).fit(TRAIN).sample(N, seed=0)
    _assert_same_schema(sample, N)
    result = synthetic_privacy_checks(TRAIN, HOLDOUT, sample)
    assert not result["passed"]
    assert {"dcr", "mia"} <= {flag["check"] for flag in result["flags"]}
    assert result["dcr"]["dcr_share"] > 0.9
    assert result["nndr"]["p10"] < 0.1


def test_an_independent_sample_is_not_flagged():
    result = synthetic_privacy_checks(TRAIN, HOLDOUT, population(N, 13))
    assert result["passed"], result["flags"]


def test_the_gaussian_copula_leaks_less_than_a_noisy_copy():
    copula = GaussianCopulaSynthesizer(seed=0).fit(TRAIN)
    sample = copula.sample(N, seed=0)
    _assert_same_schema(sample, N)
    assert copula.epsilon is None
    noisy = NoisyCopySynthesizer(noise_scale=0.01).fit(TRAIN).sample(N, seed=0)
    auc_copula = synthetic_privacy_checks(TRAIN, HOLDOUT, sample)["mia"]["auc"]
    auc_noisy = synthetic_privacy_checks(TRAIN, HOLDOUT, noisy)["mia"]["auc"]
    assert auc_copula < auc_noisy
    # Fidelity sanity: marginals close to the training ones.
    fidelity = synthetic_privacy_checks(TRAIN, HOLDOUT, sample)["fidelity"]
    assert fidelity["max_ks"] < 0.1 and fidelity["max_tvd"] < 0.1


def test_synthesizers_share_one_interface_and_validate_input():
    assert set(SYNTHESIZERS) == {"noisy_copy", "gaussian_copula", "dp_vae"}
    for cls in (NoisyCopySynthesizer, GaussianCopulaSynthesizer):
        assert cls().epsilon is None
        with pytest.raises(RuntimeError, match="before fit"):
            cls().sample(3, seed=0)
    with pytest.raises(ValueError, match="epsilon"):
        DPVAESynthesizer(epsilon=float("inf"))
    with pytest.raises(SyntheticDataError, match=r"train, column 'score'.*missing"):
        NoisyCopySynthesizer().fit(TRAIN.assign(score=np.where(np.arange(N) == 5, np.nan, TRAIN["score"])))
    with pytest.raises(ValueError, match="n:"):
        NoisyCopySynthesizer().fit(TRAIN).sample(0, seed=0)
