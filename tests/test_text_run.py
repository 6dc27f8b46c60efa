"""`run --preset text`, tiny: corpus, tokenizer, DP and non-DP causal LMs, attacks, exposure,
extraction, report, MLflow — end to end through the CLI in well under a minute of training."""

from __future__ import annotations

import json
import math
import shutil

import pytest
import yaml

TINY = {
    "text": {
        "n_candidates": 40,
        "n_pool": 30,
        "n_test": 10,
        "repetitions": [1, 8],
        "canaries_per_repetition": 1,
        "control_canaries": 2,
        "secret_digits": 3,
        "epochs": 2,
        "d_model": 16,
        "n_layers": 1,
        "n_heads": 2,
        "max_length": 48,
        "vocab_size": 200,
        "extraction_records": 10,
    },
    "privacy": {"epsilons": [8.0, "inf"]},
}


def _attack_numbers(results):
    return [[(a["name"], a["auc"], a["epsilon_lb"]["one_run"]) for a in t["attacks"]] for t in results["targets"]]


@pytest.fixture
def cli(cli_in_process):
    """The resumed, refused and processes-executor runs read what `run` prints, writes and exits with:
    in this process (a fresh interpreter re-pays ~4-5 s of CPU importing torch, MLflow, scikit-learn
    before the command starts). The module's own text run stays a fresh process, as a user runs it."""
    return cli_in_process


@pytest.fixture(scope="module")
def text_run(tmp_path_factory):
    """The tiny text run on the local executor, in a fresh process: read by the end-to-end test and
    compared with the processes executor's numbers (one run for both, not two)."""
    from tests.conftest import run_cli

    root = tmp_path_factory.mktemp("text")
    (root / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    done = run_cli(
        "run",
        "--preset",
        "text",
        "--config",
        "tiny.yaml",
        "--out",
        "runs",
        "--tracking-uri",
        f"sqlite:///{root / 'mlflow.db'}",
        "--quiet",
        cwd=root,
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]
    (folder,) = list((root / "runs").glob("*-text"))
    return root, done, folder, json.loads((folder / "results.json").read_text())


def test_the_text_preset_runs_end_to_end(text_run, cli, tmp_path):
    root, done, folder, results = text_run
    assert results["kind"] == "text" and [t["epsilon_target"] for t in results["targets"]] == [8.0, None]
    from audit.machinery.policy import validate_results

    validate_results(results)  # what `gate` and `report` read
    private, plain = results["targets"]
    assert abs(private["epsilon_accountant"] - 8.0) < 0.1 and private["noise_multiplier"] > 0
    assert private["privacy_unit"] == "person" and "per person" in private["epsilon_unit"]
    assert private["n_privacy_units"] == results["data"]["n_persons"] < results["data"]["n_train"]  # 8 copies, 1 person
    assert "Unit of privacy:** ε per person" in (folder / "summary.md").read_text()
    assert (
        "per person" in (folder / "report.html").read_text()
        and "Language-model targets per ε" in (folder / "report.html").read_text()
    )
    # --resume of the same run, interrupted after its first target: that target is reused (its
    # training time is the stored one), the second is trained again and gives the same numbers.
    staging = tmp_path / "again" / f".{folder.name}.partial"
    shutil.copytree(folder, staging)
    (staging / "results.json").unlink()
    shutil.rmtree(staging / "checkpoints" / "text_eps_inf")
    again = cli(
        "run",
        "--resume",
        str(staging),
        "--out",
        "again",
        "--tracking-uri",
        f"sqlite:///{root / 'mlflow.db'}",
        "--quiet",
    )
    assert again.returncode == done.returncode, again.stderr[-3000:]
    resumed = json.loads((tmp_path / "again" / folder.name / "results.json").read_text())
    assert resumed["targets"][0]["train_seconds"] == private["train_seconds"]
    assert _attack_numbers(resumed) == _attack_numbers(results)
    assert resumed["mlflow"]["resumed_from"] == [results["mlflow"]["parent_run_id"]]
    for target in results["targets"]:
        assert {a["name"] for a in target["attacks"]} == {
            "lm_loss",
            "zlib_ratio",
            "min_k",
            "min_k_plus_plus",
            "reference_ratio",
        }
        assert all(a["epsilon_lb"]["one_run"] is not None for a in target["attacks"])  # coin-flip documents
        rows = {r["repetitions"]: r for r in target["text"]["exposure"]}
        assert set(rows) == {0, 1, 8}
        assert all(0 <= r["exposure_mean"] <= math.log2(1000) + 1e-9 for r in rows.values())  # 3 digits
        assert len(target["text"]["canaries"]) == 4 and target["text"]["record_extraction"]["n_prompted"] == 10
    assert results["text"]["blind_baseline"]["p_value_above_chance"] > 0
    assert (done.returncode == 1) == (results["verdict"]["status"] == "fail")
    assert (folder / "figures" / "exposure_vs_repetitions.png").read_bytes()[:4] == b"\x89PNG"
    for name in ("report.html", "summary.md", "junit.xml", "results.csv", "tokenizer.json"):
        assert (folder / name).is_file(), name
    assert "exposure" in done.stdout and "Text targets" in done.stdout
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    parent = client.get_run(results["mlflow"]["parent_run_id"])
    assert parent.data.tags["kind"] == "text"
    child = client.get_run(results["mlflow"]["child_run_ids"][1])
    assert "exposure_rep8" in child.data.metrics


def test_a_bad_text_section_is_refused_with_the_field_named(cli, tmp_path):
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"text": {"d_model": 30, "n_heads": 4}}))
    done = cli("run", "--preset", "text", "--config", "bad.yaml", "--out", "runs")
    assert done.returncode == 2 and "text" in done.stderr and "n_heads" in done.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


@pytest.mark.slow
def test_the_text_preset_gives_the_same_numbers_on_the_processes_executor(text_run, cli, tmp_path):
    """The module's local run (tracked in MLflow) against the same config on two child processes
    (not tracked: where numbers are logged does not change them)."""
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    done = cli(
        "run",
        "--preset",
        "text",
        "--config",
        "tiny.yaml",
        "--out",
        "processes",
        "--no-tracking",
        "--quiet",
        "--executor",
        "processes",
        "--workers",
        "2",
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]
    (folder,) = list((tmp_path / "processes").glob("*-text"))
    local, processes = text_run[3], json.loads((folder / "results.json").read_text())
    assert [local["execution"]["executor"], processes["execution"]["executor"]] == ["local", "processes"]
    numbers = [(_attack_numbers(r), [t["text"]["exposure"] for t in r["targets"]]) for r in (local, processes)]
    assert numbers[0] == numbers[1]
