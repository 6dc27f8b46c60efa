"""`audit-model` audits the user's own model whatever it is: a PyTorch module from a factory and a
state_dict (a CNN on digits images), a scikit-learn estimator via skops, an ONNX file, a black-box
prediction function and a label-only one. Each audit publishes results.json, a report, an MLflow run
and a verdict. Unsafe files are refused without running anything in them."""

from __future__ import annotations

import json
import pickle
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from audit.cli.output import publish_results
from audit.errors import AuditInputError
from audit.machinery.config import AuditConfig
from audit.machinery.tracking import target_metrics
from audit.model_audits.model_audit import audit_user_model
from targets.datasets import make_default_tabular
from targets.models import MLP
from tests.mlflow_store import fresh_store

N = 150  # members = non-members = N rows: small, so the tests stay fast on a shared 2-core machine

USER_MODULE = textwrap.dedent('''
    """The user's code, as a compliance team would have it beside their data."""
    import numpy as np
    import pandas as pd
    import torch
    from torch import nn
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier


    def cnn():
        return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 64, 10))


    def wrong_cnn():
        return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 64, 10))


    def train_gbm(features, labels, seed):
        return GradientBoostingClassifier(n_estimators=30, max_depth=3, random_state=seed).fit(features, labels)


    _members = pd.read_csv("members.csv")
    _forest = RandomForestClassifier(n_estimators=30, random_state=0).fit(_members.drop(columns="y"), _members["y"])


    def api_probabilities(features):
        """A model behind an API that returns class probabilities."""
        return _forest.predict_proba(features)


    def api_labels(features):
        """A model behind an API that returns only the predicted class."""
        return _forest.predict(features)
''')


def _config(**sections) -> AuditConfig:
    raw = {
        "name": "any-model",
        "privacy": {"epsilons": ["inf"]},
        "attacks": {"n_reference_models": 4, "rmia_population": 100, "label_only_queries": 8},
    }
    for key, value in sections.items():
        raw[key] = {**raw.get(key, {}), **value}
    return AuditConfig.model_validate(raw)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """The user's folder: tabular CSVs, digits images as .npz, their module of model code."""
    root = tmp_path_factory.mktemp("any_model")
    data = make_default_tabular(4 * N, seed=5)
    columns = [f"f{i}" for i in range(data.features.shape[1])]
    for name, rows in {
        "members": slice(0, N),
        "nonmembers": slice(N, 2 * N),
        "population": slice(2 * N, 4 * N),
    }.items():
        frame = pd.DataFrame(data.features[rows], columns=columns)
        frame["y"] = data.labels[rows]
        frame.to_csv(root / f"{name}.csv", index=False)

    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]  # N × C × H × W
    for name, rows in {
        "digits_members": slice(0, N),
        "digits_nonmembers": slice(N, 2 * N),
        "digits_population": slice(2 * N, 4 * N),
    }.items():
        np.savez(root / f"{name}.npz", features=images[rows], labels=digits.target[rows])
    (root / "usermodels.py").write_text(USER_MODULE)
    return root


def _publish(workdir: Path, config: AuditConfig, name: str, **kwargs) -> tuple[dict, Path]:
    return publish_results(
        lambda staging: audit_user_model(
            config, device="cpu", workers=2, scores_path=staging / "scores" / "scores.csv", **kwargs
        ),
        out=workdir / "runs",
        folder_name=name,
        experiment="any-model",
        tracking_uri=fresh_store(workdir, "mlflow.db"),
        run_name=f"audit-model {name}",
        tags={"model": name},
        metrics_of=lambda r: target_metrics(r["targets"][0]),
        policy=None,
    )


def _assert_published(results: dict, folder: Path) -> None:
    """results.json, report, scores on disk; an MLflow run holding the metrics; a verdict."""
    import mlflow

    from audit.machinery.policy import validate_results

    validate_results(json.loads((folder / "results.json").read_text()))  # the results.json schema
    assert (folder / "report.html").stat().st_size > 0 and (folder / "scores" / "scores.csv").is_file()
    run = mlflow.tracking.MlflowClient(results["mlflow"]["tracking_uri"]).get_run(results["mlflow"]["parent_run_id"])
    assert run.data.metrics["test_accuracy"] == pytest.approx(results["targets"][0]["test_accuracy"])
    assert results["verdict"]["passed"] in (True, False) and "reasons" in results["verdict"]


@pytest.fixture(scope="module")
def memorising_cnn(workdir) -> torch.nn.Module:
    """The user's CNN fitted to the 150 member images (weights saved as cnn.pt)."""
    module = _memorising_cnn(workdir)
    torch.save(module.state_dict(), workdir / "cnn.pt")
    return module


def _memorising_cnn(workdir: Path) -> torch.nn.Module:
    import contextlib
    import importlib
    import sys

    sys.path.insert(0, str(workdir))
    try:
        with contextlib.chdir(workdir):  # the module reads members.csv when imported
            module = importlib.import_module("usermodels").cnn()
    finally:
        sys.path.remove(str(workdir))
        sys.modules.pop("usermodels", None)
    with np.load(workdir / "digits_members.npz") as archive:
        x, y = torch.tensor(archive["features"]), torch.tensor(archive["labels"])
    torch.manual_seed(0)
    optimizer = torch.optim.Adam(module.parameters(), lr=0.01)
    previous = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model on a shared CPU: one thread is many times faster
    try:
        for _ in range(60):  # full batch until it fits its training images
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(module(x), y).backward()
            optimizer.step()
    finally:
        torch.set_num_threads(previous)
    return module.eval()


@pytest.mark.slow
def test_a_cnn_from_factory_and_state_dict_on_digits_images(workdir, memorising_cnn, monkeypatch):
    monkeypatch.chdir(workdir)
    cnn = memorising_cnn
    results, folder = _publish(
        workdir,
        _config(training={"epochs": 10, "lr": 0.05}),
        "cnn",
        weights=workdir / "cnn.pt",
        factory="usermodels:cnn",
        members=workdir / "digits_members.npz",
        nonmembers=workdir / "digits_nonmembers.npz",
        population=workdir / "digits_population.npz",
        attack_names=["loss", "lira_offline"],
    )
    _assert_published(results, folder)
    # Without a trainer, the factory's architecture is trained by the vectorized DP-SGD trainer.
    assert any("vectorized DP-SGD trainer" in note for note in results["notes"])
    assert results["attacks_run"] == ["loss", "lira_offline"]
    assert results["data"]["feature_shape"] == [1, 8, 8] and results["data"]["model"]["factory"] == "usermodels:cnn"
    # The factory ran in a worker process; its logits are the live module's.
    with np.load(workdir / "digits_nonmembers.npz") as archive:
        x, y = archive["features"], archive["labels"]
    expected = (cnn(torch.tensor(x)).argmax(1).numpy() == y).mean()
    assert results["targets"][0]["test_accuracy"] == pytest.approx(expected)
    # A CNN fitted to its 150 training images is more confident on them than on unseen ones.
    assert results["targets"][0]["attacks"][0]["auc"] > 0.6


def test_weights_that_do_not_fit_the_factory_name_the_tensor(workdir, memorising_cnn, monkeypatch):
    monkeypatch.chdir(workdir)
    with pytest.raises(AuditInputError) as info:
        audit_user_model(
            _config(),
            weights=workdir / "cnn.pt",
            factory="usermodels:wrong_cnn",
            members=workdir / "digits_members.npz",
            nonmembers=workdir / "digits_nonmembers.npz",
        )
    assert "tensor '0.weight' has shape (8, 1, 3, 3) in the file but the model's is (4, 1, 3, 3)" in info.value.message


@pytest.mark.slow
def test_a_gradient_boosting_model_via_skops_with_the_users_trainer(workdir, monkeypatch):
    import skops.io as sio
    from sklearn.ensemble import GradientBoostingClassifier

    monkeypatch.chdir(workdir)
    members = pd.read_csv(workdir / "members.csv")
    gbm = GradientBoostingClassifier(n_estimators=30, max_depth=3, random_state=0)
    sio.dump(gbm.fit(members.drop(columns="y"), members["y"]), workdir / "gbm.skops")
    results, folder = _publish(
        workdir,
        _config(),
        "gbm",
        skops=workdir / "gbm.skops",
        trainer="usermodels:train_gbm",
        members=workdir / "members.csv",
        nonmembers=workdir / "nonmembers.csv",
        population=workdir / "population.csv",
        label="y",
        attack_names=["loss", "lira_offline", "rmia"],
    )
    _assert_published(results, folder)
    assert results["attacks_run"] == ["loss", "lira_offline", "rmia"]
    assert results["data"]["model"]["estimator"] == "GradientBoostingClassifier"
    assert any("usermodels:train_gbm" in note for note in results["notes"])
    assert results["targets"][0]["epsilon"] == {}  # no DP-SGD description applies to a GBM


def test_an_onnx_export_scores_like_the_torch_model(workdir, monkeypatch, tmp_path):
    monkeypatch.chdir(workdir)
    members = pd.read_csv(workdir / "members.csv")
    torch.manual_seed(0)
    mlp = MLP(members.shape[1] - 1, [16], 2).eval()
    torch.save(mlp.state_dict(), tmp_path / "mlp.pt")
    torch.onnx.export(
        mlp,
        (torch.zeros(1, members.shape[1] - 1),),
        str(tmp_path / "mlp.onnx"),
        dynamo=False,
        input_names=["x"],
        output_names=["logits"],
        dynamic_axes={"x": {0: "n"}},
    )
    config = _config(training={"hidden_sizes": [16]})
    common = dict(
        members=workdir / "members.csv", nonmembers=workdir / "nonmembers.csv", label="y", attack_names=["loss"]
    )
    from_torch = audit_user_model(config, weights=tmp_path / "mlp.pt", scores_path=tmp_path / "torch.csv", **common)
    results, folder = _publish(workdir, config, "onnx", onnx=tmp_path / "mlp.onnx", **common)
    _assert_published(results, folder)
    torch_scores = pd.read_csv(tmp_path / "torch.csv")["loss"].to_numpy()
    onnx_scores = pd.read_csv(folder / "scores" / "scores.csv")["loss"].to_numpy()
    np.testing.assert_allclose(onnx_scores, torch_scores, atol=1e-5, rtol=1e-5)
    assert results["targets"][0]["test_accuracy"] == from_torch["targets"][0]["test_accuracy"]


def test_a_black_box_prediction_function(workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    results, folder = _publish(
        workdir,
        _config(),
        "api",
        function="usermodels:api_probabilities",
        members=workdir / "members.csv",
        nonmembers=workdir / "nonmembers.csv",
        label="y",
    )
    _assert_published(results, folder)
    assert results["attacks_run"] == ["loss"]  # no population, no trainer: the reference attacks are skipped
    assert any("skipped" in note for note in results["notes"])
    # A random forest reproduces its training labels: the loss attack sees it.
    assert results["targets"][0]["attacks"][0]["auc"] > 0.7


@pytest.mark.slow
def test_a_label_only_function_gets_the_label_only_attack_from_the_cli(workdir):
    # In-process (the conftest convention: the test reads what the command prints, writes and exits with);
    # the user's function still runs in its isolated worker.
    from tests.conftest import run_cli_in_process as run_cli

    done = run_cli(
        "audit-model",
        "--function",
        "usermodels:api_labels",
        "--output",
        "labels",
        "--claimed-epsilon",
        "inf",
        "--members",
        "members.csv",
        "--nonmembers",
        "nonmembers.csv",
        "--label",
        "y",
        "--allow-leak",
        "--out",
        "cli-runs",
        "--tracking-uri",
        fresh_store(workdir, "mlflow.db"),
        cwd=workdir,
    )
    assert done.returncode == 0, done.stderr
    (folder,) = (workdir / "cli-runs").iterdir()
    results = json.loads((folder / "results.json").read_text())
    _assert_published(results, folder)
    assert results["attacks_run"] == ["label_only"] and results["data"]["model"]["output"] == "labels"
    # no DP claim: a leakage statement, never a pass (exit 0: --allow-leak makes a leak report-only)
    assert (folder / "report.html").is_file() and results["verdict"]["status"] == "no_claim"
    assert results["verdict"]["passed"] is False and len(results["verdict"]["leakage"]) == 1
    # Training rows survive noise with their label more often than unseen rows.
    assert results["targets"][0]["attacks"][0]["auc"] > 0.55

    scores_only = run_cli(
        "audit-model",
        "--function",
        "usermodels:api_labels",
        "--output",
        "labels",
        "--claimed-epsilon",
        "inf",
        "--attacks",
        "loss",
        "--members",
        "members.csv",
        "--nonmembers",
        "nonmembers.csv",
        "--label",
        "y",
        "--out",
        "cli-runs-2",
        cwd=workdir,
    )
    assert scores_only.returncode == 2 and "label_only" in scores_only.stderr
    assert not (workdir / "cli-runs-2").exists() or not any((workdir / "cli-runs-2").iterdir())


class _Payload:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):  # what a malicious pickle does when loaded
        return (open, (self.marker, "w"))


def test_malicious_skops_and_pickle_files_are_refused_without_running_anything(workdir, tmp_path, monkeypatch):
    import skops.io as sio

    marker = tmp_path / "pwned"
    (tmp_path / "evilmod.py").write_text(
        textwrap.dedent(f"""
        class Evil:
            def __setstate__(self, state):
                open({str(marker)!r}, "w").write("ran")
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import evilmod

    sio.dump(evilmod.Evil(), tmp_path / "evil.skops")
    pickled = tmp_path / "model.skops"
    pickled.write_bytes(pickle.dumps(_Payload(str(marker))))
    common = dict(members=workdir / "members.csv", nonmembers=workdir / "nonmembers.csv", label="y")
    with pytest.raises(AuditInputError, match="evilmod.Evil") as info:
        audit_user_model(_config(), skops=tmp_path / "evil.skops", **common)
    assert "trusted" in info.value.message
    with pytest.raises(AuditInputError, match="pickle and joblib files are refused"):
        audit_user_model(_config(), skops=pickled, **common)
    assert not marker.exists()


def test_the_python_api_takes_live_objects_and_arrays(workdir):
    from sklearn.ensemble import RandomForestClassifier

    members, nonmembers = pd.read_csv(workdir / "members.csv"), pd.read_csv(workdir / "nonmembers.csv")
    pairs = [(frame.drop(columns="y").to_numpy(np.float32), frame["y"].to_numpy()) for frame in (members, nonmembers)]
    forest = RandomForestClassifier(n_estimators=30, random_state=0).fit(*pairs[0])
    torch.manual_seed(0)
    mlp = MLP(pairs[0][0].shape[1], [16], 2).eval()
    for model, output in ((forest, None), (forest.predict, "labels"), (mlp, None)):
        results = audit_user_model(_config(), model=model, output=output, members=pairs[0], nonmembers=pairs[1])
        expected = "label_only" if output == "labels" else "loss"
        assert results["attacks_run"] == [expected] and results["data"]["files"]["members"] == "<members file arrays>"
    # The last audit (the live module) reports the module's own accuracy on the non-members.
    assert results["targets"][0]["test_accuracy"] == pytest.approx(
        float((mlp(torch.tensor(pairs[1][0])).argmax(1).numpy() == pairs[1][1]).mean())
    )
