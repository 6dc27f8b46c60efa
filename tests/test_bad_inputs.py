"""The hostile-input battery: every command, every kind of input a careless user or an attacker
can hand it (issue 17). Table-driven; each case states its exit code and a fragment of its message.

Refused input (exit 2) must print exactly one line, starting "error:", naming the problem, with no
traceback, and leave nothing behind: no run folder (finished or `.partial`), no MLflow store.
Cases that are not refused (exit 0 / 1) must leave a finished run folder and no `.partial` one.
Every case has a time limit: nothing hangs. Cases run in-process through the console-script entry
point (`main`); user code runs in the isolated worker processes the commands spawn themselves.

| command          | what is wrong                                   |
|------------------|-------------------------------------------------|
| run              | preset, ε list, δ, types, unknown fields, YAML (duplicates, anchor bombs), data files, labels, NaN,
|                  | device, output folder, tracking store, attack settings, pool size, resume, policy, numeric ranges |
| gate / report    | missing or malformed policy, results not JSON / wrong schema / nested 100k deep / NaN, no check applies |
| audit-scores     | missing columns, both score and loss, non-0/1 members, NaN, one class, too few rows, labels, claimed ε |
| accountants      | σ, q, T, δ out of range, non-finite                                              |
| accountant-check | malformed spec, missing module, exits on import, exits / hangs / crashes when called, bad grid |
| canary-audit     | unimportable trainer, exits on import, K = 0, unknown canary kind                |
| mechanism-audit  | malformed spec, raising / exiting / non-finite mechanisms, claims                |
| bench            | zero or absurd models, epochs, threads                                           |
| synth-check      | missing / extra / repeated columns, type mismatch, empty file, NaN without a policy, small holdout,
|                  | ±1e308 values, list cells, δ, seed                                               |
| audit-model      | weights that are not a tensor file, several ε claimed, repeated columns, huge class labels |
"""

import json
import os
import time
from pathlib import Path

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
    "wrong_schema.json": json.dumps({"schema_version": 99, "targets": []}),
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
    (
        [
            "accountant-check",
            "--accountant",
            "audit.dp_validation.accountant_check:opacus_prv",
            "--grid",
            "grid_bad.yaml",
        ],
        "grid_bad.yaml",
    ),
    # canary-audit, mechanism-audit, bench
    (["canary-audit", "--trainer", "missing_module_xyz:train"], "cannot import"),
    (["canary-audit", "--trainer", "audit.demos.dp_trainers:correct_dpsgd", "--models", "0"], "--models"),
    (["canary-audit", "--trainer", "audit.demos.dp_trainers:correct_dpsgd", "--kind", "weird"], "--kind"),
    # whitebox-audit: refused before any worker starts
    (["whitebox-audit"], "--factory"),
    (["whitebox-audit", "--factory", "a:b:c"], "--factory"),
    (["whitebox-audit", "--factory", "audit.demos.whitebox_factories:correct_opacus", "--builtin"], "--factory"),
    (["whitebox-audit", "--builtin"], "--noise-multiplier"),
    (["whitebox-audit", "--builtin", "--noise-multiplier", "2", "--observe", "sideways"], "--observe"),
    (["whitebox-audit", "--builtin", "--noise-multiplier", "2", "--runs", "0"], "--runs"),
    (["whitebox-audit", "--builtin", "--noise-multiplier", "2", "--sample-rate", "1.5"], "--sample-rate"),
    (["whitebox-audit", "--builtin", "--noise-multiplier", "nan"], "--noise-multiplier"),
    (["whitebox-audit", "--builtin", "--noise-multiplier", "2", "--delta", "0"], "--delta"),
    (["mechanism-audit", "--mechanism", "no colon"], "module:function"),
    (["bench", "--models", "0"], "--models"),
    # synth-check
    (["synth-check", "--train", "s_train.csv", "--holdout", "s_holdout.csv", "--synthetic", "s_missing.csv"], "city"),
    (["synth-check", "--train", "s_train.csv", "--holdout", "s_holdout.csv", "--synthetic", "s_types.csv"], "age"),
    (["synth-check", "--train", "s_train.csv", "--holdout", "s_holdout.csv", "--synthetic", "empty.csv"], "empty.csv"),
    (["synth-check", "--train", "s_train.csv", "--holdout", "s_holdout.csv", "--synthetic", "s_nan.csv"], "age"),
    (["synth-check", "--train", "s_train.csv", "--holdout", "s_small.csv", "--synthetic", "s_holdout.csv"], "holdout"),
    (
        [
            "synth-check",
            "--train",
            "s_train.csv",
            "--holdout",
            "s_holdout.csv",
            "--synthetic",
            "s_train.csv",
            "--nan-policy",
            "ignore",
        ],
        "--nan-policy",
    ),
    # audit-model
    (
        [
            "audit-model",
            "--weights",
            "garbage.pt",
            "--members",
            "good.csv",
            "--nonmembers",
            "good.csv",
            "--label",
            "y",
            "--claimed-epsilon",
            "inf",
        ],
        "garbage.pt",
    ),
    (
        ["audit-model", "--weights", "garbage.pt", "--members", "good.csv", "--nonmembers", "good.csv", "--label", "y"],
        "privacy.epsilons",
    ),
]


# ---------------------------------------------------------------------------------------------------
# Hostile input (issue 17): every input of the report, then our own.
# ---------------------------------------------------------------------------------------------------

RESULTS_EXAMPLE = Path(__file__).parent / "data" / "results_smoke_example.json"
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(8)
)  # 9 levels of ten-fold aliases: 10⁹ values if expanded

HOSTILE_MODULE = """
import math, os, sys, time

def acc_inf(sigma, q, steps, delta):
    return math.inf

def acc_neg_inf(sigma, q, steps, delta):
    return -math.inf

def acc_exit0(sigma, q, steps, delta):
    raise SystemExit(0)

def acc_sleeps(sigma, q, steps, delta):
    time.sleep(600)

def acc_os_exit(sigma, q, steps, delta):
    os._exit(0)

def acc_text(sigma, q, steps, delta):
    return "1.0"

def acc_raises(sigma, q, steps, delta):
    raise ZeroDivisionError("division by zero")

def acc_huge_repr(sigma, q, steps, delta):
    return ["x" * 100] * 100000

DATASETS = ([0.0, 1.0], [0.0, 1.0, 1.0])

def mech_zero_division(data, rng):
    return 1 / 0

def mech_inf(data, rng):
    return math.inf

def mech_nan(data, rng):
    return float("nan")

def mech_exit0(data, rng):
    sys.exit(0)

def mech_text(data, rng):
    return "abc"

def mech_shapes(data, rng):
    return [1.0] * int(rng.integers(1, 3))

def mech_sleeps(data, rng):
    time.sleep(600)
"""
NO_DATASETS_MODULE = "def mech(data, rng):\n    return 0.0\n"

DATA.update(
    {
        "two_rows.csv": pd.DataFrame({"member": [0, 1], "score": [0.1, 0.2]}),
        "text_labels_scores.csv": pd.DataFrame({"member": [0, 1] * 10, "score": range(20), "label": ["a", "b"] * 10}),
        "inf_label_scores.csv": pd.DataFrame(
            {"member": [0, 1] * 10, "score": range(20), "label": [0.0, float("inf")] * 10}
        ),
        "many_labels_scores.csv": pd.DataFrame({"member": [0, 1] * 1100, "score": range(2200), "label": range(2200)}),
        "inf_score.csv": pd.DataFrame({"member": [0, 1] * 10, "score": [1.0, float("inf")] * 10}),
        "huge_score.csv": pd.DataFrame({"member": [0, 1] * 10, "score": [1.0, 1e308] * 10}),
        "text_member.csv": pd.DataFrame({"member": ["yes", "no"] * 10, "score": range(20)}),
        "half_member.csv": pd.DataFrame({"member": [0.5, 1.0] * 10, "score": range(20)}),
        "inf_label.csv": pd.DataFrame({"x": [1.0, 2.0, 3.0] * 100, "y": [0.0, 1.0, float("inf")] * 100}),
        "huge_label.csv": pd.DataFrame({"x": [1.0, 2.0] * 500, "y": [0, 100_000_000_000] * 500}),
        "many_classes.csv": pd.DataFrame({"x": range(3000), "y": range(3000)}),
        "frac_label.csv": pd.DataFrame({"x": [1.0, 2.0] * 500, "y": [0.5, 1.0] * 500}),
        "huge_x.csv": pd.DataFrame({"x": [1e308, -1e308] * 500, "y": [0, 1] * 500}),
        "inf_x.csv": pd.DataFrame({"x": [float("inf"), 1.0] * 500, "y": [0, 1] * 500}),
        "s_huge.csv": pd.DataFrame({"age": [1e308, -1e308] * 50, "city": ["a", "b"] * 50}),
        "s_inf.csv": pd.DataFrame({"age": [float("inf"), 1.0] * 50, "city": ["a", "b"] * 50}),
        "s_extra.csv": pd.DataFrame({"age": range(100), "city": ["a", "b"] * 50, "zip": range(100)}),
        "s_bigholdout.csv": pd.DataFrame({"age": range(300, 400), "city": ["b", "a"] * 50}),
        "members_ok.csv": pd.DataFrame({"x": [1.0, 2.0] * 50, "y": [0, 1] * 50}),
        "members_hugelabel.csv": pd.DataFrame({"x": [1.0, 2.0] * 50, "y": [0, 100_000_000_000] * 50}),
        "members_neglabel.csv": pd.DataFrame({"x": [1.0, 2.0] * 50, "y": [0, -1] * 50}),
    }
)
FILES.update(
    {
        # run: the silent coercions and numeric extremes
        "epochs_true.yaml": "training:\n  epochs: true\n",
        "epsilons_text.yaml": "privacy:\n  epsilons: ['1', 'inf']\n",
        "dup_key.yaml": "training:\n  epochs: 3\n  epochs: 5\n",
        "dup_top.yaml": "seed: 1\nseed: 2\n",
        "eps_tiny.yaml": "privacy:\n  epsilons: [0.000001]\n",
        "eps_huge.yaml": "privacy:\n  epsilons: [1.0e+300]\n",
        "delta_tiny.yaml": "privacy:\n  delta: 1.0e-300\n",
        "delta_zero.yaml": "privacy:\n  delta: 0.0\n",
        "lr_huge.yaml": "training:\n  lr: 1.0e+30\n",
        "lr_nan.yaml": "training:\n  lr: .nan\n",
        "lr_inf.yaml": "training:\n  lr: .inf\n",
        "lr_text.yaml": "training:\n  lr: '0.1'\n",
        "seed_huge.yaml": "seed: 100000000000000000000000000\n",
        "seed_float.yaml": "seed: 1.5\n",
        "seed_neg.yaml": "seed: -1\n",
        "threads_huge.yaml": "cpu_threads: 100000\n",
        "epochs_huge.yaml": "training:\n  epochs: 1000000000\n",
        "epochs_float.yaml": "training:\n  epochs: 3.0\n",
        "batch_zero.yaml": "training:\n  batch_size: 0\n",
        "hidden_huge.yaml": "training:\n  hidden_sizes: [100000000]\n",
        "hidden_empty.yaml": "training:\n  hidden_sizes: []\n",
        "hidden_text.yaml": "training:\n  hidden_sizes: ['64']\n",
        "hidden_bool.yaml": "training:\n  hidden_sizes: [true]\n",
        "momentum_one.yaml": "training:\n  momentum: 1.0\n",
        "clip_nan.yaml": "training:\n  max_grad_norm: .nan\n",
        "rows_huge.yaml": "data:\n  n_rows: 1000000000000\n",
        "rows_text.yaml": "data:\n  n_rows: many\n",
        "confidence_one.yaml": "attacks:\n  confidence: 1.0\n",
        "refs_huge.yaml": "attacks:\n  n_reference_models: 1000000\n",
        "rmia_a_nan.yaml": "attacks:\n  rmia_a: .nan\n",
        "eps_dup.yaml": "privacy:\n  epsilons: [1.0, 1.0]\n",
        "eps_empty.yaml": "privacy:\n  epsilons: []\n",
        "eps_nan.yaml": "privacy:\n  epsilons: [.nan]\n",
        "eps_mapping.yaml": "privacy:\n  epsilons: {a: 1}\n",
        "accountant_bad.yaml": "privacy:\n  accountant: moments\n",
        "secure_text.yaml": "privacy:\n  secure_mode: 'yes'\n",
        "device_int.yaml": "device: 1\n",
        "name_long.yaml": "name: " + "a" * 500 + "\n",
        "source_bad.yaml": "data:\n  source: mnist\n",
        "file_no_path.yaml": "data:\n  source: file\n",
        "privacy_list.yaml": "privacy: [1, 2]\n",
        "synthetic_bad.yaml": "synthetic:\n  generators: [gan]\n",
        "synthetic_eps_inf.yaml": "synthetic:\n  epsilons: [.inf]\n",
        "bomb.yaml": BOMB,
        "deep.yaml": "a: " + "[" * 5000 + "]" * 5000 + "\n",
        "binary.yaml": "\x00\x01\x02",
        "tab.yaml": "training:\n\tepochs: 3\n",
        "python_tag.yaml": "seed: !!python/object/apply:os.system ['echo pwned']\n",
        "inf_label.yaml": "data:\n  source: file\n  path: inf_label.csv\n  label: y\n",
        "huge_label.yaml": "data:\n  source: file\n  path: huge_label.csv\n  label: y\n",
        "many_classes.yaml": "data:\n  source: file\n  path: many_classes.csv\n  label: y\n",
        "frac_label.yaml": "data:\n  source: file\n  path: frac_label.csv\n  label: y\n",
        "huge_x.yaml": "data:\n  source: file\n  path: huge_x.csv\n  label: y\n",
        "inf_x.yaml": "data:\n  source: file\n  path: inf_x.csv\n  label: y\n",
        "dup_cols.yaml": "data:\n  source: file\n  path: dup_cols.csv\n  label: y\n",
        "missing_data.yaml": "data:\n  source: file\n  path: nowhere.csv\n  label: y\n",
        "dup_cols.csv": "a,a,y\n" + "1,2,0\n3,4,1\n" * 60,
        "s_dup.csv": "age,age,city\n" + "1,2,a\n3,4,b\n" * 50,
        "scores_dup.csv": "member,score,score\n" + "0,1,2\n1,3,4\n" * 10,
        "members_dup.csv": "x,x,y\n" + "1,2,0\n3,4,1\n" * 50,
        # policies
        "policy_dup.yaml": "rules:\n  max_auc: 0.6\n  max_auc: 0.9\n",
        "policy_bomb.yaml": BOMB + "rules:\n  max_auc: *i\n",
        "policy_text_number.yaml": "rules:\n  max_auc: '0.6'\n",
        "policy_nan.yaml": "rules:\n  max_auc: .nan\n",
        "policy_inf.yaml": "rules:\n  max_epsilon_lb: .inf\n",
        "policy_bool.yaml": "rules:\n  max_auc: true\n",
        "policy_empty.yaml": "",
        "policy_no_rules.yaml": "rules: {}\n",
        "policy_list.yaml": "- max_auc: 0.6\n",
        "policy_deep.yaml": "rules: " + "[" * 5000 + "]" * 5000 + "\n",
        "policy_synthetic_only.yaml": "rules:\n  fail_on_violation: false\n  max_dcr_share: 0.6\n",
        # results files
        "deep.json": "[" * 100_000 + "]" * 100_000,
        "nan.json": '{"schema_version": 1, "targets": [], "x": NaN}',
        "dup.json": '{"schema_version": 1, "schema_version": 1}',
        "array.json": "[1, 2, 3]",
        "empty.json": "",
        "huge_string.json": json.dumps({"schema_version": 1, "targets": "x" * 1_000_000}),
        "user_hostile.py": HOSTILE_MODULE,
        "exits_on_import.py": "raise SystemExit(0)\ndef f(*args):\n    return 1.0\n",
        "raises_on_import.py": "raise RuntimeError('boom ' * 1000)\n",
        "no_datasets.py": NO_DATASETS_MODULE,
        "grid_nan.yaml": "noise_multipliers: [.nan]\n",
        "grid_text.yaml": "steps: ['100']\n",
        "grid_dup.yaml": "steps: [10]\nsteps: [20]\n",
        "grid_huge_steps.yaml": "steps: [1000000000000]\n",
        "grid_tiny_sigma.yaml": "noise_multipliers: [0.000000001]\n",
        "grid_list.yaml": "- 1\n",
    }
)

HOSTILE_CASES = [
    # --- run: numbers of the report (exit 1 / hang before) ---------------------------------------------
    (["run", "--epsilons", "0.000001"], "privacy.epsilons"),
    (["run", "--epsilons", "1e300"], "privacy.epsilons"),
    (["run", "--epsilons", "nan"], "privacy.epsilons"),
    (["run", "--epsilons", "1,1"], "distinct"),
    (["run", "--epsilons", ","], "--epsilons"),
    (["run", "--config", "eps_tiny.yaml"], "privacy.epsilons"),
    (["run", "--config", "eps_huge.yaml"], "privacy.epsilons"),
    (["run", "--config", "delta_tiny.yaml"], "privacy.delta"),
    (["run", "--config", "delta_zero.yaml"], "privacy.delta"),
    (["run", "--config", "lr_huge.yaml"], "training.lr"),
    (["run", "--config", "lr_nan.yaml"], "training.lr"),
    (["run", "--config", "lr_inf.yaml"], "training.lr"),
    (["run", "--seed", "1e26"], "--seed"),
    (["run", "--seed", "100000000000000000000000000"], "seed"),
    (["run", "--seed", "-1"], "seed"),
    (["run", "--seed", "4294967296"], "seed"),
    (["run", "--config", "seed_huge.yaml"], "field 'seed'"),
    (["run", "--config", "seed_float.yaml"], "field 'seed'"),
    (["run", "--config", "seed_neg.yaml"], "field 'seed'"),
    (["run", "--config", "threads_huge.yaml"], "cpu_threads"),
    # --- run: silent coercion refused ------------------------------------------------------------------
    (["run", "--config", "epochs_true.yaml"], "training.epochs"),
    (["run", "--config", "epsilons_text.yaml"], "privacy.epsilons.0"),
    (["run", "--config", "dup_key.yaml"], "appears twice"),
    (["run", "--config", "dup_top.yaml"], "appears twice"),
    (["run", "--config", "lr_text.yaml"], "training.lr"),
    (["run", "--config", "epochs_float.yaml"], "training.epochs"),
    (["run", "--config", "hidden_text.yaml"], "training.hidden_sizes"),
    (["run", "--config", "hidden_bool.yaml"], "training.hidden_sizes"),
    (["run", "--config", "secure_text.yaml"], "privacy.secure_mode"),
    (["run", "--config", "device_int.yaml"], "device"),
    (["run", "--config", "rows_text.yaml"], "data.n_rows"),
    # --- run: our own ranges and shapes ----------------------------------------------------------------
    (["run", "--config", "epochs_huge.yaml"], "training.epochs"),
    (["run", "--config", "batch_zero.yaml"], "training.batch_size"),
    (["run", "--config", "hidden_huge.yaml"], "training.hidden_sizes"),
    (["run", "--config", "hidden_empty.yaml"], "training.hidden_sizes"),
    (["run", "--config", "momentum_one.yaml"], "training.momentum"),
    (["run", "--config", "clip_nan.yaml"], "training.max_grad_norm"),
    (["run", "--config", "rows_huge.yaml"], "data.n_rows"),
    (["run", "--config", "confidence_one.yaml"], "attacks.confidence"),
    (["run", "--config", "refs_huge.yaml"], "attacks.n_reference_models"),
    (["run", "--config", "rmia_a_nan.yaml"], "attacks.rmia_a"),
    (["run", "--config", "eps_dup.yaml"], "distinct"),
    (["run", "--config", "eps_empty.yaml"], "privacy.epsilons"),
    (["run", "--config", "eps_nan.yaml"], "privacy.epsilons"),
    (["run", "--config", "eps_mapping.yaml"], "privacy.epsilons"),
    (["run", "--config", "accountant_bad.yaml"], "privacy.accountant"),
    (["run", "--config", "name_long.yaml"], "field 'name'"),
    (["run", "--config", "source_bad.yaml"], "data.source"),
    (["run", "--config", "file_no_path.yaml"], "data"),
    (["run", "--config", "privacy_list.yaml"], "privacy"),
    (["run", "--config", "synthetic_bad.yaml"], "synthetic.generators"),
    (["run", "--config", "synthetic_eps_inf.yaml"], "synthetic.epsilons"),
    (["run", "--name", "a/b"], "field 'name'"),
    (["run", "--name", ""], "field 'name'"),
    # --- run: hostile files ----------------------------------------------------------------------------
    (["run", "--config", "bomb.yaml"], "expands to more than"),
    (["run", "--config", "deep.yaml"], "config file 'deep.yaml'"),
    (["run", "--config", "binary.yaml"], "binary.yaml"),
    (["run", "--config", "tab.yaml"], "not valid YAML"),
    (["run", "--config", "python_tag.yaml"], "not valid YAML"),  # safe loader: no Python objects
    (["run", "--config", "."], "config file '.'"),
    # --- run: data files -------------------------------------------------------------------------------
    (["run", "--config", "inf_label.yaml"], "column 'y'"),
    (["run", "--config", "huge_label.yaml", "--preset", "smoke"], None),  # two classes after re-encoding: valid
    (["run", "--config", "many_classes.yaml"], "distinct classes"),
    (["run", "--config", "frac_label.yaml"], "fractional"),
    (["run", "--config", "huge_x.yaml"], "column 'x'"),
    (["run", "--config", "inf_x.yaml"], "column 'x'"),
    (["run", "--config", "dup_cols.yaml"], "column 'a': appears more than once"),
    (["run", "--config", "missing_data.yaml"], "nowhere.csv"),
    # --- run: folders, stores, resume, policy ----------------------------------------------------------
    (["run", "--tracking-uri", "sqlite:////nonexistent_privacy_audit/dir/x.db"], "does not exist"),
    (["run", "--tracking-uri", "sqlite:///no_such_folder/x.db"], "does not exist"),
    (["run", "--tracking-uri", "sqlite:/x.db"], "--tracking-uri"),
    (["run", "--tracking-uri", "sqlite:///."], "--tracking-uri"),
    (["run", "--resume", "nowhere"], "--resume"),
    (["run", "--resume", "good.csv"], "--resume"),
    (["run", "--policy", "policy_dup.yaml"], "appears twice"),
    (["run", "--policy", "policy_bomb.yaml"], "expands to more than"),
    (["run", "--policy", "missing_policy.yaml"], "missing_policy.yaml"),
    # --- run --dry-run refuses the same inputs ---------------------------------------------------------
    (["run", "--dry-run", "--config", "dup_key.yaml"], "appears twice"),
    (["run", "--dry-run", "--config", "inf_label.yaml"], "column 'y'"),
    (["run", "--dry-run", "--out", "a_file/sub"], "--out"),
    (["run", "--dry-run", "--tracking-uri", "sqlite:////nonexistent_privacy_audit/x.db"], "does not exist"),
    (["run", "--dry-run", "--preset", "smoke", "--resume", "latest"], "no interrupted run"),
    # --- gate / report ---------------------------------------------------------------------------------
    (["gate", "--policy", "policy_ok.yaml", "deep.json"], "arrays/objects more than 64 deep"),
    (["report", "deep.json"], "arrays/objects more than 64 deep"),
    (["gate", "--policy", "policy_ok.yaml", "nan.json"], "NaN is not valid JSON"),
    (["report", "nan.json"], "NaN is not valid JSON"),
    (["gate", "--policy", "policy_ok.yaml", "dup.json"], "appears twice"),
    (["report", "dup.json"], "appears twice"),
    (["gate", "--policy", "policy_ok.yaml", "array.json"], "JSON object"),
    (["report", "empty.json"], "not valid JSON"),
    (["report", "huge_string.json"], "results file 'huge_string.json'"),
    (["gate", "--policy", "policy_ok.yaml", "empty_targets.json"], "no rule applies"),
    (["gate", "--policy", "policy_synthetic_only.yaml", "results.json"], "no rule applies"),
    (["gate", "--policy", "policy_dup.yaml", "results.json"], "appears twice"),
    (["gate", "--policy", "policy_bomb.yaml", "results.json"], "expands to more than"),
    (["gate", "--policy", "policy_text_number.yaml", "results.json"], "rules.max_auc"),
    (["gate", "--policy", "policy_nan.yaml", "results.json"], "rules.max_auc"),
    (["gate", "--policy", "policy_inf.yaml", "results.json"], "rules.max_epsilon_lb"),
    (["gate", "--policy", "policy_bool.yaml", "results.json"], "rules.max_auc"),
    (["gate", "--policy", "policy_empty.yaml", "results.json"], "empty"),
    (["gate", "--policy", "policy_no_rules.yaml", "results.json"], "sets no rule"),
    (["gate", "--policy", "policy_list.yaml", "results.json"], "mapping"),
    (["gate", "--policy", "policy_deep.yaml", "results.json"], "policy file"),
    (["gate", "--policy", "policy_ok.yaml", "results.json", "--out", "a_file"], "--out"),
    (["report", "results.json", "--out", "a_file/sub"], "--out"),
    (["gate", "--policy", "binary.yaml", "results.json"], "binary.yaml"),
    # --- audit-scores ----------------------------------------------------------------------------------
    (["audit-scores", "two_rows.csv"], "needs ≥ 4 members"),
    (["audit-scores", "text_labels_scores.csv"], "column 'label'"),
    (["audit-scores", "inf_label_scores.csv"], "column 'label'"),
    (["audit-scores", "many_labels_scores.csv"], "distinct classes"),
    (["audit-scores", "inf_score.csv"], "column 'score'"),
    (["audit-scores", "huge_score.csv"], "column 'score'"),
    (["audit-scores", "text_member.csv"], "column 'member'"),
    (["audit-scores", "half_member.csv"], "column 'member'"),
    (["audit-scores", "scores_dup.csv"], "column 'score': appears more than once"),
    (["audit-scores", "scores.csv", "--claimed-epsilon", "inf"], "--claimed-epsilon"),
    (["audit-scores", "scores.csv", "--claimed-epsilon", "nan"], "--claimed-epsilon"),
    (["audit-scores", "scores.csv", "--delta", "0"], "--delta"),
    (["audit-scores", "scores.csv", "--delta", "1e-300"], "--delta"),
    (["audit-scores", "scores.csv", "--confidence", "1"], "--confidence"),
    (["audit-scores", "scores.csv", "--confidence", "nan"], "--confidence"),
    (["audit-scores", "scores.csv", "--tracking-uri", "sqlite:////nonexistent_privacy_audit/x.db"], "does not exist"),
    (["audit-scores", "scores.csv", "--out", "a_file/sub"], "--out"),
    (["audit-scores", "data.txt"], "data.txt"),
    # --- accountants -----------------------------------------------------------------------------------
    (["accountants", "--noise-multiplier", "inf", "--sample-rate", "0.01", "--steps", "10"], "--noise-multiplier"),
    (["accountants", "--noise-multiplier", "nan", "--sample-rate", "0.01", "--steps", "10"], "--noise-multiplier"),
    (["accountants", "--noise-multiplier", "1e-9", "--sample-rate", "0.01", "--steps", "10"], "--noise-multiplier"),
    (["accountants", "--noise-multiplier", "1", "--sample-rate", "0.01", "--steps", "1e23"], "--steps"),
    (
        ["accountants", "--noise-multiplier", "1", "--sample-rate", "0.01", "--steps", "100000000000000000000000"],
        "--steps",
    ),
    (["accountants", "--noise-multiplier", "1", "--sample-rate", "0.01", "--steps", "1000000000"], "--steps"),
    (["accountants", "--noise-multiplier", "1", "--sample-rate", "nan", "--steps", "10"], "--sample-rate"),
    (["accountants", "--noise-multiplier", "1", "--sample-rate", "0", "--steps", "10"], "--sample-rate"),
    (["accountants", "--noise-multiplier", "1", "--sample-rate", "0.01", "--steps", "10", "--delta", "0"], "--delta"),
    (
        ["accountants", "--noise-multiplier", "1", "--sample-rate", "0.01", "--steps", "10", "--delta", "1e-300"],
        "--delta",
    ),
    (
        ["accountants", "--noise-multiplier", "1", "--sample-rate", "0.01", "--steps", "10", "--timeout", "0"],
        "--timeout",
    ),
    # inside the ranges but beyond what can be computed (Opacus's PRV grid would need petabytes): exit 2 naming the
    # steps, never a crash or a hang — "ran out of memory" where the worker gets that far within the 1 s, else the
    # timeout's "did not return within 1 s" (which comes first depends on the worker's start-up)
    (
        ["accountants", "--noise-multiplier", "0.1", "--sample-rate", "1", "--steps", "10000000", "--timeout", "1"],
        "10000000",
    ),
    # --- accountant-check: user code isolated ----------------------------------------------------------
    (["accountant-check", "--accountant", "user_hostile:acc_exit0", "--grid", "grid_one.yaml"], "sys.exit(0)"),
    (["accountant-check", "--accountant", "exits_on_import:f", "--grid", "grid_one.yaml"], "sys.exit(0)"),
    (
        ["accountant-check", "--accountant", "user_hostile:acc_sleeps", "--grid", "grid_one.yaml", "--timeout", "3"],
        "did not return within 3 s",
    ),
    (["accountant-check", "--accountant", "user_hostile:acc_inf", "--margin", "inf"], "--margin"),
    (["accountant-check", "--accountant", "user_hostile:acc_inf", "--margin", "nan"], "--margin"),
    (["accountant-check", "--accountant", "user_hostile:acc_inf", "--timeout", "-1"], "--timeout"),
    (["accountant-check", "--accountant", "user_hostile:acc_inf", "--grid", "grid_nan.yaml"], "noise_multipliers"),
    (["accountant-check", "--accountant", "user_hostile:acc_inf", "--grid", "grid_text.yaml"], "steps"),
    (["accountant-check", "--accountant", "user_hostile:acc_inf", "--grid", "grid_dup.yaml"], "appears twice"),
    (["accountant-check", "--accountant", "user_hostile:acc_inf", "--grid", "grid_huge_steps.yaml"], "steps"),
    (
        ["accountant-check", "--accountant", "user_hostile:acc_inf", "--grid", "grid_tiny_sigma.yaml"],
        "noise_multiplier",
    ),  # the grid names the parameter, not the flag
    (["accountant-check", "--accountant", "user_hostile:acc_inf", "--grid", "grid_list.yaml"], "mapping"),
    (["accountant-check", "--accountant", "user_hostile:acc_inf", "--grid", "bomb.yaml"], "expands to more than"),
    (
        [
            "accountant-check",
            "--accountant",
            "user_hostile:acc_inf",
            "--tracking-uri",
            "sqlite:////nonexistent_privacy_audit/x.db",
        ],
        "does not exist",
    ),
    (["accountant-check", "--accountant", "a:b:c"], "module:function"),
    (["accountant-check", "--accountant", "x" * 5000 + ":f"], "module:function"),
    # accountants that misbehave without exiting are findings (exit 1) or vacuous (exit 0), never crashes
    (["accountant-check", "--accountant", "user_hostile:acc_inf", "--grid", "grid_one.yaml"], 0),
    # --- mechanism-audit -------------------------------------------------------------------------------
    (
        [
            "mechanism-audit",
            "--mechanism",
            "user_hostile:mech_zero_division",
            "--claimed-epsilon",
            "1",
            "--delta",
            "0",
            "--trials",
            "40",
        ],
        "ZeroDivisionError",
    ),
    (
        [
            "mechanism-audit",
            "--mechanism",
            "user_hostile:mech_exit0",
            "--claimed-epsilon",
            "1",
            "--delta",
            "0",
            "--trials",
            "40",
        ],
        "sys.exit(0)",
    ),
    (
        [
            "mechanism-audit",
            "--mechanism",
            "user_hostile:mech_inf",
            "--claimed-epsilon",
            "1",
            "--delta",
            "0",
            "--trials",
            "40",
        ],
        "non-finite",
    ),
    (
        [
            "mechanism-audit",
            "--mechanism",
            "no_datasets:mech",
            "--claimed-epsilon",
            "1",
            "--delta",
            "0",
            "--trials",
            "40",
        ],
        "DATASETS",
    ),
    (["mechanism-audit", "--mechanism", "user_hostile:mech_inf", "--claimed-epsilon", "inf"], "--claimed-epsilon"),
    (["mechanism-audit", "--mechanism", "user_hostile:mech_inf", "--claimed-epsilon", "-1"], "--claimed-epsilon"),
    (["mechanism-audit", "--mechanism", "user_hostile:mech_inf", "--claimed-epsilon", "1", "--delta", "1"], "--delta"),
    (["mechanism-audit", "--mechanism", "user_hostile:mech_inf", "--trials", "2"], "--trials"),
    (["mechanism-audit", "--mechanism", "user_hostile:mech_inf", "--seed", "-1"], "--seed"),
    (["mechanism-audit", "--mechanism", "user_hostile:mech_inf", "--seed", "100000000000000000000000000"], "--seed"),
    (["mechanism-audit", "--mechanism", "user_hostile:mech_inf", "--timeout", "nan"], "--timeout"),
    # --- canary-audit (the trainer's isolation is issue 11's; these are refused before training) ------
    (["canary-audit", "--trainer", "exits_on_import:f"], "sys.exit(0)"),
    (["canary-audit", "--trainer", "a:b:c"], "module:function"),
    (["canary-audit", "--trainer", "audit.demos.dp_trainers:correct_dpsgd", "--mode", "sideways"], "--mode"),
    # --- bench -----------------------------------------------------------------------------------------
    (["bench", "--threads", "100000"], "--threads"),
    (["bench", "--threads", "0"], "--threads"),
    (["bench", "--models", "100000000"], "--models"),
    (["bench", "--epochs", "0"], "--epochs"),
    (["bench", "--epochs", "1000000"], "--epochs"),
    (["bench", "--device", "tpu"], "tpu"),
    # --- synth-check -----------------------------------------------------------------------------------
    (
        ["synth-check", "--train", "s_train.csv", "--holdout", "s_holdout.csv", "--synthetic", "s_huge.csv"],
        "column 'age'",
    ),
    (
        ["synth-check", "--train", "s_huge.csv", "--holdout", "s_holdout.csv", "--synthetic", "s_train.csv"],
        "column 'age'",
    ),
    (
        ["synth-check", "--train", "s_train.csv", "--holdout", "s_holdout.csv", "--synthetic", "s_inf.csv"],
        "column 'age'",
    ),
    (["synth-check", "--train", "s_train.csv", "--holdout", "s_holdout.csv", "--synthetic", "s_list.parquet"], "list"),
    (
        ["synth-check", "--train", "s_train.csv", "--holdout", "s_holdout.csv", "--synthetic", "s_dup.csv"],
        "column 'age': appears more than once",
    ),
    (["synth-check", "--train", "s_train.csv", "--holdout", "s_holdout.csv", "--synthetic", "s_extra.csv"], "zip"),
    (
        [
            "synth-check",
            "--train",
            "s_train.csv",
            "--holdout",
            "s_holdout.csv",
            "--synthetic",
            "s_bigholdout.csv",
            "--delta",
            "0",
        ],
        "--delta",
    ),
    (
        [
            "synth-check",
            "--train",
            "s_train.csv",
            "--holdout",
            "s_holdout.csv",
            "--synthetic",
            "s_bigholdout.csv",
            "--seed",
            "-1",
        ],
        "--seed",
    ),
    (
        [
            "synth-check",
            "--train",
            "s_train.csv",
            "--holdout",
            "s_holdout.csv",
            "--synthetic",
            "s_bigholdout.csv",
            "--claimed-epsilon",
            "inf",
        ],
        "--claimed-epsilon",
    ),
    (
        [
            "synth-check",
            "--train",
            "s_train.csv",
            "--holdout",
            "s_holdout.csv",
            "--synthetic",
            "s_bigholdout.csv",
            "--tracking-uri",
            "sqlite:////nonexistent_privacy_audit/x.db",
        ],
        "does not exist",
    ),
    (
        [
            "synth-check",
            "--train",
            "s_train.csv",
            "--holdout",
            "s_holdout.csv",
            "--synthetic",
            "s_bigholdout.csv",
            "--policy",
            "policy_dup.yaml",
        ],
        "appears twice",
    ),
    (
        ["synth-check", "--train", "s_train.csv", "--holdout", "s_holdout.csv", "--synthetic", "missing.parquet"],
        "missing.parquet",
    ),
    # --- audit-model -----------------------------------------------------------------------------------
    (
        [
            "audit-model",
            "--weights",
            "garbage.pt",
            "--members",
            "members_dup.csv",
            "--nonmembers",
            "members_ok.csv",
            "--label",
            "y",
            "--claimed-epsilon",
            "inf",
        ],
        "column 'x': appears more than once",
    ),
    (
        [
            "audit-model",
            "--weights",
            "garbage.pt",
            "--members",
            "members_hugelabel.csv",
            "--nonmembers",
            "members_ok.csv",
            "--label",
            "y",
            "--claimed-epsilon",
            "inf",
        ],
        "class indices below",
    ),
    (
        [
            "audit-model",
            "--weights",
            "garbage.pt",
            "--members",
            "members_neglabel.csv",
            "--nonmembers",
            "members_ok.csv",
            "--label",
            "y",
            "--claimed-epsilon",
            "inf",
        ],
        "class indices",
    ),
    (
        [
            "audit-model",
            "--weights",
            "garbage.pt",
            "--members",
            "members_ok.csv",
            "--nonmembers",
            "members_ok.csv",
            "--label",
            "y",
            "--claimed-epsilon",
            "0.000001",
        ],
        "privacy.epsilons",
    ),
    (
        [
            "audit-model",
            "--weights",
            "garbage.pt",
            "--members",
            "members_ok.csv",
            "--nonmembers",
            "members_ok.csv",
            "--label",
            "y",
            "--claimed-epsilon",
            "inf",
            "--config",
            "dup_key.yaml",
        ],
        "appears twice",
    ),
    (
        [
            "audit-model",
            "--weights",
            "garbage.pt",
            "--members",
            "members_ok.csv",
            "--nonmembers",
            "members_ok.csv",
            "--label",
            "y",
            "--claimed-epsilon",
            "inf",
            "--tracking-uri",
            "sqlite:////nonexistent_privacy_audit/x.db",
        ],
        "does not exist",
    ),
]

ALL_CASES = [(args, message, 2) for args, message in CASES] + [
    (
        args,
        expected if isinstance(expected, str) else None,
        expected if isinstance(expected, int) else (0 if expected is None else 2),
    )
    for args, expected in HOSTILE_CASES
]
# Cases that start worker processes or train get more time; everything else is validation.
SLOW_SECONDS, FAST_SECONDS = 90.0, 20.0


def _limit(args: list[str]) -> float:
    return (
        SLOW_SECONDS
        if args[0] in ("accountant-check", "mechanism-audit", "accountants") or "huge_label.yaml" in args
        else FAST_SECONDS
    )


@pytest.fixture(scope="module")
def input_files(tmp_path_factory):
    """Every input file, written once; each case gets a fresh folder of links to them."""
    folder = tmp_path_factory.mktemp("inputs")
    for name, frame in DATA.items():
        frame.to_csv(folder / name, index=False)
    for name, text in FILES.items():
        (folder / name).write_text(text)
    pd.DataFrame({"age": [[1], [2]] * 50, "city": ["a", "b"] * 50}).to_parquet(folder / "s_list.parquet")
    results = json.loads(RESULTS_EXAMPLE.read_text())
    (folder / "results.json").write_text(json.dumps(results))
    (folder / "empty_targets.json").write_text(json.dumps({**results, "targets": [], "synthetic": []}))
    (folder / "grid_one.yaml").write_text(
        "noise_multipliers: [1.0]\nsample_rates: [0.01]\nsteps: [10]\ndeltas: [1.0e-5]\n"
    )
    return folder


@pytest.fixture
def workdir(input_files, tmp_path, monkeypatch):
    for path in input_files.iterdir():
        (tmp_path / path.name).symlink_to(path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _left_behind(workdir: Path) -> list[str]:
    """Run folders (finished or staging) and MLflow stores under the working directory."""
    runs = workdir / "runs"
    found = [str(p.relative_to(workdir)) for p in runs.iterdir()] if runs.is_dir() else []
    return found + [name for name in ("mlflow.db", "mlartifacts") if (workdir / name).exists()]


def _run_main(args):
    started = time.monotonic()
    with pytest.raises(SystemExit) as exited:
        main(args)
    return exited.value.code, time.monotonic() - started


@pytest.mark.parametrize("args, message", CASES, ids=[" ".join(a)[:80] for a, _ in CASES])
def test_bad_input_exits_2_with_one_message_naming_the_problem(workdir, capsys, args, message):
    code, _ = _run_main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err
    assert err.startswith("error:") and err.count("\n") == 1  # exactly one line
    assert "Traceback" not in err
    assert _left_behind(workdir) == []  # nothing half-written, the tracking store untouched


HOSTILE_IDS = [" ".join(a)[:90] for a, _ in HOSTILE_CASES]


@pytest.mark.parametrize("args, expected", HOSTILE_CASES, ids=HOSTILE_IDS)
def test_hostile_input_never_crashes_hangs_or_passes_by_accident(workdir, capsys, args, expected):
    if "huge_label.yaml" in args:
        pytest.skip("valid input that trains a full run: covered by test_a_huge_class_label_is_only_a_name")
    code, seconds = _run_main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "Traceback" not in out
    assert seconds < _limit(args), f"took {seconds:.0f} s"
    if isinstance(expected, str) or expected is None:
        assert code == 2, err
        assert expected in err, err
        assert err.startswith("error:") and err.count("\n") == 1, err  # one line, never a bomb
        assert len(err) < 1200
        assert _left_behind(workdir) == []
    else:
        assert code == expected, err
        left = _left_behind(workdir)
        assert [p for p in left if p.endswith(".partial")] == []  # no staging folder left
        assert any(p.startswith("runs/") for p in left)  # a finished run folder
    assert not Path("/nonexistent_privacy_audit").exists()


def test_the_battery_covers_at_least_150_cases_across_every_command():
    commands = {args[0] for args, _, _ in ALL_CASES}
    assert len(ALL_CASES) >= 150
    assert commands >= {
        "run",
        "gate",
        "report",
        "audit-scores",
        "accountants",
        "accountant-check",
        "canary-audit",
        "mechanism-audit",
        "bench",
        "audit-model",
        "synth-check",
    }


def test_a_refused_anchor_bomb_message_is_short(workdir, capsys):
    for args in (["run", "--config", "bomb.yaml"], ["gate", "--policy", "policy_bomb.yaml", "results.json"]):
        code, seconds = _run_main(args)
        err = capsys.readouterr().err
        assert code == 2 and len(err) < 300 and seconds < FAST_SECONDS


def test_resume_latest_matches_the_exact_audit_name(workdir, capsys):
    # An interrupted run of the audit `my-smoke` must not be taken for one of `smoke`.
    staging = workdir / "runs" / ".20260101T000000Z-my-smoke.partial"
    staging.mkdir(parents=True)
    (staging / "config.yaml").write_text("name: my-smoke\n")
    code, _ = _run_main(["run", "--preset", "smoke", "--resume", "latest", "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and "no interrupted run named 'smoke'" in err


def test_run_dry_run_validates_everything_and_writes_nothing(workdir, capsys):
    code, _ = _run_main(["run", "--preset", "smoke", "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0 and "nothing written" in out
    assert _left_behind(workdir) == [] and not (workdir / "runs").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_gate_into_a_read_only_folder_is_bad_input(workdir, capsys):
    locked = workdir / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    code, _ = _run_main(["gate", "--policy", "policy_ok.yaml", "results.json", "--out", str(locked)])
    assert code == 2 and "--out" in capsys.readouterr().err


def test_staging_folders_are_created_exclusively_under_a_race(tmp_path):
    # Forty runs started in the same second: each gets its own folder (no check-then-mkdir race).
    from concurrent.futures import ThreadPoolExecutor

    from audit.machinery.run_directory import StagedRunDirectory

    def create(_):
        return StagedRunDirectory(tmp_path, "race").create()

    with ThreadPoolExecutor(8) as pool:
        folders = list(pool.map(create, range(40)))
    assert len(set(folders)) == 40 and all(folder.is_dir() for folder in folders)


def test_a_huge_class_label_is_only_a_name_in_a_run(workdir):
    # Labels 0 and 1e11 are two classes; the model head has two outputs, not 10¹¹ (no allocation bomb).
    from audit.machinery.config import resolve_config
    from targets.datasets import load_dataset

    config = resolve_config("smoke", "huge_label.yaml")
    data = load_dataset(
        config.data.source, n_rows=config.data.n_rows, seed=0, path=config.data.path, label=config.data.label
    )
    assert data.n_classes == 2
