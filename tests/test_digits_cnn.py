"""The bundled image task: `run --preset digits-cnn` trains a CNN on scikit-learn's digits with Opacus
and attacks it with reference models from the vectorized trainer (Conv2d)."""

from __future__ import annotations

import json

import pytest

from audit.machinery.config import resolve_config
from audit.sweep.runner import run_audit
from tests.mlflow_store import fresh_store


def test_the_preset_is_a_cnn_on_digits_at_three_epsilons():
    config = resolve_config("digits-cnn")
    assert config.data.source == "digits" and config.training.architecture == "cnn"
    assert [str(e) for e in config.privacy.epsilons] == ["1.0", "8.0", "inf"]


@pytest.mark.slow
def test_a_shortened_digits_cnn_run_trains_attacks_and_reports(tmp_path):
    config = resolve_config(
        "digits-cnn",
        overrides={
            "training": {"epochs": 10},
            "privacy": {"epsilons": [8.0, "inf"]},
            "attacks": {"names": ["loss", "lira"], "n_reference_models": 4},
        },
    )
    run = run_audit(config, out_dir=tmp_path / "runs", tracking_uri=fresh_store(tmp_path, "mlflow.db"))
    results = json.loads((run.run_dir / "results.json").read_text())
    assert (run.run_dir / "report.html").is_file()
    private, plain = results["targets"]
    assert private["epsilon_target"] == 8.0 and private["noise_multiplier"] > 0 and plain["epsilon_target"] is None
    assert results["data"]["n_classes"] == 10
    # Ten epochs (30 steps) of a CNN on 8×8 digits beat chance (0.1) by far without privacy.
    assert plain["test_accuracy"] > 0.4
    assert [a["name"] for a in plain["attacks"]] == ["loss", "lira"]
