"""The bad-input battery: every command, every kind of input a user can get wrong.

Each case must end with exit code 2 and one line on stderr that starts with "error:" (or click's
usage box for a malformed command line) naming the problem — no traceback, no run folder, no
MLflow store touched. Cases run in-process through the console-script entry point (`main`).

| command          | what is wrong                                   |
|------------------|-------------------------------------------------|
| run              | preset, ε list, δ, types, unknown fields, YAML, data files, labels, NaN, device,
|                  | output folder, attack settings, pool size, resume, policy                        |
| gate / report    | missing or malformed policy, results not JSON / wrong schema                     |
| audit-scores     | missing columns, both score and loss, non-0/1 members, NaN, one class, claimed ε |
| accountants      | σ, q, T out of range                                                             |
| accountant-check | malformed spec, missing module or attribute, bad grid                            |
| canary-audit     | unimportable trainer, K = 0, unknown canary kind                                 |
| mechanism-audit  | malformed spec                                                                   |
| bench            | zero models                                                                      |
| synth-check      | missing / extra columns, type mismatch, empty file, NaN without a policy, small holdout |
| audit-model      | weights that are not a tensor file, several ε claimed                            |
"""
import json

import pandas as pd
import pytest

from audit.cli import main

DATA = {
    "text_label.csv": pd.DataFrame({"x": [1.0, 2.0] * 50, "y": ["a", "b"] * 50}),
    "one_class.csv": pd.DataFrame({"x": [1.0, 2.0] * 50, "y": [1, 1] * 50}),
    "nan.csv": pd.DataFrame({"x": [1.0, None] * 50, "y": [0, 1] * 50}),
    "good.csv": pd.DataFrame({"x": [1.0, 2.0] * 500, "y": [0, 1] * 500}),
    "no_member.csv": pd.DataFrame({"score": [0.1, 0.2]}),
    "both.csv": pd.DataFrame({"member": [0, 1], "score": [0.1, 0.2], "loss": [1.0, 2.0]}),
    "member2.csv": pd.DataFrame({"member": [0, 2], "score": [0.1, 0.2]}),
    "nan_score.csv": pd.DataFrame({"member": [0, 1, 1], "score": [0.1, None, 0.3]}),
    "all_members.csv": pd.DataFrame({"member": [1, 1], "score": [0.1, 0.2]}),
    "scores.csv": pd.DataFrame({"member": [0, 1] * 50, "score": range(100)}),
    "s_train.csv": pd.DataFrame({"age": range(100), "city": ["a", "b"] * 50}),
    "s_holdout.csv": pd.DataFrame({"age": range(100, 200), "city": ["b", "a"] * 50}),
    "s_small.csv": pd.DataFrame({"age": range(20), "city": ["a", "b"] * 10}),
    "s_missing.csv": pd.DataFrame({"age": range(100)}),
    "s_types.csv": pd.DataFrame({"age": ["old", "young"] * 50, "city": ["a", "b"] * 50}),
    "s_nan.csv": pd.DataFrame({"age": [1.0, None] * 50, "city": ["a", "b"] * 50}),
}
FILES = {
    "bad_type.yaml": "training:\n  epochs: lots\n",
    "not_yaml.yaml": "training: [unclosed\n",
    "list.yaml": "- 1\n- 2\n",
    "typo.yaml": "trainig:\n  epochs: 3\n",
    "delta.yaml": "privacy:\n  delta: 1.5\n",
    "wrong_label.yaml": "data:\n  source: file\n  path: good.csv\n  label: target\n",
    "empty.yaml": "data:\n  source: file\n  path: empty.csv\n  label: y\n",
    "txt.yaml": "data:\n  source: file\n  path: data.txt\n  label: y\n",
    "no_refs.yaml": "attacks:\n  n_reference_models: 0\n",
    "no_shadows.yaml": "attacks:\n  n_shadow_models: 0\n",
    "magic.yaml": "attacks:\n  names: [loss, magic]\n",
    "small_pool.yaml": "split:\n  test_fraction: 0.2\n  candidate_fraction: 0.75\n",
    "big_population.yaml": "attacks:\n  rmia_population: 5000\n",
    "policy_bad.yaml": "rules:\n  max_auc: [1, 2]\n",
    "policy_unknown.yaml": "rules:\n  max_aucc: 0.6\n",
    "policy_ok.yaml": "rules:\n  max_auc: 0.6\n",
    "not_json.json": "{not json",
    "wrong_schema.json": json.dumps({"schema_version": 2, "targets": []}),
    "empty.csv": "",
    "data.txt": "x,y\n1,0\n",
    "a_file": "not a folder",
    "grid_bad.yaml": "noise_multipliers: [-1.0]\n",
    "user_acc.py": "NOT_CALLABLE = 3\n",
    "garbage.pt": "not a tensor file",
}
for name in ("text_label", "one_class", "nan"):
    FILES[f"{name}.yaml"] = f"data:\n  source: file\n  path: {name}.csv\n  label: y\n"

CASES = [
    # run: config and flags
    (["run", "--preset", "huge"], "unknown preset 'huge'"),
    (["run", "--epsilons", "0,1"], "privacy.epsilons"),
    (["run", "--epsilons", "-2"], "privacy.epsilons"),
    (["run", "--epsilons", "one"], "--epsilons"),
    (["run", "--config", "bad_type.yaml"], "training.epochs"),
    (["run", "--config", "missing.yaml"], "missing.yaml"),
    (["run", "--config", "not_yaml.yaml"], "not valid YAML"),
    (["run", "--config", "list.yaml"], "mapping"),
    (["run", "--config", "typo.yaml"], "unknown field"),
    (["run", "--config", "delta.yaml"], "privacy.delta"),
    (["run", "--device", "tpu"], "device"),
    (["run", "--device", "cuda"], "cuda"),  # no GPU here (CI has none either)
    (["run", "--out", "a_file/sub"], "--out"),
    (["run", "--name", "../escape"], "field 'name'"),  # names become folder names: no path escapes
    # run: data files
    (["run", "--config", "wrong_label.yaml"], "no label column 'target'"),
    (["run", "--config", "text_label.yaml"], "numeric class labels"),
    (["run", "--config", "one_class.yaml"], "single class"),
    (["run", "--config", "nan.yaml"], "column 'x'"),
    (["run", "--config", "empty.yaml"], "empty.csv"),
    (["run", "--config", "txt.yaml"], "unsupported suffix"),
    # run: attacks, pool, resume, policy
    (["run", "--config", "no_refs.yaml"], "attacks.n_reference_models"),
    (["run", "--config", "no_shadows.yaml"], "attacks.n_shadow_models"),
    (["run", "--config", "magic.yaml"], "unknown attack 'magic'"),
    (["run", "--preset", "smoke", "--config", "small_pool.yaml"], "shadow pool"),
    (["run", "--preset", "smoke", "--config", "big_population.yaml"], "attacks.rmia_population"),
    (["run", "--preset", "smoke", "--resume", "latest"], "no interrupted run"),
    (["run", "--policy", "policy_bad.yaml"], "rules.max_auc"),
    (["run", "--policy", "policy_unknown.yaml"], "max_aucc"),
    # gate / report
    (["gate", "--policy", "missing.yaml", "not_json.json"], "missing.yaml"),
    (["gate", "--policy", "policy_ok.yaml", "not_json.json"], "not_json.json"),
    (["gate", "--policy", "policy_ok.yaml", "wrong_schema.json"], "schema_version"),
    (["report", "missing.json"], "missing.json"),
    # audit-scores
    (["audit-scores", "no_member.csv"], "'member'"),
    (["audit-scores", "both.csv"], "exactly one of"),
    (["audit-scores", "member2.csv"], "only 0 and 1"),
    (["audit-scores", "nan_score.csv"], "column 'score'"),
    (["audit-scores", "all_members.csv"], "both members"),
    (["audit-scores", "scores.csv", "--claimed-epsilon", "-1"], "--claimed-epsilon"),
    (["audit-scores", "missing.csv"], "missing.csv"),
    # accountants and accountant-check
    (["accountants", "--noise-multiplier", "-1", "--sample-rate", "0.01", "--steps", "10"], "--noise-multiplier"),
    (["accountants", "--noise-multiplier", "1", "--sample-rate", "2", "--steps", "10"], "--sample-rate"),
    (["accountants", "--noise-multiplier", "1", "--sample-rate", "0.1", "--steps", "0"], "--steps"),
    (["accountant-check", "--accountant", "nocolon"], "module:function"),
    (["accountant-check", "--accountant", "missing_module_xyz:f"], "cannot import"),
    (["accountant-check", "--accountant", "user_acc:NOT_CALLABLE"], "not callable"),
    (["accountant-check", "--accountant", "audit.dp_validation.accountant_check:opacus_prv", "--grid", "grid_bad.yaml"], "grid_bad.yaml"),
    # canary-audit, mechanism-audit, bench
    (["canary-audit", "--trainer", "missing_module_xyz:train"], "cannot import"),
    (["canary-audit", "--trainer", "audit.demos.dp_trainers:correct_dpsgd", "--models", "0"], "--models"),
    (["canary-audit", "--trainer", "audit.demos.dp_trainers:correct_dpsgd", "--kind", "weird"], "--kind"),
    (["mechanism-audit", "--mechanism", "no colon"], "module:function"),
    (["bench", "--models", "0"], "--models"),
    # synth-check
    (["synth-check", "--train", "s_train.csv", "--holdout", "s_holdout.csv", "--synthetic", "s_missing.csv"], "city"),
    (["synth-check", "--train", "s_train.csv", "--holdout", "s_holdout.csv", "--synthetic", "s_types.csv"], "age"),
    (["synth-check", "--train", "s_train.csv", "--holdout", "s_holdout.csv", "--synthetic", "empty.csv"], "empty.csv"),
    (["synth-check", "--train", "s_train.csv", "--holdout", "s_holdout.csv", "--synthetic", "s_nan.csv"], "age"),
    (["synth-check", "--train", "s_train.csv", "--holdout", "s_small.csv", "--synthetic", "s_holdout.csv"], "holdout"),
    (["synth-check", "--train", "s_train.csv", "--holdout", "s_holdout.csv", "--synthetic", "s_train.csv",
      "--nan-policy", "ignore"], "--nan-policy"),
    # audit-model
    (["audit-model", "--weights", "garbage.pt", "--members", "good.csv", "--nonmembers", "good.csv", "--label", "y",
      "--claimed-epsilon", "inf"], "garbage.pt"),
    (["audit-model", "--weights", "garbage.pt", "--members", "good.csv", "--nonmembers", "good.csv", "--label", "y"],
     "privacy.epsilons"),
]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    for name, frame in DATA.items():
        frame.to_csv(tmp_path / name, index=False)
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("args, message", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_exits_2_with_one_message_naming_the_problem(workdir, capsys, args, message):
    with pytest.raises(SystemExit) as exited:
        main(args)
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert message in err
    assert err.startswith("error:") and err.count("\n") == 1  # exactly one line
    assert "Traceback" not in err
    runs = workdir / "runs"
    assert not runs.exists() or not any(runs.iterdir())  # nothing half-written
    assert not (workdir / "mlflow.db").exists()  # the tracking store untouched


def test_the_battery_covers_at_least_30_cases_across_every_command():
    commands = {args[0] for args, _ in CASES}
    assert len(CASES) >= 30
    assert commands >= {"run", "gate", "report", "audit-scores", "accountants", "accountant-check",
                        "canary-audit", "mechanism-audit", "bench", "audit-model", "synth-check"}
