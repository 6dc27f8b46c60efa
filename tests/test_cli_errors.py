"""Bad input to `run`: one message naming the problem, exit 2, no traceback, no run folder."""
import pandas as pd
import pytest


@pytest.fixture
def data_files(tmp_path):
    pd.DataFrame({"x": [1.0, 2.0] * 50, "y": ["a", "b"] * 50}).to_csv(tmp_path / "text_label.csv", index=False)
    pd.DataFrame({"x": [1.0, 2.0] * 50, "y": [1, 1] * 50}).to_csv(tmp_path / "one_class.csv", index=False)
    pd.DataFrame({"x": [1.0, None] * 50, "y": [0, 1] * 50}).to_csv(tmp_path / "nan.csv", index=False)
    (tmp_path / "bad_type.yaml").write_text("training:\n  epochs: lots\n")
    (tmp_path / "a_file").write_text("not a folder")
    (tmp_path / "no_refs.yaml").write_text("attacks:\n  n_reference_models: 0\n")
    (tmp_path / "no_shadows.yaml").write_text("attacks:\n  n_shadow_models: 0\n")
    (tmp_path / "magic.yaml").write_text("attacks:\n  names: [loss, magic]\n")
    (tmp_path / "small_pool.yaml").write_text("split:\n  test_fraction: 0.2\n  candidate_fraction: 0.75\n")
    (tmp_path / "big_population.yaml").write_text("attacks:\n  rmia_population: 5000\n")
    for name in ("text_label", "one_class", "nan"):
        (tmp_path / f"{name}.yaml").write_text(f"data:\n  source: file\n  path: {name}.csv\n  label: y\n")
    (tmp_path / "wrong_label.yaml").write_text("data:\n  source: file\n  path: nan.csv\n  label: target\n")
    return tmp_path


CASES = [
    (["--preset", "huge"], "unknown preset 'huge'"),
    (["--epsilons", "0,1"], "privacy.epsilons"),
    (["--epsilons", "-2"], "privacy.epsilons"),
    (["--epsilons", "one"], "--epsilons"),
    (["--config", "bad_type.yaml"], "training.epochs"),
    (["--config", "missing.yaml"], "missing.yaml"),
    (["--config", "wrong_label.yaml"], "no label column 'target'"),
    (["--config", "text_label.yaml"], "numeric class labels"),
    (["--config", "one_class.yaml"], "single class"),
    (["--config", "nan.yaml"], "column 'x'"),
    (["--device", "tpu"], "device"),
    (["--out", "a_file/sub"], "--out"),
    (["--config", "no_refs.yaml"], "attacks.n_reference_models"),
    (["--config", "no_shadows.yaml"], "attacks.n_shadow_models"),
    (["--config", "magic.yaml"], "unknown attack 'magic'"),
    (["--config", "small_pool.yaml"], "shadow pool"),
    (["--config", "big_population.yaml"], "attacks.rmia_population"),
]


@pytest.mark.parametrize("args, message", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_exits_2_with_one_clear_message(cli, data_files, args, message):
    proc = cli("run", "--preset", "smoke", *args)
    assert proc.returncode == 2, (proc.stdout[-1000:], proc.stderr[-2000:])
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    runs = data_files / "runs"
    assert not runs.exists() or not any(runs.iterdir())
