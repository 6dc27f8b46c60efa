"""Black-box mechanism audits: a correct mechanism passes, a mechanism with too little noise is caught."""

import json

import numpy as np
import pytest

from audit.demos.mechanisms import (  # noqa: E402
    gaussian_mean,
    laplace_count,
    laplace_count_wrong_scale,
    neighbouring_datasets,
)
from audit.dp_validation.mechanism_audit import audit_mechanism, check_neighbouring, threshold_audit
from audit.errors import AuditInputError

COUNTS = neighbouring_datasets(100, relation="add_remove", seed=0)
MEANS = neighbouring_datasets(100, relation="replace", seed=0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_correct_laplace_count_at_epsilon_1_is_not_flagged(seed):
    result = audit_mechanism(laplace_count, *COUNTS, n_trials=20_000, claimed_epsilon=1.0, seed=seed)
    assert not result["violation"]
    # A tight audit: the optimal test of Laplace(1) shifted by 1 has likelihood ratio ≤ e.
    assert 0.5 < result["epsilon_lower_bound"] <= 1.0


def test_a_laplace_mechanism_with_a_quarter_of_the_noise_is_caught():
    result = audit_mechanism(laplace_count_wrong_scale, *COUNTS, n_trials=20_000, claimed_epsilon=1.0, seed=0)
    assert result["violation"]
    assert 3.0 < result["epsilon_lower_bound"] <= 4.0  # its true ε is 4
    json.dumps(result, allow_nan=False)


def test_a_correct_gaussian_mean_is_not_flagged():
    result = audit_mechanism(gaussian_mean, *MEANS, n_trials=20_000, claimed_epsilon=0.5, delta=1e-5, seed=0)
    assert not result["violation"]


def test_null_runs_on_identical_datasets_give_zero_in_at_least_95_percent_of_200_repeats():
    data, _ = COUNTS
    bounds = [
        audit_mechanism(laplace_count_wrong_scale, data, data, n_trials=1000, claimed_epsilon=1.0, seed=s)[
            "epsilon_lower_bound"
        ]
        for s in range(200)
    ]
    assert sum(b == 0 for b in bounds) >= 190


def test_a_mechanism_without_a_batched_form_is_called_once_per_trial():
    calls = []

    def noisy_sum(data, rng):
        calls.append(1)
        return float(np.sum(data)) + rng.laplace(0, 0.25)

    result = audit_mechanism(noisy_sum, *COUNTS, n_trials=3000, claimed_epsilon=1.0, seed=0)
    assert len(calls) == 6000
    assert result["violation"]


def test_a_vector_output_is_audited_through_a_statistic():
    def noisy_histogram(data, rng):
        return np.array([np.sum(data == 0), np.sum(data == 1)], dtype=float) + rng.laplace(0, 0.25, size=2)

    result = audit_mechanism(
        noisy_histogram, *COUNTS, n_trials=3000, claimed_epsilon=1.0, seed=0, statistic=lambda out: out[1]
    )
    assert result["violation"]
    with pytest.raises(AuditInputError, match="statistic"):
        audit_mechanism(noisy_histogram, *COUNTS, n_trials=100, claimed_epsilon=1.0)


def test_the_threshold_is_never_evaluated_on_the_draws_that_chose_it():
    # Selection halves separate perfectly; evaluation halves point the other way: a bound computed
    # on the selection draws would be large, the honest one is 0.
    positive = np.r_[np.full(50, 10.0), np.full(50, -10.0)]
    negative = np.r_[np.full(50, -10.0), np.full(50, 10.0)]
    result = threshold_audit(positive, negative, delta=0.0)
    assert result["selection"]["false_positives"] == 0 and result["selection"]["false_negatives"] == 0
    assert result["epsilon_lower_bound"] == 0.0


def test_datasets_that_differ_in_more_than_one_record_are_refused():
    a, b = COUNTS
    with pytest.raises(AuditInputError, match="dataset_b.*not a neighbour"):
        audit_mechanism(laplace_count, a, np.append(b, [1.0, 1.0]), n_trials=100, claimed_epsilon=1.0)
    assert check_neighbouring(*MEANS) == 1 and check_neighbouring(a, a) == 0


@pytest.mark.parametrize(
    "kwargs, where",
    [
        ({"claimed_epsilon": 0.0}, "claimed_epsilon"),
        ({"claimed_epsilon": -1.0}, "claimed_epsilon"),
        ({"claimed_epsilon": float("inf")}, "claimed_epsilon"),
        ({"delta": 1.0}, "delta"),
        ({"n_trials": 0}, "n_trials"),
        ({"n_trials": 3}, "n_trials"),
        ({"confidence": 1.0}, "confidence"),
    ],
)
def test_bad_arguments_name_the_problem(kwargs, where):
    args = {"n_trials": 100, "claimed_epsilon": 1.0, **kwargs}
    with pytest.raises(AuditInputError) as info:
        audit_mechanism(laplace_count, *COUNTS, **args)
    assert info.value.where == where


def test_a_mechanism_returning_text_is_bad_input():
    with pytest.raises(AuditInputError, match="mechanism"):
        audit_mechanism(lambda data, rng: "seven", *COUNTS, n_trials=10, claimed_epsilon=1.0)


def test_the_cli_entry_point_reads_the_mechanisms_claim_and_datasets():
    from audit.dp_validation.mechanism_audit import run_mechanism_audit

    caught = run_mechanism_audit("audit.demos.mechanisms:laplace_count_wrong_scale", seed=0)
    assert caught["violation"] and caught["claim"]["epsilon"] == 1.0 and caught["n_trials"] == 20_000
    passed = run_mechanism_audit(gaussian_mean, seed=0)
    assert not passed["violation"] and passed["delta"] == 1e-5
    with pytest.raises(AuditInputError) as info:
        run_mechanism_audit(lambda data, rng: 0.0, claimed_epsilon=1.0, delta=0.0)
    assert info.value.where == "mechanism" and "--datasets" not in info.value.message  # a flag it does not have
    with pytest.raises(AuditInputError) as info:
        run_mechanism_audit(lambda data, rng: 0.0, datasets=COUNTS)
    assert info.value.where == "claimed_epsilon"
