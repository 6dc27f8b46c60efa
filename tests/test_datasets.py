import numpy as np
import pandas as pd
import pytest

from audit.errors import AuditInputError
from targets.datasets import load_sklearn_dataset, load_table_dataset, make_default_tabular


def test_default_dataset_is_seeded_mixed_type_and_has_rare_subpopulations():
    a, b = make_default_tabular(3000, seed=1), make_default_tabular(3000, seed=1)
    assert np.array_equal(a.features, b.features) and np.array_equal(a.labels, b.labels)
    assert a.features.dtype == np.float32 and a.features.shape[0] == 3000
    assert any(name.startswith("region_") for name in a.feature_names)  # one-hot categoricals
    rare = {g for g in a.subpopulation if g.startswith("rare")}
    assert rare == {"rare_a", "rare_b", "rare_c"}
    assert 0.4 < a.labels.mean() < 0.6


def test_another_seed_gives_another_dataset():
    assert not np.array_equal(make_default_tabular(500, 1).features, make_default_tabular(500, 2).features)


def test_a_user_csv_loads_with_its_named_label_column(tmp_path):
    frame = pd.DataFrame({"age": [30, 41, 25, 60] * 10, "city": ["a", "b", "a", "c"] * 10, "y": [0, 1, 0, 1] * 10})
    frame.to_csv(tmp_path / "d.csv", index=False)
    data = load_table_dataset(tmp_path / "d.csv", "y")
    assert data.n_classes == 2 and data.features.shape == (40, 4)  # age + 3 one-hot city levels


def test_parquet_is_read_too(tmp_path):
    frame = pd.DataFrame({"x": np.arange(20.0), "label": [0, 1] * 10})
    frame.to_parquet(tmp_path / "d.parquet")
    assert load_table_dataset(tmp_path / "d.parquet", "label").n_rows == 20


@pytest.mark.parametrize(
    "frame, label, message",
    [
        (pd.DataFrame({"x": [1.0, 2.0], "y": [0, 1]}), "target", "no label column 'target'"),
        (pd.DataFrame({"x": [1.0, 2.0], "y": ["cat", "dog"]}), "y", "numeric class labels"),
        (pd.DataFrame({"x": [1.0, 2.0], "y": [1, 1]}), "y", "single class"),
        (pd.DataFrame({"x": [1.0, np.nan], "y": [0, 1]}), "y", "column 'x'.*missing values"),
    ],
    ids=["unknown label column", "non-numeric label", "one-class data", "NaN features"],
)
def test_bad_user_data_names_the_problem(tmp_path, frame, label, message):
    frame.to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(AuditInputError, match=message):
        load_table_dataset(tmp_path / "d.csv", label)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(AuditInputError, match="nope.csv"):
        load_table_dataset(tmp_path / "nope.csv", "y")


@pytest.mark.parametrize("name, classes", [("breast_cancer", 2), ("digits", 10)])
def test_sklearn_bundled_datasets_load_without_download(name, classes):
    data = load_sklearn_dataset(name)
    assert data.n_classes == classes and np.isfinite(data.features).all()
