"""`audit.model_audits.model_audit.audit_user_model`: audit a user's own trained model from its weights file."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from audit.errors import AuditInputError
from audit.machinery.config import AuditConfig
from audit.machinery.policy import validate_results
from audit.model_audits.model_audit import audit_user_model
from targets.datasets import make_default_tabular
from targets.models import MLP

HIDDEN = [32]
N_MEMBERS = N_NONMEMBERS = 300


def _config(**overrides) -> AuditConfig:
    raw = {
        "training": {"hidden_sizes": HIDDEN, "epochs": 20},
        "privacy": {"epsilons": ["inf"]},
        "attacks": {
            "names": ["loss", "lira", "lira_offline", "rmia", "shadow"],
            "n_reference_models": 8,
            "n_shadow_models": 2,
            "rmia_population": 200,
        },
    }
    for key, value in overrides.items():
        raw[key] = {**raw.get(key, {}), **value}
    return AuditConfig.model_validate(raw)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """Members / non-members / population CSVs and a memorising non-private MLP trained on the members."""
    root = tmp_path_factory.mktemp("model_audit")
    data = make_default_tabular(1500, seed=3)
    columns = [f"f{i}" for i in range(data.features.shape[1])]
    order = np.random.default_rng(0).permutation(data.n_rows)
    parts = {
        "members": order[:N_MEMBERS],
        "nonmembers": order[N_MEMBERS : N_MEMBERS + N_NONMEMBERS],
        "population": order[N_MEMBERS + N_NONMEMBERS :],
    }
    paths = {}
    for name, rows in parts.items():
        frame = pd.DataFrame(data.features[rows], columns=columns)
        frame["y"] = data.labels[rows]
        paths[name] = root / f"{name}.csv"
        frame.to_csv(paths[name], index=False)

    previous = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny model on a shared CPU: one thread is many times faster
    try:
        torch.manual_seed(0)
        model = MLP(len(columns), HIDDEN, 2)
        members = pd.read_csv(paths["members"])
        x = torch.tensor(members[columns].to_numpy(np.float32))
        y = torch.tensor(members["y"].to_numpy())
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(300):  # full batch, long enough to memorise the flipped labels
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    finally:
        torch.set_num_threads(previous)
    paths["weights"] = root / "model.pt"
    torch.save(model.state_dict(), paths["weights"])
    paths["root"] = root
    paths["_model"] = model  # type: ignore[assignment]
    return paths


def _audit(files, config=None, **kwargs):
    arguments = dict(
        weights=files["weights"], members=files["members"], nonmembers=files["nonmembers"], label="y", device="cpu"
    )
    arguments.update(kwargs)
    return audit_user_model(config or _config(), **arguments)


@pytest.fixture(scope="module")
def full_results(files):
    scores = files["root"] / "scores.csv"
    return _audit(files, population=files["population"], scores_path=scores), scores


@pytest.mark.slow  # shares a fixture that trains shadow and reference models
def test_a_memorising_model_leaks_to_the_loss_attack_and_lira_runs_with_a_population(files, full_results):
    results, _ = full_results
    (target,) = results["targets"]
    attacks = {a["name"]: a for a in target["attacks"]}
    assert results["attacks_run"] == ["loss", "lira", "lira_offline", "rmia", "shadow"] == list(attacks)
    assert attacks["loss"]["auc"] > 0.55
    for name in ("lira", "lira_offline", "rmia"):  # reference models were trained on the candidates
        assert 0.5 < attacks[name]["auc"] <= 1.0
    assert all(a["n_members"] == N_MEMBERS and a["n_nonmembers"] == N_NONMEMBERS for a in attacks.values())
    assert target["epsilon_target"] is None and target["epsilon"] == {} and target["violation"] is False
    assert results["data"]["n_train"] == N_MEMBERS and results["data"]["n_pool"] == 900


@pytest.mark.slow  # shares a fixture that trains shadow and reference models
def test_results_validate_and_the_one_run_bound_is_not_claimed(files, full_results):
    results, scores_path = full_results
    validate_results(results)
    assert set(results) == {
        "schema_version",
        "config",
        "environment",
        "data",
        "attacks_run",
        "targets",
        "synthetic",
        "notes",
        "verdict",
    }
    for attack in results["targets"][0]["attacks"]:
        assert attack["epsilon_lb"]["one_run"] is None
        assert attack["epsilon_lb"]["clopper_pearson"] >= 0
    notes = " ".join(results["notes"])
    assert "one-run" in notes and "non-members file" in notes and "no standardisation" in notes
    # test accuracy = accuracy on the non-members; the scores file holds every candidate
    nonmembers = pd.read_csv(files["nonmembers"])
    with torch.no_grad():
        logits = files["_model"](torch.tensor(nonmembers.drop(columns="y").to_numpy(np.float32)))
    expected = float((logits.argmax(1).numpy() == nonmembers["y"].to_numpy()).mean())
    assert results["targets"][0]["test_accuracy"] == pytest.approx(expected)
    scores = pd.read_csv(scores_path)
    assert len(scores) == N_MEMBERS + N_NONMEMBERS and scores["member"].sum() == N_MEMBERS
    assert {"loss", "lira", "rmia", "shadow"} <= set(scores.columns)


def test_without_a_population_only_the_loss_attack_runs(files):
    results = _audit(files)
    assert results["attacks_run"] == ["loss"]
    assert any("need population data" in note for note in results["notes"])
    validate_results(results)
    with pytest.raises(AuditInputError) as info:
        _audit(files, attack_names=["lira"])
    assert info.value.where == "--population"


def test_a_non_private_model_claimed_private_is_inconclusive_without_coin_flip_membership(files):
    # Members / non-members from files are not coin flips: the one-run bound does not apply and
    # Clopper-Pearson over one model's candidates assumes independent trials, so it is shown
    # (here far above the claim) but cannot decide: the honest verdict is "inconclusive".
    results = _audit(files, config=_config(privacy={"epsilons": [0.5]}), attack_names=["loss"])
    (target,) = results["targets"]
    validate_results(results)
    assert target["epsilon_target"] == 0.5 and target["noise_multiplier"] > 0
    assert set(target["epsilon"]) >= {"prv", "rdp", "pld"} and target["epsilon"]["prv"] <= 0.5 + 1e-9
    assert target["sample_rate"] == pytest.approx(1 / math.ceil(N_MEMBERS / 64))
    assert target["steps"] == 20 * math.ceil(N_MEMBERS / 64)
    assert target["attacks"][0]["epsilon_lb"]["clopper_pearson"] > 0.5
    assert target["attacks"][0]["epsilon_lb_scope"]["clopper_pearson"]["decides"] is False
    assert target["epsilon_lb_best"] is None and target["violation"] is False
    assert results["verdict"]["status"] == "inconclusive" and "coin flip" in results["verdict"]["reasons"][0]


def test_a_pickled_model_object_is_refused_without_running_code(files, tmp_path):
    whole = tmp_path / "whole_model.pt"
    torch.save(files["_model"], whole)
    with pytest.raises(AuditInputError) as info:
        _audit(files, weights=whole)
    assert str(whole) in info.value.where
    assert "weights_only" in info.value.message and "state_dict" in info.value.message

    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    evil = tmp_path / "evil.pt"
    torch.save({"0.weight": Payload()}, evil)
    with pytest.raises(AuditInputError):
        _audit(files, weights=evil)
    assert not marker.exists()

    not_a_dict = tmp_path / "tensor.pt"
    torch.save(torch.zeros(3), not_a_dict)
    with pytest.raises(AuditInputError, match="not a state dict"):
        _audit(files, weights=not_a_dict)


def test_hidden_sizes_that_do_not_match_the_file_name_the_layer(files):
    with pytest.raises(AuditInputError) as info:
        _audit(files, config=_config(training={"hidden_sizes": [64, 64]}))
    message = info.value.message
    assert str(files["weights"]) in info.value.where
    assert "expected hidden_sizes [64, 64]" in message and "tensor '0.weight' has shape (32, 28) in the file" in message
    assert "hidden_sizes [32]" in message  # what the file looks like


def test_files_with_other_columns_name_the_file_and_the_column(files, tmp_path):
    nonmembers = pd.read_csv(files["nonmembers"])
    missing = tmp_path / "missing.csv"
    nonmembers.drop(columns="f3").to_csv(missing, index=False)
    with pytest.raises(AuditInputError) as info:
        _audit(files, nonmembers=missing)
    assert str(missing) in info.value.where and "'f3'" in info.value.where

    extra = tmp_path / "extra.parquet"
    nonmembers.assign(age=1.0).to_parquet(extra)
    with pytest.raises(AuditInputError) as info:
        _audit(files, nonmembers=extra)
    assert str(extra) in info.value.where and "'age'" in info.value.where

    with_nan = tmp_path / "nan.csv"
    nonmembers.assign(f5=np.where(np.arange(len(nonmembers)) == 7, np.nan, nonmembers["f5"])).to_csv(
        with_nan, index=False
    )
    with pytest.raises(AuditInputError, match="NaN") as info:
        _audit(files, nonmembers=with_nan)
    assert str(with_nan) in info.value.where and "'f5'" in info.value.where

    fractional = tmp_path / "fractional.csv"
    nonmembers.assign(y=nonmembers["y"] + 0.5).to_csv(fractional, index=False)
    with pytest.raises(AuditInputError, match="integer class") as info:
        _audit(files, nonmembers=fractional)
    assert "label column 'y'" in info.value.where


def test_several_epsilons_in_the_config_are_refused(files):
    with pytest.raises(AuditInputError) as info:
        _audit(files, config=_config(privacy={"epsilons": [1.0, 8.0]}))
    assert info.value.where == "privacy.epsilons"


def test_safetensors_and_wrapped_state_dicts_give_the_same_audit(files, tmp_path):
    from safetensors.torch import save_file

    reference = _audit(files)
    state = files["_model"].state_dict()
    safetensors_path = tmp_path / "model.safetensors"
    save_file({k: v.contiguous() for k, v in state.items()}, str(safetensors_path))
    opacus_wrapped = tmp_path / "opacus.pt"  # what a GradSampleModule's state_dict looks like
    torch.save({"epoch": 3, "state_dict": {f"_module.{k}": v for k, v in state.items()}}, opacus_wrapped)
    for path in (safetensors_path, opacus_wrapped):
        results = _audit(files, weights=path)
        assert results["targets"][0]["attacks"][0]["auc"] == reference["targets"][0]["attacks"][0]["auc"]
        assert results["data"]["weights"]["path"] == str(path)
    assert "safetensors" in _audit(files, weights=safetensors_path)["data"]["weights"]["format"]
