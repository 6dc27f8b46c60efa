"""The README's main job, run as a user runs it: `privacy-audit run --preset smoke` in a fresh process."""
import json
import math
from pathlib import Path

import pandas as pd
import pytest

RESULT_KEYS = {"schema_version", "config", "environment", "targets", "synthetic", "verdict"}
TARGET_KEYS = {"epsilon_target", "delta", "noise_multiplier", "sample_rate", "steps", "max_grad_norm", "epsilon",
               "test_accuracy", "attacks", "epsilon_lb_best", "violation"}
ATTACK_KEYS = {"name", "auc", "auc_ci", "tpr_at_fpr", "advantage", "epsilon_lb", "n_members", "n_nonmembers"}


def _run_dirs(root: Path) -> list[Path]:
    return sorted(p for p in (root / "runs").iterdir() if p.is_dir()) if (root / "runs").exists() else []


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    from tests.conftest import run_cli

    root = tmp_path_factory.mktemp("smoke")
    proc = run_cli("run", "--preset", "smoke", "--tracking-uri", f"sqlite:///{root}/mlflow.db", cwd=root)
    return root, proc


def test_smoke_run_exits_zero_and_prints_the_table(smoke_run):
    root, proc = smoke_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ε target" in proc.stdout and "loss" in proc.stdout and "results:" in proc.stdout


def test_smoke_run_writes_every_promised_file(smoke_run):
    root, _ = smoke_run
    (run_dir,) = _run_dirs(root)
    assert run_dir.name.endswith("-smoke")
    for name in ("results.json", "results.csv", "config.yaml", "splits.npz", "figures/roc_all.png",
                 "figures/empirical_vs_accountant.png"):
        assert (run_dir / name).is_file(), name
    assert not [p for p in (root / "runs").iterdir() if p.name.startswith(".")]  # no staging left


def test_results_json_follows_schema_version_1(smoke_run):
    root, _ = smoke_run
    (run_dir,) = _run_dirs(root)
    results = json.loads((run_dir / "results.json").read_text())
    assert RESULT_KEYS <= results.keys() and results["schema_version"] == 1
    assert [t["epsilon_target"] for t in results["targets"]] == [1.0, 8.0, None]
    for target in results["targets"]:
        assert TARGET_KEYS <= target.keys()
        for attack in target["attacks"]:
            assert ATTACK_KEYS <= attack.keys()
            assert set(attack["tpr_at_fpr"]) == {"0.001", "0.01", "0.1"}
        if target["epsilon_target"] is None:
            assert target["epsilon"] == {} and target["noise_multiplier"] is None
        else:
            eps = target["epsilon"]
            assert eps["prv"] <= target["epsilon_target"] + 1e-6
            assert eps["pld"] <= eps["prv"] + 0.05  # the tight reference is never above PRV beyond tolerance
    assert results["verdict"]["passed"] is True  # correct Opacus targets: no violation
    csv = pd.read_csv(run_dir / "results.csv")
    assert len(csv) == 3 and math.isinf(csv["epsilon_target"].iloc[-1])


def test_mlflow_store_holds_a_parent_and_one_child_per_epsilon(smoke_run):
    import mlflow

    root, _ = smoke_run
    (run_dir,) = _run_dirs(root)
    results = json.loads((run_dir / "results.json").read_text())
    mlflow.set_tracking_uri(f"sqlite:///{root}/mlflow.db")
    runs = mlflow.search_runs(experiment_names=["smoke"])
    assert len(runs) == 4 and set(runs["status"]) == {"FINISHED"}
    parent_id = results["mlflow"]["parent_run_id"]
    children = runs[runs["tags.mlflow.parentRunId"] == parent_id]
    assert len(children) == 3
    for column in ("metrics.eps_prv", "metrics.eps_pld", "metrics.test_accuracy", "metrics.loss_auc",
                   "metrics.loss_tpr_at_fpr_0.001", "metrics.loss_eps_lb_cp", "metrics.loss_eps_lb_one_run",
                   "metrics.eps_lb_best", "params.noise_multiplier", "params.sample_rate", "params.steps"):
        assert column in children.columns, column
    private = children[children["params.epsilon_target"] != "inf"]
    assert private["metrics.eps_prv"].notna().all()
    parent = runs[runs["run_id"] == parent_id].iloc[0]
    assert parent["tags.preset"] == "smoke" and len(parent["tags.config_hash"]) == 12
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(parent_id)}
    assert {"results.json", "empirical_vs_accountant.png"} <= artifacts


def test_the_same_seed_gives_identical_numbers_on_cpu(smoke_run, tmp_path):
    from tests.conftest import run_cli

    root, _ = smoke_run
    proc = run_cli("run", "--preset", "smoke", "--device", "cpu", "--tracking-uri", f"sqlite:///{tmp_path}/m.db",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (first,) = _run_dirs(root)
    (second,) = _run_dirs(tmp_path)

    def numbers(path):
        results = json.loads((path / "results.json").read_text())
        for target in results["targets"]:
            target.pop("train_seconds")
            target.pop("mlflow_run_id")
        return results["targets"]

    assert numbers(first) == numbers(second)
