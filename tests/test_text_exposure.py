"""Secret exposure (Carlini et al. 2019) against brute force, its estimate against the exact value,
its chance level, and extraction by greedy / beam completion."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attacks.extraction import beam_continuation, exact_recoveries, greedy_continuations
from attacks.secret_exposure import all_secret_log_likelihoods, secret_log_likelihoods
from audit.statistics.exposure import (
    RANDOM_EXPOSURE_MEAN,
    exposure_exact,
    exposure_extrapolated,
    exposure_from_rank,
    exposure_p_value,
    rank_of_secret,
)
from targets.text_models import TextTrainingSpec, TinyCausalLM, train_text_target

DIGITS = list(range(4, 14))  # token ids of '0' … '9' in these toy models


def test_exposure_reference_values():
    assert exposure_from_rank(1, 1024) == pytest.approx(10.0)
    assert exposure_from_rank(1024, 1024) == 0.0
    assert exposure_from_rank(4, 1024) == pytest.approx(8.0)
    with pytest.raises(ValueError):
        exposure_from_rank(0, 10)


def test_ties_count_against_the_secret():
    assert rank_of_secret(np.zeros(100), 7) == 100  # a model indifferent to the secret: exposure 0
    assert exposure_exact(np.zeros(100), 7) == 0.0
    assert rank_of_secret(np.array([0.1, 0.5, 0.3, 0.5]), 2) == 3


def test_tree_enumeration_equals_brute_force_scoring_of_every_secret():
    torch.manual_seed(0)
    model = TinyCausalLM(20, d_model=16, n_layers=1, n_heads=2, max_length=16).eval()
    prefix = [2, 15, 16, 17]
    tree = all_secret_log_likelihoods(model, prefix, DIGITS, 3, batch_size=64)
    every = [f"{i:03d}" for i in range(1000)]
    brute = secret_log_likelihoods(model, prefix, DIGITS, every, batch_size=128)
    np.testing.assert_allclose(tree, brute, rtol=0, atol=1e-5)  # float32 models, two code paths
    secret = 417
    order = np.argsort(-brute, kind="stable")  # brute-force rank: sort every candidate
    brute_rank = int(np.nonzero(order == secret)[0][0]) + 1
    assert rank_of_secret(tree, secret) == brute_rank  # no ties among float log-likelihoods here
    assert exposure_exact(tree, secret) == pytest.approx(math.log2(1000) - math.log2(brute_rank))


def test_the_extrapolated_estimate_agrees_with_the_exact_exposure():
    from scipy.stats import skewnorm

    rng = np.random.default_rng(1)
    space = skewnorm.rvs(3.0, loc=-20, scale=4, size=200_000, random_state=rng)  # log-likelihoods of a space
    for quantile in (0.5, 0.05, 0.001):
        secret = int(np.argsort(-space)[int(quantile * len(space))])
        exact = exposure_exact(space, secret)
        sampled = space[rng.choice(len(space), size=5000, replace=False)]
        assert exposure_extrapolated(space[secret], sampled, len(space)) == pytest.approx(exact, abs=0.35)


def test_an_unseen_secret_has_chance_exposure_and_calibrated_p_values():
    rng = np.random.default_rng(2)
    exposures = np.array([exposure_from_rank(int(r), 10_000) for r in rng.integers(1, 10_001, size=20_000)])
    assert exposures.mean() == pytest.approx(RANDOM_EXPOSURE_MEAN, abs=0.05)
    p_values = np.array([exposure_p_value(e) for e in exposures])
    assert np.mean(p_values <= 0.05) <= 0.05 + 0.005  # false alarms at the 5 % level


@pytest.fixture(scope="module")
def memorised_secret():
    """A model trained on one canary, 40 times, among 40 filler documents."""
    canary = [2, 15, 16, 17, 18] + [DIGITS[d] for d in (3, 1, 4, 1)] + [3]
    rng = np.random.default_rng(0)
    filler = [[2] + list(rng.integers(14, 30, size=8)) + [3] for _ in range(40)]  # same length, 10 tokens
    ids = np.array([canary] * 40 + filler)
    spec = TextTrainingSpec(d_model=32, n_layers=1, n_heads=2, max_length=16, epochs=30, batch_size=16)
    model = train_text_target(
        ids, 30, spec, epsilon=math.inf, delta=1e-5, accountant="prv", seed=0, device=torch.device("cpu")
    ).model
    return model, canary[:5], canary[5:9]


def test_a_memorised_secret_is_exposed_and_extracted(memorised_secret):
    model, prefix, secret = memorised_secret
    log_likelihoods = all_secret_log_likelihoods(model, prefix, DIGITS, 4)
    assert exposure_exact(log_likelihoods, 3141) == pytest.approx(math.log2(10_000))  # rank 1
    greedy = greedy_continuations(model, [prefix, [2, 15]], 4)
    assert exact_recoveries(greedy, [secret, [16, 17, 18, DIGITS[3]]]).tolist() == [True, True]
    assert beam_continuation(model, prefix, 4, beams=3) == secret
    assert beam_continuation(model, prefix, 4, beams=1) == greedy[0]  # width 1 is greedy


def test_secrets_the_model_never_saw_have_chance_exposure_even_under_a_memorising_model(memorised_secret):
    """The rank of a secret drawn independently of the model is uniform whatever the model prefers:
    mean exposure 1/ln 2 (SD of the mean over 300 secrets ≈ 0.083)."""
    model, prefix, _ = memorised_secret
    log_likelihoods = all_secret_log_likelihoods(model, prefix, DIGITS, 4)
    rng = np.random.default_rng(5)
    exposures = [exposure_exact(log_likelihoods, int(s)) for s in rng.integers(0, 10_000, size=300)]
    assert np.mean(exposures) == pytest.approx(RANDOM_EXPOSURE_MEAN, abs=0.35)
