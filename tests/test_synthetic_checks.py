"""Claims about the synthetic-data privacy checks (targets/tabular_encoding.py,
attacks/distance.py, audit/statistics/synthetic_metrics.py, audit/statistics/synthetic_evaluation.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import cdist

from attacks.distance import (
    distance_membership_scores,
    mutual_nearest_neighbours,
    nearest_distances,
    nearest_neighbours,
)
from audit.statistics.synthetic_evaluation import synthetic_privacy_checks
from audit.statistics.synthetic_metrics import (
    _permutation_null,
    dcr,
    equal_size_reference_rows,
    nndr,
    nndr_real_vs_synthetic,
)
from audit.synthetic.synthetic_check import read_table
from targets.tabular_encoding import MixedTypeEncoder, SyntheticDataError, rms_gower_distance


def population(n: int, seed: int) -> pd.DataFrame:
    """A seeded mixed-type population: correlated numerics (float, skewed, integer) + categoricals."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 3))
    return pd.DataFrame(
        {
            "age": np.rint(40 + 12 * z[:, 0]).astype(np.int64),
            "income": np.exp(10 + 0.5 * z[:, 1] + 0.3 * z[:, 0]),
            "score": z[:, 2] + 0.5 * z[:, 1],
            "city": rng.choice(["north", "south", "east", "west"], n, p=[0.4, 0.3, 0.2, 0.1]),
            "member": rng.random(n) < 0.3,
            "label": np.where(z[:, 0] + rng.normal(size=n) > 0, "yes", "no"),
        }
    )


N = 1500
TRAIN, HOLDOUT, INDEPENDENT = population(N, 1), population(N, 2), population(N, 3)


def checks_without_risks(*args, **kwargs):
    """The checks with the re-identification risks off (they are tested in test_synthetic_risks.py and
    in the two headline claims below), which keeps this file's run time where it was."""
    return synthetic_privacy_checks(*args, risk_attacks=0, **kwargs)


def _assert_json_ready(result: dict) -> None:
    json.dumps(result, allow_nan=False)


# --------------------------------------------------------------------------------------------------
# The two headline claims
# --------------------------------------------------------------------------------------------------


def test_a_copy_of_the_training_set_fails_the_synthetic_check():
    result = synthetic_privacy_checks(TRAIN, HOLDOUT, TRAIN.copy())
    assert result["dcr"]["dcr_share"] == pytest.approx(1.0)
    assert result["dcr"]["exact_match_rate"] == pytest.approx(1.0)
    assert result["nndr"]["p10"] == 0.0
    assert result["mia"]["auc"] > 0.99
    assert result["mia"]["tpr_at_fpr"]["0.001"] > 0.9
    assert result["mia"]["epsilon_lb"]["clopper_pearson"] > 3.0
    assert {flag["check"] for flag in result["flags"]} == {
        "dcr",
        "exact_copies",
        "mia",
        "risk_singling_out",
        "risk_linkability",
        "risk_inference",
    }
    assert result["passed"] is False
    _assert_json_ready(result)


def test_the_training_set_plus_tiny_noise_fails_the_synthetic_check():
    rng = np.random.default_rng(7)
    noisy = TRAIN.copy()
    for column in ("income", "score"):
        noisy[column] = noisy[column] + rng.normal(0, 1e-3 * noisy[column].std(), N)
    result = checks_without_risks(TRAIN, HOLDOUT, noisy)
    assert result["dcr"]["dcr_share"] > 0.99
    assert result["dcr"]["exact_match_rate"] == 0.0  # not copies, yet ...
    assert result["nndr"]["p10"] < 0.05  # ... each sits on one training record
    assert result["mia"]["auc"] > 0.99
    assert {"dcr", "mia"} <= {flag["check"] for flag in result["flags"]}


def test_an_independent_sample_from_the_same_distribution_passes():
    result = synthetic_privacy_checks(TRAIN, HOLDOUT, INDEPENDENT, target_column="label")
    low, high = result["dcr"]["dcr_share_ci"]
    assert low <= 0.5 <= high
    assert result["mia"]["auc"] == pytest.approx(0.5, abs=0.04)
    assert result["mia"]["auc_ci"][0] <= 0.5 <= result["mia"]["auc_ci"][1]
    assert result["dcr"]["exact_match_rate"] == 0.0
    assert result["nndr"]["median"] > 0.5
    assert result["flags"] == [] and result["passed"] is True
    assert result["fidelity"]["tstr"]["relative"] == pytest.approx(1.0, abs=0.1)
    _assert_json_ready(result)


def test_report_shape_and_json_keys():
    result = checks_without_risks(TRAIN, HOLDOUT, INDEPENDENT, seed=3)
    for key in (
        "nndr",
        "nndr_real_vs_synthetic",
        "dcr",
        "mia",
        "fidelity",
        "warnings",
        "n_train",
        "n_holdout",
        "n_synthetic",
    ):
        assert key in result
    assert set(result["mia"]["tpr_at_fpr"]) == {"0.001", "0.01", "0.1"}
    assert (result["n_train"], result["n_holdout"], result["n_synthetic"]) == (N, N, N)
    for stat in ("p1", "p10", "median", "mean"):
        assert 0 <= result["nndr"][stat] <= 1
    assert set(result["fidelity"]["ks"]) == {"age", "income", "score"}
    assert set(result["fidelity"]["tvd"]) == {"city", "member", "label"}


def test_one_run_bound_only_when_membership_was_randomised():
    plain = checks_without_risks(TRAIN, HOLDOUT, TRAIN.copy())
    assert plain["mia"]["epsilon_lb"]["one_run"] is None
    assert "coin flip" in plain["mia"]["one_run_note"]
    randomised = checks_without_risks(TRAIN, HOLDOUT, TRAIN.copy(), membership_randomized=True)
    assert randomised["mia"]["epsilon_lb"]["one_run"] > 1.0
    assert randomised["mia"]["one_run_note"] is None


def test_an_epsilon_lower_bound_above_the_claimed_epsilon_is_flagged():
    result = checks_without_risks(TRAIN, HOLDOUT, TRAIN.copy(), accountant_epsilon=1.0, membership_randomized=True)
    assert "epsilon_violation" in {flag["check"] for flag in result["flags"]}
    assert result["mia"]["advantage_bound"] < result["mia"]["advantage"]


def test_without_coin_flip_membership_only_the_proven_bound_could_flag_a_dp_claim():
    # Clopper-Pearson over one release's records assumes independent trials: it is shown, not used.
    result = synthetic_privacy_checks(TRAIN, HOLDOUT, TRAIN.copy(), accountant_epsilon=1.0)
    assert result["mia"]["epsilon_lb"]["clopper_pearson"] > 1.0
    assert "epsilon_violation" not in {flag["check"] for flag in result["flags"]}
    assert result["mia"]["epsilon_lb_scope"]["clopper_pearson"]["decides"] is False
    # The leak tests and the re-identification risks form one Holm family (issue 27).
    assert {t["check"] for t in result["leak_tests"]} == {
        "dcr",
        "exact_copies",
        "mia",
        "risk_singling_out",
        "risk_linkability",
        "risk_inference",
    }
    assert "Holm" in result["flag_family"]


# --------------------------------------------------------------------------------------------------
# Nearest neighbours: chunked == brute force
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n_queries, n_reference, n_features, chunk_size, tile_size",
    [(700, 900, 6, 64, 256), (37, 5, 3, 16, 16), (300, 301, 9, 512, 2048), (1000, 999, 12, 128, 100)],
)
def test_nearest_distances_chunked_equal_brute_force(n_queries, n_reference, n_features, chunk_size, tile_size):
    rng = np.random.default_rng(n_queries)
    queries = rng.random((n_queries, n_features)).astype(np.float32)
    reference = rng.random((n_reference, n_features)).astype(np.float32)
    queries[:3] = reference[:3]  # exact copies must come out as exactly 0
    if n_reference > 12:
        reference[10:13] = reference[9]  # duplicated reference rows
    brute = np.sort(cdist(queries.astype(float), reference.astype(float)), axis=1)
    k = min(3, n_reference)
    distances, indices = nearest_neighbours(queries, reference, k, chunk_size=chunk_size, tile_size=tile_size)
    np.testing.assert_allclose(distances, brute[:, :k], atol=1e-6)
    assert np.all(distances[:3, 0] == 0.0)
    recomputed = np.linalg.norm(reference[indices] - queries[:, None, :], axis=2)
    np.testing.assert_allclose(recomputed, distances, atol=1e-6)

    (rows, _), (cols, _) = mutual_nearest_neighbours(
        queries, reference, 2 if n_reference > 1 else 1, chunk_size=chunk_size, tile_size=tile_size
    )
    full = cdist(queries.astype(float), reference.astype(float))
    np.testing.assert_allclose(rows, np.sort(full, axis=1)[:, : rows.shape[1]], atol=1e-6)
    np.testing.assert_allclose(cols[:, 0], full.min(axis=0), atol=1e-6)


@pytest.mark.parametrize("k, chunk_size", [(1, 64), (2, 64), (1, 512)])
def test_nearest_other_row_excludes_itself_but_not_its_duplicates(k, chunk_size):
    rng = np.random.default_rng(k)
    rows = rng.random((600, 5)).astype(np.float32)
    rows[100:104] = rows[99]
    full = cdist(rows.astype(float), rows.astype(float))
    np.fill_diagonal(full, np.inf)
    distances, indices = nearest_neighbours(rows, rows, k, exclude_self=True, chunk_size=chunk_size, tile_size=256)
    np.testing.assert_allclose(distances, np.sort(full, axis=1)[:, :k], atol=1e-6)
    assert np.all(indices[:, 0] != np.arange(600))
    assert np.all(distances[99:104, 0] == 0.0)


def test_distance_membership_score_is_minus_the_distance_to_the_nearest_synthetic_row():
    rng = np.random.default_rng(0)
    candidates, synthetic = rng.random((50, 4)), rng.random((80, 4))
    expected = -cdist(candidates, synthetic).min(axis=1)
    np.testing.assert_allclose(distance_membership_scores(candidates, synthetic), expected, atol=1e-6)


def test_nearest_neighbour_inputs_are_validated():
    with pytest.raises(ValueError, match="queries"):
        nearest_distances(np.ones(3), np.ones((3, 1)))
    with pytest.raises(ValueError, match="NaN"):
        nearest_distances(np.full((2, 2), np.nan), np.ones((3, 2)))
    with pytest.raises(ValueError, match="k"):
        nearest_distances(np.ones((2, 2)), np.ones((3, 2)), k=4)


# --------------------------------------------------------------------------------------------------
# Encoding: the documented distance, NaN policy, schema errors
# --------------------------------------------------------------------------------------------------


def test_encoded_euclidean_distance_is_the_rms_gower_distance_by_hand():
    train = pd.DataFrame({"x": [0.0, 10.0, 4.0], "y": [1, 3, 2], "colour": ["red", "blue", "red"]})
    holdout = pd.DataFrame({"x": [2.0, 6.0, 8.0], "y": [5, 1, 2], "colour": ["green", "red", "blue"]})
    encoder = MixedTypeEncoder().fit(train, holdout)
    a = pd.DataFrame({"x": [4.0], "y": [1], "colour": ["red"]})
    b = pd.DataFrame({"x": [9.0], "y": [2], "colour": ["blue"]})
    # x: |4 − 9| / 10 = 0.5; y: |1 − 2| / (5 − 1) = 0.25; colour: mismatch = 1.
    expected = math.sqrt((0.5**2 + 0.25**2 + 1.0) / 3)
    distance = rms_gower_distance(encoder.transform(a), encoder.transform(b))[0]
    assert distance == pytest.approx(expected, abs=1e-6)
    # Values outside the train+holdout range are clipped: a column contributes at most 1.
    far = pd.DataFrame({"x": [1000.0], "y": [2], "colour": ["purple"]})  # unseen colour
    expected_far = math.sqrt((0.1**2 + 0.0 + 1.0) / 3)  # x clipped to 10: |10 − 9| / 10
    assert rms_gower_distance(encoder.transform(far), encoder.transform(b))[0] == pytest.approx(expected_far, abs=1e-6)
    assert encoder.unseen_categories(far) == {"colour": 1}


def test_nan_policy_error_names_the_file_and_column():
    holdout = HOLDOUT.copy()
    holdout.loc[5, "income"] = np.nan
    with pytest.raises(SyntheticDataError, match=r"holdout.*income.*missing"):
        checks_without_risks(TRAIN, holdout, INDEPENDENT)
    synthetic = INDEPENDENT.copy()
    synthetic.loc[[1, 2], "city"] = None
    with pytest.raises(SyntheticDataError, match=r"synthetic.*city.*2 missing"):
        checks_without_risks(TRAIN, HOLDOUT, synthetic)


def test_nan_policy_drop_rows_drops_and_warns():
    synthetic = INDEPENDENT.copy()
    synthetic.loc[[1, 2, 3], "score"] = np.nan
    result = checks_without_risks(TRAIN, HOLDOUT, synthetic, nan_policy="drop_rows")
    assert result["n_synthetic"] == N - 3
    assert any("dropped 3" in w for w in result["warnings"])


def test_nan_policy_indicator_treats_missing_as_its_own_value():
    train = pd.DataFrame({"x": [0.0, 1.0, np.nan], "c": ["a", None, "b"]})
    encoder = MixedTypeEncoder(nan_policy="indicator").fit(train, train)
    encoded = encoder.transform(train)
    both_missing = pd.DataFrame({"x": [np.nan], "c": ["a"]})
    assert rms_gower_distance(encoder.transform(both_missing), encoded[2:3])[0] == pytest.approx(math.sqrt(1 / 2))
    # missing vs present contributes 3/4 + (v − 1/2)², within [3/4, 1]: here v = 0 → 1.
    x_only = pd.DataFrame({"x": [0.0], "c": ["b"]})
    assert rms_gower_distance(encoder.transform(x_only), encoded[2:3])[0] == pytest.approx(math.sqrt(1.0 / 2))
    with pytest.raises(ValueError, match="nan_policy"):
        MixedTypeEncoder(nan_policy="ignore")


def test_missing_and_extra_columns_are_named():
    synthetic = INDEPENDENT.drop(columns=["score"]).assign(zip_code="12345")
    with pytest.raises(
        SyntheticDataError, match=r"synthetic.*missing column\(s\) \['score'\].*unexpected column\(s\) \['zip_code'\]"
    ):
        checks_without_risks(TRAIN, HOLDOUT, synthetic)
    with pytest.raises(SyntheticDataError, match=r"holdout.*missing column\(s\) \['city'\]"):
        checks_without_risks(TRAIN, HOLDOUT.drop(columns=["city"]), INDEPENDENT)


def test_a_column_numeric_in_one_file_and_text_in_another_is_named():
    synthetic = INDEPENDENT.assign(age=INDEPENDENT["age"].astype(str) + " years")
    with pytest.raises(SyntheticDataError, match=r"synthetic.*'age'.*categorical.*numeric in the train"):
        checks_without_risks(TRAIN, HOLDOUT, synthetic)


def test_empty_frames_and_files_are_named(tmp_path):
    with pytest.raises(SyntheticDataError, match=r"synthetic.*no rows"):
        checks_without_risks(TRAIN, HOLDOUT, INDEPENDENT.iloc[:0])
    header_only = tmp_path / "synthetic.csv"
    header_only.write_text("age,income\n")
    with pytest.raises(SyntheticDataError, match=r"synthetic file '.*synthetic.csv'.*no rows"):
        read_table(header_only, "synthetic")
    empty = tmp_path / "train.csv"
    empty.write_text("")
    with pytest.raises(SyntheticDataError, match=r"train file '.*train.csv'.*empty"):
        read_table(empty, "train")
    with pytest.raises(SyntheticDataError, match=r"holdout file.*unknown file type"):
        read_table(tmp_path / "holdout.xlsx", "holdout")
    with pytest.raises(SyntheticDataError, match=r"holdout file.*does not exist"):
        read_table(tmp_path / "nope.csv", "holdout")
    corrupt = tmp_path / "train.parquet"
    corrupt.write_bytes(b"not parquet at all")
    with pytest.raises(SyntheticDataError, match=r"train file '.*train.parquet'.*cannot be read"):
        read_table(corrupt, "train")


def test_read_table_reads_csv_and_parquet_and_errors_name_the_path(tmp_path):
    TRAIN.to_csv(tmp_path / "train.csv", index=False)
    TRAIN.to_parquet(tmp_path / "train.parquet")
    from_csv = read_table(tmp_path / "train.csv", "train")
    from_parquet = read_table(tmp_path / "train.parquet", "train")
    pd.testing.assert_frame_equal(from_parquet, TRAIN)
    assert list(from_csv.columns) == list(TRAIN.columns)
    broken = from_csv.assign(age="x")
    with pytest.raises(SyntheticDataError, match=r"synthetic \(.*train.csv\), column 'age'"):
        MixedTypeEncoder().fit(from_csv, from_csv).transform(broken, "synthetic")


# --------------------------------------------------------------------------------------------------
# DCR sizes and statistics
# --------------------------------------------------------------------------------------------------


def test_a_much_smaller_holdout_raises_unless_train_may_be_subsampled():
    small = HOLDOUT.iloc[:1000]
    with pytest.raises(SyntheticDataError, match=r"holdout.*1000 rows.*train has 1500"):
        checks_without_risks(TRAIN, small, INDEPENDENT)
    result = checks_without_risks(TRAIN, small, INDEPENDENT, subsample_train=True)
    assert (result["dcr"]["n_train"], result["dcr"]["n_holdout"]) == (1000, 1000)
    assert any("train has 1500 rows" in w for w in result["warnings"])


def test_a_larger_holdout_is_subsampled_to_the_train_size_with_a_warning():
    result = checks_without_risks(TRAIN.iloc[:1000], HOLDOUT, INDEPENDENT)
    assert (result["dcr"]["n_train"], result["dcr"]["n_holdout"]) == (1000, 1000)
    assert any("holdout has 1500 rows" in w for w in result["warnings"])
    assert result["dcr"]["warnings"]
    train_rows, holdout_rows, _ = equal_size_reference_rows(1000, 1500, seed=0)
    assert train_rows.size == holdout_rows.size == 1000 and np.unique(holdout_rows).size == 1000


def test_pure_dcr_and_nndr_on_encoded_arrays():
    encoder = MixedTypeEncoder().fit(TRAIN, HOLDOUT)
    x_train, x_holdout = encoder.transform(TRAIN), encoder.transform(HOLDOUT)
    copied = dcr(x_train, x_train, x_holdout)
    assert copied["dcr_share"] == 1.0 and copied["dcr_share_ci"][0] > 0.99
    assert copied["permutation_p_value"] < 1e-6
    assert nndr(x_train, x_train)["median"] == 0.0
    fresh = encoder.transform(INDEPENDENT)
    assert nndr_real_vs_synthetic(fresh, x_train)["median"] == pytest.approx(1.0, abs=0.15)


def test_dcr_permutation_spread_matches_random_relabelling_when_synthetic_rows_crowd():
    # 1000 synthetic rows whose nearest real rows are only 40 of 400: the binomial interval would
    # be 5x too narrow; the permutation standard error must match a simulation of the split.
    rng = np.random.default_rng(0)
    n_pool, n_train, nearest = 400, 200, rng.integers(0, 40, size=1000)
    simulated = []
    for _ in range(4000):
        is_train = np.zeros(n_pool, bool)
        is_train[rng.choice(n_pool, n_train, replace=False)] = True
        simulated.append(is_train[nearest].mean())
    is_train = np.zeros(n_pool, bool)
    is_train[rng.choice(n_pool, n_train, replace=False)] = True
    train_id, holdout_id = np.cumsum(is_train) - 1, np.cumsum(~is_train) - 1
    closer = is_train[nearest]
    _, se = _permutation_null(
        closer,
        np.ones(1000, bool),
        np.where(closer, train_id[nearest], 0),
        np.where(closer, 0, holdout_id[nearest]),
        n_train,
        n_pool - n_train,
    )
    assert se == pytest.approx(np.std(simulated), rel=0.1)
    assert se > 3 * math.sqrt(0.25 / 1000)


def test_an_unknown_target_column_is_named_before_any_work():
    with pytest.raises(SyntheticDataError, match=r"target column 'income_band'"):
        checks_without_risks(TRAIN, HOLDOUT, INDEPENDENT, target_column="income_band")


def test_the_textbook_nndr_on_a_row_sample_uses_the_nearest_other_synthetic_row(monkeypatch):
    import audit.statistics.synthetic_evaluation as synthetic_check

    full = checks_without_risks(TRAIN, HOLDOUT, INDEPENDENT)["nndr_real_vs_synthetic"]
    monkeypatch.setattr(synthetic_check, "TEXTBOOK_NNDR_MAX_ROWS", 600)
    sampled = checks_without_risks(TRAIN, HOLDOUT, INDEPENDENT)["nndr_real_vs_synthetic"]
    assert (full["n_synthetic_rows_evaluated"], sampled["n_synthetic_rows_evaluated"]) == (N, 600)
    assert sampled["median"] == pytest.approx(full["median"], abs=0.05)
    rows = np.array([0, 5, 7])
    x = np.array([[0.0], [0.0], [1.0], [3.0], [0.5], [0.0], [9.0], [8.0]], dtype=np.float32)
    np.testing.assert_allclose(synthetic_check._nearest_other_row(x, rows), [0.0, 0.0, 1.0])
