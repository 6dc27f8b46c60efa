"""The main job's "white-box one-run" rows: a DP target's twin trained with canaries, and its place in the verdict."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from audit.machinery.verdict import verdict_for_results
from audit.sweep.whitebox_one_run import ROW_FAMILY, whitebox_one_run_entry
from targets.datasets import make_default_tabular
from targets.training import TrainingSpec, train_target


def _row(p_value: float, refutable: bool = True, claim: float = 8.0) -> dict:
    return {
        "family": ROW_FAMILY,
        "claim": claim,
        "delta": 1e-5,
        "m": 1000,
        "kind": "dirac",
        "status": "held",
        "p_value": p_value,
        "refutable_alone": refutable,
        "ceiling": 4.39,
        "steinke_epsilon": 1.0,
        "fdp_refuted": p_value <= 0.05,
        "gaussian_sum_epsilon": 2.0,
        "andrew_epsilon": 3.0,
        "canaries_needed": None if refutable else 50_000,
        "test_accuracy_with_canaries": 0.8,
        "test_accuracy_target": 0.81,
        "train_seconds_with_canaries": 2.0,
        "train_seconds_target": 1.0,
    }


def _results(row: dict) -> dict:
    target = {
        "epsilon_target": row["claim"],
        "delta": 1e-5,
        "epsilon": {},
        "epsilon_accountant": row["claim"],
        "accountant": "prv",
        "test_accuracy": 0.81,
        "epsilon_lb_best": None,
        "violation": False,
        "attacks": [],
        "whitebox_one_run": row,
    }
    return {"schema_version": 2, "config": {"attacks": {"confidence": 0.95}}, "targets": [target], "synthetic": []}


def test_a_testable_row_joins_the_holm_family_and_decides():
    held = verdict_for_results(_results(_row(0.6)))[0]["verdict"]
    assert held["status"] == "pass" and held["family_wise_error"]["n_tests"] == 1
    (row,) = [c for c in held["checks"] if c["name"].endswith("white-box one-run")]
    assert row["outcome"] == "pass" and row["p_value"] == 0.6
    refuted = verdict_for_results(_results(_row(0.001)))[0]
    assert refuted["verdict"]["status"] == "fail" and refuted["targets"][0]["violation"] is True
    assert any("accuracy" in c["name"] and c["outcome"] == "shown" for c in held["checks"])


def test_an_untestable_row_is_inconclusive_says_what_it_needs_and_costs_the_family_nothing():
    verdict = verdict_for_results(_results(_row(1.0, refutable=False)))[0]["verdict"]
    assert verdict["status"] == "inconclusive" and verdict["family_wise_error"]["n_tests"] == 0
    (row,) = [c for c in verdict["checks"] if c["name"].endswith("white-box one-run")]
    assert row["outcome"] == "inconclusive" and "50,000 canaries" in row["message"]


def test_a_dp_target_twin_with_canaries_gives_a_row_with_its_claim_status():
    data = make_default_tabular(600, 0)
    X, y = data.features.astype(np.float32), data.labels.astype(np.int64)
    spec = TrainingSpec(hidden_sizes=[64], epochs=2, batch_size=64, lr=0.1, momentum=0.0, max_grad_norm=1.0)
    target = train_target(
        X[:480], y[:480], 2, spec, epsilon=8.0, delta=1e-5, accountant="prv", seed=3, device=torch.device("cpu")
    )
    assert target.canaries is None
    accuracy = float((target.logits(X[480:]).argmax(1) == y[480:]).mean())
    row = whitebox_one_run_entry(
        X[:480],
        y[:480],
        2,
        spec,
        target=target,
        target_accuracy=accuracy,
        test_features=X[480:],
        test_labels=y[480:],
        accountant="prv",
        seed=3,
        device=torch.device("cpu"),
        confidence=0.95,
        n_canaries=200,
    )
    assert row["twin_matches_target"] and row["m"] == 200 and row["claim"] == pytest.approx(target.accountant_epsilon)
    assert row["status"] in ("held", "untestable") and 0 <= row["p_value"] <= 1
    assert row["canary_rows_inserted"] > 0 and math.isfinite(row["gaussian_sum_epsilon"])
    assert 0 <= row["test_accuracy_with_canaries"] <= 1
