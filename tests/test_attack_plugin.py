"""A new attack is one file (tests/plugin_attack.py) and one `register_attack` call, and then it is in the
CLI, the config, the range table, the report and the verdict with no other edit (issue #37, item 1)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from attacks import (
    ATTACKS,
    AttackOptions,
    all_knobs,
    register_attack,
    unregister_attack,
)
from audit.errors import AuditInputError
from audit.machinery.config import resolve_config
from audit.machinery.limits import COUNT_LIMITS, check_count, limits_table_markdown
from tests import plugin_attack
from tests.plugin_attack import EntropyAttack


@pytest.fixture
def plugin():
    """The one registration; undone afterwards so the rest of the suite sees the built-in attacks only."""
    register_attack(EntropyAttack)
    plugin_attack.SEEN_OPTIONS.clear()
    try:
        yield EntropyAttack
    finally:
        unregister_attack("entropy")
        resolve_config("default")  # the config's attacks section is rebuilt without the plug-in's knob


def _help(command: str) -> str:
    from audit.cli import app

    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_a_registered_attack_is_in_the_cli_config_range_table_and_options(plugin, tmp_path):
    assert "entropy" in ATTACKS and ATTACKS["entropy"] is EntropyAttack
    assert "rmia, label_only, entropy" in _help("audit-model")  # the --attacks help lists the registry
    # config: the knob is a field of the attacks section with the declared default and range
    config = resolve_config("smoke", overrides={"attacks": {"names": ["loss", "entropy"], "entropy_top_k": 3}})
    assert config.attacks.entropy_top_k == 3 and config.to_plain()["attacks"]["entropy_top_k"] == 3
    assert resolve_config("smoke").attacks.entropy_top_k == 10
    with pytest.raises(AuditInputError) as info:
        resolve_config("smoke", overrides={"attacks": {"entropy_top_k": 0}})
    assert "attacks.entropy_top_k" in str(info.value)
    # the range table (and so docs/errors.md's generated rows and check_count) has its row
    assert COUNT_LIMITS["attacks.entropy_top_k"].high == 1_000
    row = "| `attacks.entropy_top_k` | [1, 1,000] | run, audit-model | classes whose probabilities enter the entropy"
    assert any(line.startswith(row) for line in limits_table_markdown())
    with pytest.raises(AuditInputError):
        check_count("attacks.entropy_top_k", 1_001)
    # AttackOptions carries it, defaulted from the declaration
    assert AttackOptions().entropy_top_k == 10 and AttackOptions(entropy_top_k=4).entropy_top_k == 4


def test_unregistering_restores_the_built_in_tables():
    before = (list(ATTACKS), [k.name for k in all_knobs()], limits_table_markdown())
    register_attack(EntropyAttack)
    unregister_attack("entropy")
    assert (list(ATTACKS), [k.name for k in all_knobs()], limits_table_markdown()) == before
    with pytest.raises(AuditInputError) as info:
        resolve_config("smoke", overrides={"attacks": {"entropy_top_k": 3}})
    assert "attacks.entropy_top_k" in str(info.value)  # an unknown field again


def test_a_malformed_attack_is_refused_at_registration():
    class NoName:
        name = "not an identifier"

    with pytest.raises(ValueError, match="identifier"):
        register_attack(NoName)

    class NeedsSomethingElse:
        name = "odd"
        needs = frozenset({"gpu cluster"})

    with pytest.raises(ValueError, match="gpu cluster"):
        register_attack(NeedsSomethingElse)
    with pytest.raises(ValueError, match="already registered"):
        register_attack(type("Loss", (), {"name": "loss"}))
    assert "odd" not in ATTACKS


def _files(root: Path) -> dict[str, Path]:
    """Members / non-members CSVs (a random half each) and a small MLP that memorised the members."""
    import torch

    from targets.datasets import make_default_tabular
    from targets.models import MLP

    data = make_default_tabular(400, seed=3)
    columns = [f"f{i}" for i in range(data.features.shape[1])]
    order = np.random.default_rng(0).permutation(data.n_rows)
    paths = {}
    for name, rows in {"members": order[:150], "nonmembers": order[150:300]}.items():
        frame = pd.DataFrame(data.features[rows], columns=columns)
        frame["y"] = data.labels[rows]
        paths[name] = root / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        model = MLP(len(columns), [16], 2)
        members = pd.read_csv(paths["members"])
        x, y = torch.tensor(members[columns].to_numpy(np.float32)), torch.tensor(members["y"].to_numpy())
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(200):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    finally:
        torch.set_num_threads(previous)
    paths["weights"] = root / "model.pt"
    torch.save(model.state_dict(), paths["weights"])
    paths["config"] = root / "config.yaml"
    paths["config"].write_text("training: {hidden_sizes: [16]}\nattacks: {entropy_top_k: 2}\n")
    return paths


@pytest.mark.slow  # trains a small model and writes an MLflow run (~30 s on a shared CPU)
def test_a_registered_attack_runs_in_audit_model_and_is_in_the_results_verdict_and_report(
    plugin, tmp_path, monkeypatch
):
    from audit.cli import app

    monkeypatch.chdir(tmp_path)
    files = _files(tmp_path)
    result = CliRunner().invoke(
        app,
        [
            "audit-model",
            "--weights",
            str(files["weights"]),
            "--members",
            str(files["members"]),
            "--nonmembers",
            str(files["nonmembers"]),
            "--label",
            "y",
            "--config",
            str(files["config"]),
            "--claimed-epsilon",
            "inf",
            "--attacks",
            "loss,entropy",
            "--allow-leak",
            "--device",
            "cpu",
            "--out",
            str(tmp_path / "runs"),
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    assert plugin_attack.SEEN_OPTIONS == [2]  # the config's knob reached the attack through AttackOptions
    (run,) = (tmp_path / "runs").iterdir()
    results = json.loads((run / "results.json").read_text())
    assert results["attacks_run"] == ["loss", "entropy"]
    row = next(a for a in results["targets"][0]["attacks"] if a["name"] == "entropy")
    assert 0.0 <= row["auc"] <= 1.0 and row["n_members"] == 150
    assert results["config"]["attacks"]["entropy_top_k"] == 2
    # the verdict's leakage statement tests every attack that ran, the plug-in included
    tests = results["verdict"]["leakage"][0]["tests"]
    assert {t["attack"] for t in tests} >= {"loss", "entropy"}
    html = (run / "report.html").read_text()
    assert "Prediction entropy (black box, no labels)" in html  # its method note, from the class
    assert "No method note is recorded" not in html


def test_the_memory_estimate_counts_the_models_the_chosen_attacks_declare():
    from audit.machinery.memory_estimates import trained_models_per_target

    def models(names):
        return trained_models_per_target(resolve_config("smoke", overrides={"attacks": {"names": names}}).attacks)

    smoke = resolve_config("smoke").attacks
    assert models(["loss"]) == 0
    assert models(["loss", "lira", "rmia"]) == smoke.n_reference_models  # one reference bank, shared
    assert models(["loss", "shadow", "lira"]) == smoke.n_shadow_models + smoke.n_reference_models
