"""`canary-audit` and `mechanism-audit` from the command line: JSON, MLflow, exit codes."""

import json

import mlflow
import pytest


@pytest.fixture
def cli(cli_in_process):
    """Commands run in this process (tests/conftest.py `run_cli_in_process`): these tests read what a
    command prints, writes and exits with; a fresh interpreter per call cost ~4-5 s of CPU in imports."""
    return cli_in_process


def _only_json(root, kind):
    (path,) = root.glob(f"runs/*-{kind}/{kind}.json")
    return json.loads(path.read_text())


@pytest.mark.slow  # trains 38 models (8 pilots + 30 runs × 32 column canaries) in a fresh process
def test_a_trainer_without_clipping_is_caught_from_the_cli(cli, tmp_path):
    proc = cli(
        "canary-audit",
        "--trainer",
        "audit.demos.dp_trainers:broken_no_clipping",
        "--models",
        "30",
        "--mode",
        "multi-canary",
        "--tracking-uri",
        f"sqlite:///{tmp_path}/m.db",
    )
    assert proc.returncode == 1, proc.stderr
    assert "FAIL" in proc.stderr
    result = _only_json(tmp_path, "canary-audit")
    assert result["violation"] is True and result["epsilon_lower_bound"] > result["claimed_epsilon"]
    (report,) = tmp_path.glob("runs/*-canary-audit/report.html")
    assert "FAIL" in report.read_text() and "Clopper-Pearson" in report.read_text()
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/m.db")
    runs = mlflow.search_runs(experiment_names=["privacy-audit/canary-audit"])
    assert list(runs["status"]) == ["FINISHED"] and runs["metrics.violation"].iloc[0] == 1.0


def test_a_correct_laplace_mechanism_passes_and_a_quarter_noise_one_fails(cli, tmp_path):
    db = f"sqlite:///{tmp_path}/m.db"
    ok = cli("mechanism-audit", "--mechanism", "audit.demos.mechanisms:laplace_count", "--tracking-uri", db)
    assert ok.returncode == 0, ok.stderr
    bad = cli(
        "mechanism-audit", "--mechanism", "audit.demos.mechanisms:laplace_count_wrong_scale", "--tracking-uri", db
    )
    assert bad.returncode == 1 and "FAIL" in bad.stderr


def test_unimportable_specs_exit_2_without_writing_anything(cli, tmp_path):
    for args in (
        ("canary-audit", "--trainer", "nope:train"),
        ("mechanism-audit", "--mechanism", "no colon"),
        ("canary-audit", "--trainer", "audit.demos.dp_trainers:correct_dpsgd", "--models", "0"),
    ):
        proc = cli(*args)
        assert proc.returncode == 2 and proc.stderr.startswith("error:") and "Traceback" not in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_audit_model_audits_a_saved_state_dict_end_to_end(cli, tmp_path):
    import pandas as pd
    import torch

    from targets.datasets import make_default_tabular
    from targets.models import build_mlp

    data = make_default_tabular(600, seed=1)
    columns = [f"f{i}" for i in range(data.features.shape[1])]
    frame = pd.DataFrame(data.features, columns=columns).assign(y=data.labels)
    frame.iloc[:300].to_csv(tmp_path / "members.csv", index=False)
    frame.iloc[300:].to_csv(tmp_path / "nonmembers.csv", index=False)
    model = build_mlp(len(columns), [32], 2, seed=0)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = torch.as_tensor(data.features[:300]), torch.as_tensor(data.labels[:300])
    for _ in range(200):  # memorise the members
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    torch.save(model.state_dict(), tmp_path / "model.pt")
    (tmp_path / "model.yaml").write_text("training:\n  hidden_sizes: [32]\n")
    proc = cli(
        "audit-model",
        "--config",
        "model.yaml",
        "--weights",
        "model.pt",
        "--members",
        "members.csv",
        "--nonmembers",
        "nonmembers.csv",
        "--label",
        "y",
        "--claimed-epsilon",
        "1",
        "--tracking-uri",
        f"sqlite:///{tmp_path}/m.db",
    )
    # A memorising model is not 1-DP, but members / non-members from files are not coin flips: no
    # bound is proven for this setting (Clopper-Pearson is shown, assuming independent trials), so
    # the honest verdict is inconclusive (exit 0), with the large Clopper-Pearson number on record.
    assert proc.returncode == 0, proc.stderr
    assert "INCONCLUSIVE" in proc.stdout and "coin flip" in proc.stdout
    (results_path,) = tmp_path.glob("runs/*/results.json")
    results = json.loads(results_path.read_text())
    target = results["targets"][0]
    assert target["attacks"][0]["name"] == "loss" and target["attacks"][0]["auc"] > 0.6
    assert target["attacks"][0]["epsilon_lb"]["clopper_pearson"] > 1.0
    assert target["violation"] is False and results["verdict"]["status"] == "inconclusive"
    strict = tmp_path / "strict.yaml"
    strict.write_text("rules: {max_auc: 0.99, fail_on_inconclusive: true}\n")
    gated = cli("gate", "--policy", str(strict), str(results_path))
    assert gated.returncode == 1 and "inconclusive" in gated.stderr


def test_synth_check_flags_a_copy_and_passes_an_independent_sample(cli, tmp_path):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)

    def table(n):
        return pd.DataFrame(
            {
                "age": rng.normal(40, 10, n).round(),
                "income": rng.lognormal(10, 0.5, n),
                "city": rng.choice(list("abcd"), n),
            }
        )

    train, holdout, independent = table(800), table(800), table(800)
    train.to_csv(tmp_path / "train.csv", index=False)
    holdout.to_csv(tmp_path / "holdout.csv", index=False)
    independent.to_parquet(tmp_path / "independent.parquet")
    train.assign(income=train["income"] * 1.0001).to_csv(tmp_path / "copy.csv", index=False)
    policy = "examples/policy-strict.yaml"
    from tests.conftest import REPO

    base = [
        "synth-check",
        "--train",
        "train.csv",
        "--holdout",
        "holdout.csv",
        "--policy",
        str(REPO / policy),
        "--tracking-uri",
        f"sqlite:///{tmp_path}/m.db",
        "--synthetic",
    ]
    copied = cli(*base, "copy.csv")
    assert copied.returncode == 1 and "FLAG" in copied.stderr and "FAIL" in copied.stderr
    fresh = cli(*base, "independent.parquet")
    assert fresh.returncode == 0, fresh.stderr
    results = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("runs/*-synth-check*/results.json"))]
    by_file = {r["config"]["synthetic"]: r["synthetic"][0] for r in results}
    copy, indep = by_file["copy.csv"], by_file["independent.parquet"]
    assert copy["dcr"]["dcr_share"] > 0.95 and copy["nndr"]["p10"] < 0.01 and copy["mia"]["auc"] > 0.9
    lo, hi = indep["dcr"]["dcr_share_ci"]
    assert lo < 0.5 < hi and abs(indep["mia"]["auc"] - 0.5) < 0.06


def test_an_audit_that_cannot_refute_the_claim_is_inconclusive_everywhere(cli, tmp_path):
    db = f"sqlite:///{tmp_path}/m.db"
    proc = cli(
        "canary-audit",
        "--trainer",
        "audit.demos.planted_bugs:correct_eps_8",
        "--mode",
        "multi",
        "--models",
        "10",
        "--fail-on-inconclusive",
        "--tracking-uri",
        db,
    )
    assert proc.returncode == 1 and "INCONCLUSIVE" in proc.stderr and "needs ≥" in proc.stderr
    assert "ceiling" in proc.stdout
    result = _only_json(tmp_path, "canary-audit")
    assert result["verdict"]["status"] == "inconclusive" and result["ceiling"] < result["claimed_epsilon"]
    (report,) = tmp_path.glob("runs/*-canary-audit/report.html")
    assert "INCONCLUSIVE" in report.read_text()
    mlflow.set_tracking_uri(db)
    runs = mlflow.search_runs(experiment_names=["privacy-audit/canary-audit"])
    assert runs["tags.verdict"].iloc[0] == "inconclusive" and runs["metrics.inconclusive"].iloc[0] == 1.0
