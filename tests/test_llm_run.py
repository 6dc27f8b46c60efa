"""`run --preset llm`, tiny, in a fresh process with `transformers` and the Hub client offline and an
empty Hugging Face cache: a GPT-2-style model built from a config, pretrained on public records, DP
fine-tuned (full and LoRA), audited with one-run canaries of both designs and through synthetic text."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from sklearn.metrics import roc_auc_score

from tests.conftest import REPO

TINY = {
    "privacy": {"epsilons": [8.0, "inf"]},
    "llm": {
        "n_candidates": 40,
        "n_pool": 40,
        "n_test": 10,
        "vocab_size": 250,
        "canaries_per_design": 24,
        # Panda et al.'s design options (off in the preset; docs/language-models.md): one new id per Panda
        # canary (a 1-token secret), the canaries' loss on the secret only, scores against the pretrained model
        "new_tokens": 24,
        "panda_secret_length": 1,
        "canary_loss": "secret",
        "canary_score_reference": True,
        "canary_repetitions": 4,
        "d_model": 32,
        "n_heads": 2,
        "pretrain_epochs": 1,
        "epochs": 3,
        "synthetic_samples": 16,
        "synthetic_epochs": 1,
    },
}


@pytest.mark.slow  # six small fine-tunings (DP per-sample gradients) and two auxiliary models: ~1 min of CPU
def test_the_llm_preset_runs_offline_end_to_end(tmp_path):
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf_home"),
        "HF_DATASETS_OFFLINE": "1",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "audit.cli",
            "run",
            "--preset",
            "llm",
            "--config",
            "tiny.yaml",
            "--out",
            "runs",
            "--tracking-uri",
            f"sqlite:///{tmp_path / 'mlflow.db'}",
            "--quiet",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]  # inconclusive / a finding; never a crash or bad input
    (folder,) = list((tmp_path / "runs").glob("*-llm"))
    for name in ("results.json", "results.csv", "report.html", "summary.md", "junit.xml"):
        assert (folder / name).is_file(), name
    results = json.loads((folder / "results.json").read_text())
    from audit.machinery.policy import validate_results

    validate_results(results)
    targets = results["targets"]
    assert results["data"]["canary_loss"] == "secret" and "pretrained" in results["data"]["canary_score"]
    assert results["data"]["canaries"]["panda"]["secret_length"] == 1
    assert [(t["llm"]["finetuning"], t["epsilon_target"]) for t in targets] == [
        ("full", None),
        ("full", 8.0),
        ("lora", None),
        ("lora", 8.0),
    ]
    for target in targets:
        mode = target["llm"]["finetuning"]
        names = {a["name"] for a in target["attacks"]}
        assert names == {
            f"canary_panda_{mode}",
            f"canary_secret_sharer_{mode}",
            f"canary_panda_synthetic_{mode}",
            f"canary_secret_sharer_synthetic_{mode}",
        }
        for row in target["attacks"]:  # one coin per canary: m canaries, about half inserted
            assert row["n_canaries"] == 24 and 0 < row["n_inserted"] < 24
        if target["epsilon_target"] is not None:
            assert target["noise_multiplier"] > 0 and target["privacy_unit"] == "person"
            # one pre-declared row tests the claim (the Panda canaries', f-DP against the claim's curve), its
            # power from the ε = ∞ control; the other rows are shown beside it
            deciding = target["whitebox_one_run"]
            assert deciding["design_key"] == f"canary_panda_{mode}" and deciding["family"].startswith("black-box")
            assert deciding["power"]["kind"] in ("control", "none") and deciding["tests"]
            assert all(a.get("decides") is False for a in target["attacks"])
        # the canary scores are saved, one CSV per design (and its synthetic-text row): a user recomputes the rows
        assert len(target["llm"]["score_files"]) == 4 and all(
            (folder / f).is_file() for f in target["llm"]["score_files"]
        )
        for row in target["attacks"]:
            design = row["design"] + ("_synthetic" if "synthetic" in row["name"] else "")
            tag = "inf" if target["epsilon_target"] is None else f"{target['epsilon_target']:g}"
            frame = pd.read_csv(folder / "scores" / f"scores_{mode}_eps_{tag}_{design}.csv")
            assert list(frame.columns) == ["canary_index", "member", "score"] and len(frame) == 24
            assert frame["member"].sum() == row["n_inserted"]
            assert roc_auc_score(frame["member"], frame["score"]) == pytest.approx(row["auc"], abs=1e-9)
        synthetic = target["llm"]["synthetic_text"]  # its own cost, apart from the run's (docs' time split)
        assert synthetic["samples"] == 16 and 0 < synthetic["cpu_seconds"] <= results["text"]["cpu_seconds"]
    lora = targets[2]["llm"]
    assert lora["trainable_parameters"] < lora["parameters"] / 2  # adapters and the head copy: trained and private
    # the verdict has one claim per DP fine-tuning, each tested by its Panda row (24 canaries: untestable here)
    claims = [c["claim"] for c in results["verdict"]["claims"]]
    assert any("full fine-tuning" in c for c in claims) and any("LoRA fine-tuning" in c for c in claims)
    assert results["verdict"]["status"] != "pass"
    summary = (folder / "summary.md").read_text()
    assert "canary_panda_full" in summary and "canary_panda_lora" in summary  # full and LoRA told apart
    assert results["mlflow"]["parent_run_id"] and len(results["mlflow"]["child_run_ids"]) == 4
    hub = tmp_path / "hf_home" / "hub"
    assert not hub.exists() or not any(hub.iterdir())  # nothing fetched into the (empty) Hugging Face cache
