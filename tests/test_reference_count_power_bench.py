"""The reference-count power benchmark (benchmarks/bench_reference_count_power.py, docs/run.md wave 9) runs what it
says: the default config with only K changed, its ε 8 and ∞ targets, exactly the attacks that read the reference
bank, and neither the twin nor the probes (which K does not touch). Parsing only: no training."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from attacks.registry import knobs_of
from audit.machinery.config import DEFAULT_ATTACKS, resolve_config

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_reference_count_power.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_reference_count_power", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("count", [64, 32, 16])
def test_bench_config_is_the_default_with_only_k_changed(tmp_path, count):
    path = tmp_path / "cfg.yaml"
    path.write_text(_bench().CONFIG.format(seed=2, count=count))
    config = resolve_config("default", path)
    default = resolve_config("default")
    assert config.seed == 2
    assert config.attacks.n_reference_models == count
    assert config.privacy.epsilons[:1] == [8.0] and config.privacy.epsilons[1] == float("inf")
    assert not config.privacy.whitebox_one_run and not config.privacy.conformance
    # exactly the default attacks that read the bank
    bank_readers = [name for name in DEFAULT_ATTACKS if "n_reference_models" in {k.name for k in knobs_of([name])}]
    assert config.attacks.names == bank_readers == ["lira", "lira_offline", "rmia"]
    # everything else as the default run trains it
    assert config.training == default.training
    assert config.split == default.split and config.data == default.data
    assert config.privacy.delta == default.privacy.delta and config.privacy.accountant == default.privacy.accountant
    for knob in ("rmia_population", "rmia_a", "rmia_gamma", "lira_global_variance"):
        assert getattr(config.attacks, knob) == getattr(default.attacks, knob)
