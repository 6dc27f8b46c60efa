"""The pruned searches of the 100k synthetic check give exactly the full searches' answers (issue 27, item 6):
attacks/distance_groups.py (nearest neighbours pruned by category combination) and the early-exit
predicate counting of singling out (audit/statistics/singling_out.py)."""

import numpy as np
import pandas as pd
import pytest

from attacks.distance import mutual_nearest_neighbours, nearest_neighbours
from attacks.distance_groups import grouped_mutual_nearest_neighbours, grouped_nearest_neighbours
from audit.statistics import singling_out
from audit.statistics.synthetic_evaluation import category_groups
from targets.tabular_encoding import MixedTypeEncoder

P = 5  # columns: 3 numeric, 2 categorical


def _table(n: int, rng: np.random.Generator) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "a": rng.random(n),
            "b": rng.normal(size=n),
            "c": rng.integers(0, 90, n),
            "d": rng.choice(["x", "y", "z"], n),
            "e": rng.choice(["p", "q"], n, p=[0.9, 0.1]),
        }
    )


@pytest.fixture(scope="module")
def encoded():
    rng = np.random.default_rng(3)
    train, holdout, synthetic = _table(900, rng), _table(900, rng), _table(700, rng)
    synthetic.iloc[:40] = train.iloc[:40].to_numpy()  # exact copies
    synthetic.loc[40:45, "d"] = "w"  # an unseen category: a group with no real row (always searched in full)
    encoder = MixedTypeEncoder().fit(train, holdout)
    x = [encoder.transform(df) for df in (train, holdout, synthetic)]
    groups, gap = category_groups(encoder, *x)
    return x, groups, gap


def test_category_groups_separate_rows_by_at_least_the_gap(encoded):
    (x_train, _, x_syn), (g_train, _, g_syn), gap = encoded
    assert gap == pytest.approx(1 / P)
    d2 = ((x_syn[:200, None, :] - x_train[None, :300, :]) ** 2).sum(axis=2)
    different = g_syn[:200, None] != g_train[None, :300]
    assert d2[different].min() >= gap * (1 - 1e-5)
    assert len(np.unique(g_syn)) == 7  # 3 × 2 seen combinations + the unseen category's


def test_grouped_searches_equal_the_full_search(encoded):
    (x_train, x_holdout, x_syn), (g_train, g_holdout, g_syn), gap = encoded
    for k in (1, 2):
        full = mutual_nearest_neighbours(x_syn, x_train, k_a=k, chunk_size=64, tile_size=64)
        pruned = grouped_mutual_nearest_neighbours(x_syn, x_train, k, g_syn, g_train, gap, chunk_size=64, tile_size=64)
        for (d_full, i_full), (d_pruned, i_pruned) in zip(full, pruned):
            np.testing.assert_array_equal(d_pruned, d_full)
            np.testing.assert_array_equal(i_pruned, i_full)
        # A case the proof cannot settle was there, and was searched in full: the unseen
        # category's rows have no row of their own group, so nothing within the gap.
        assert (full[0][0][40:46, 0] ** 2 >= gap).all()
    d_full, _ = nearest_neighbours(x_holdout, x_syn, k=2)
    d_pruned, _ = grouped_nearest_neighbours(x_holdout, x_syn, 2, g_holdout, g_syn, gap, chunk_size=64, tile_size=64)
    np.testing.assert_array_equal(d_pruned, d_full)


def _brute_force_singled(real_t, cols, ops, values, sides):
    matches = singling_out._query_masks(real_t, cols, ops, values).astype(np.int64)
    return ((matches @ sides.astype(np.int64)) == 1).sum(axis=0)


def test_early_exit_counting_of_predicates_equals_the_full_mask():
    rng = np.random.default_rng(5)
    n_rows = 3000
    real = np.column_stack([rng.random(n_rows), rng.random(n_rows), rng.integers(0, 4, n_rows).astype(float)])
    real[:50] = real[50:100]  # duplicates: predicates matching exactly two rows
    real_t = np.ascontiguousarray(real.T)
    n_queries = 300
    cols = np.sort(np.argsort(rng.random((n_queries, 3)), axis=1)[:, :2], axis=1)
    pick = rng.integers(0, n_rows, n_queries)
    values = real[pick[:, None], cols]
    ops = np.where(cols == 2, singling_out._EQ, np.where(values > 0.5, singling_out._GE, singling_out._LE))
    sides = np.column_stack([np.arange(n_rows) < n_rows // 2, rng.random((n_rows, 20)) < 0.5])
    counted = singling_out._singled_out_counts(real_t, cols, ops, values, sides, seed=(0, 11))
    with_complements = np.column_stack([sides, ~sides])  # the function also counts each side's complement
    np.testing.assert_array_equal(counted, _brute_force_singled(real_t, cols, ops, values, with_complements))
    assert counted.max() > 0
