"""`canary-audit` and `mechanism-audit` from the command line: JSON, MLflow, exit codes."""
import json

import mlflow


def _only_json(root, kind):
    (path,) = root.glob(f"runs/*-{kind}/{kind}.json")
    return json.loads(path.read_text())


def test_a_trainer_without_clipping_is_caught_from_the_cli(cli, tmp_path):
    proc = cli("canary-audit", "--trainer", "audit.demos.dp_trainers:broken_no_clipping", "--models", "30",
               "--tracking-uri", f"sqlite:///{tmp_path}/m.db")
    assert proc.returncode == 1, proc.stderr
    assert "VIOLATION" in proc.stderr
    result = _only_json(tmp_path, "canary-audit")
    assert result["violation"] is True and result["epsilon_lower_bound"] > result["claimed_epsilon"]
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/m.db")
    runs = mlflow.search_runs(experiment_names=["canary-audit"])
    assert list(runs["status"]) == ["FINISHED"] and runs["metrics.violation"].iloc[0] == 1.0


def test_a_correct_laplace_mechanism_passes_and_a_quarter_noise_one_fails(cli, tmp_path):
    db = f"sqlite:///{tmp_path}/m.db"
    ok = cli("mechanism-audit", "--mechanism", "audit.demos.mechanisms:laplace_count", "--tracking-uri", db)
    assert ok.returncode == 0, ok.stderr
    bad = cli("mechanism-audit", "--mechanism", "audit.demos.mechanisms:laplace_count_wrong_scale", "--tracking-uri", db)
    assert bad.returncode == 1 and "VIOLATION" in bad.stderr


def test_unimportable_specs_exit_2_without_writing_anything(cli, tmp_path):
    for args in (("canary-audit", "--trainer", "nope:train"), ("mechanism-audit", "--mechanism", "no colon"),
                 ("canary-audit", "--trainer", "audit.demos.dp_trainers:correct_dpsgd", "--models", "0")):
        proc = cli(*args)
        assert proc.returncode == 2 and proc.stderr.startswith("error:") and "Traceback" not in proc.stderr
    assert not (tmp_path / "runs").exists()
