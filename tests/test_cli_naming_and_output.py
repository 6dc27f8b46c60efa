"""Small things a first-time user sees: run names, unwrapped output off a terminal, where `gate` writes,
where a crash log goes, what the lenient policy's comment promises, command summaries, one ceiling."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pandas as pd
import pytest

from audit.cli import main
from tests.conftest import REPO


def _invoke(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as ended:
        main(list(args))
    out = capsys.readouterr()
    return ended.value.code, out.out, out.err


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(REPO)
    return env


# --- audit-model names the run after the model ------------------------------------------------


def test_audit_name_for_model_keeps_the_model_name_within_the_config_pattern():
    from audit.cli.model_commands import audit_name_for_model

    assert audit_name_for_model("forest.skops") == "forest"
    assert audit_name_for_model("my_api:predict_class") == "my_api-predict_class"
    assert audit_name_for_model("weird name (v2).onnx") == "weird-name-v2"
    assert audit_name_for_model("...") == "model"
    assert len(audit_name_for_model("x" * 200 + ".pt")) == 64


def test_audit_model_names_its_run_and_folder_after_the_model_not_a_preset(capsys, tmp_path):
    import skops.io
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    frames = []
    for name in ("members", "nonmembers"):
        frame = pd.DataFrame(rng.normal(size=(60, 3)), columns=["a", "b", "c"])
        frame["y"] = (frame["a"] > 0).astype(int)
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
        frames.append(frame)
    model = LogisticRegression().fit(frames[0][["a", "b", "c"]].to_numpy(), frames[0]["y"].to_numpy())
    skops.io.dump(model, tmp_path / "churn-model.skops")
    code, out, err = _invoke(
        capsys,
        "audit-model",
        "--skops",
        str(tmp_path / "churn-model.skops"),
        "--members",
        str(tmp_path / "members.csv"),
        "--nonmembers",
        str(tmp_path / "nonmembers.csv"),
        "--label",
        "y",
        "--claimed-epsilon",
        "inf",
        "--attacks",
        "loss",
        "--quiet",
        "--out",
        str(tmp_path / "runs"),
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'mlflow.db'}",
    )
    assert code in (0, 1), err
    folders = [p.name for p in (tmp_path / "runs").iterdir()]
    assert len(folders) == 1 and folders[0].endswith("-churn-model"), folders
    assert "privacy-audit: churn-model" in out and "smoke" not in out and "privacy-audit: default" not in out
    results = json.loads((tmp_path / "runs" / folders[0] / "results.json").read_text())
    assert results["config"]["name"] == "churn-model"


# --- console output off a terminal --------------------------------------------------------------


def test_console_output_off_a_terminal_is_not_wrapped_mid_phrase():
    sentence = "an attacker who accepts 1 false accusation in 100 identifies 9.4 % of the training records (δ 1e-05)"
    code = (
        "from audit.cli.app import console, err_console\n"
        f"console.print({sentence!r} * 3)\nerr_console.print({sentence!r} * 3)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == sentence * 3  # one line, nothing inserted
    assert done.stderr.strip() == sentence * 3


def test_a_real_finding_piped_to_a_file_keeps_each_reason_on_one_line(tmp_path):
    shutil.copy(REPO / "examples" / "dp_trainer.py", tmp_path / "dp_trainer.py")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "audit.cli",
            "conformance",
            "--trainer",
            "dp_trainer:broken",
            "--out",
            str(tmp_path / "runs"),
            "--tracking-uri",
            f"sqlite:///{tmp_path / 'mlflow.db'}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=600,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    lines = (done.stdout + done.stderr).splitlines()
    # The reason naming the failed check, whatever words frame it, is whole on one line.
    failed = [
        line
        for line in lines
        if "per_example_clipping" in line and "mean movement" in line and not line.startswith(("│", "┃"))
    ]
    assert failed and all(line.rstrip().endswith("against ≤ C)") for line in failed), failed


# --- gate writes into the run folder --------------------------------------------------------------


def test_gate_without_out_writes_into_the_run_folder_and_nothing_where_it_is_called(capsys, tmp_path, monkeypatch):
    run = tmp_path / "runs" / "20260101T000000Z-smoke"
    run.mkdir(parents=True)
    shutil.copy(REPO / "tests" / "data" / "results_smoke_example.json", run / "results.json")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, _, err = _invoke(capsys, "gate", "--policy", str(REPO / "examples" / "policy-lenient.yaml"), str(run))
    assert code == 0, err
    assert {"junit.xml", "report.html", "summary.md"} <= {p.name for p in run.iterdir()}
    assert list(elsewhere.iterdir()) == []


# --- the crash log belongs to one invocation --------------------------------------------------------


def test_a_crash_log_never_lands_in_a_previous_commands_output_folder(capsys, tmp_path, monkeypatch):
    import audit.cli.presets_command as presets_command
    from audit.machinery.crash_log import set_log_folder

    previous = tmp_path / "previous-out"
    previous.mkdir()
    set_log_folder(previous)  # what an earlier command in this process left behind
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(own_tmp))

    def broken(name):
        raise RuntimeError("a bug")

    monkeypatch.setattr(presets_command, "preset_yaml", broken)
    code, _, err = _invoke(capsys, "presets", "show", "smoke")
    assert code == 3 and "internal error" in err
    assert list(previous.iterdir()) == []
    assert [p.name for p in own_tmp.iterdir() if p.name.startswith("privacy-audit-crash-")]


# --- the lenient policy does what its comment says -------------------------------------------------


def test_lenient_policy_fails_no_rule_on_smoke_and_default_but_their_verdict_stays_inconclusive():
    from audit.machinery.policy import load_policy
    from audit.machinery.verdict import verdict_for_results

    lenient = REPO / "audit" / "policies" / "policy-lenient.yaml"
    comment = lenient.read_text(encoding="utf-8")
    assert "INCONCLUSIVE" in comment and "fail_on_inconclusive" in comment
    policy = load_policy(lenient)
    assert policy.rules.fail_on_inconclusive in (None, False)  # as the comment says: not set
    for name in ("smoke", "default"):
        results = json.loads((REPO / "tests" / "data" / f"results_{name}_example.json").read_text())
        private = [a for t in results["targets"] if t["epsilon_target"] is not None for a in t["attacks"]]
        assert max(a["auc"] for a in private) <= 0.55  # "their DP targets give attack AUC ≤ 0.55"
        decided, evaluation = verdict_for_results(results, policy)
        assert evaluation.passed, [c.message for c in evaluation.failures]  # "no rule of it fails"
        assert decided["verdict"]["status"] == "inconclusive" and decided["verdict"]["passed"] is False


# --- command summaries and the white-box ceiling ----------------------------------------------------


def test_no_command_summary_is_cut_at_an_abbreviation():
    import typer.main

    from audit.cli import app

    for name, command in typer.main.get_command(app).commands.items():
        summary = command.get_short_help_str(limit=1000)
        assert not summary.endswith(("al.", "e.g.", "i.e.", "...")), (name, summary)
    whitebox = typer.main.get_command(app).commands["whitebox-audit"].get_short_help_str(limit=1000)
    assert whitebox.endswith("refute the claimed privacy.")


@pytest.mark.slow
def test_whitebox_audit_prints_each_tests_ceiling_once_and_no_second_overall_ceiling(capsys, tmp_path):
    code, out, err = _invoke(
        capsys,
        "whitebox-audit",
        "--builtin",
        "--noise-multiplier",
        "2",
        "--sample-rate",
        "1",
        "--steps",
        "4",
        "--runs",
        "100",
        "--workers",
        "1",
        "--quiet",
        "--out",
        str(tmp_path / "runs"),
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'mlflow.db'}",
    )
    assert code == 0, err
    lines = out.splitlines()
    assert not [line for line in lines if line.startswith("ceiling:")]
    checks = [line for line in lines if line.startswith("· ")]
    assert checks and all(line.count("at most") + line.count("could have shown up to") <= 1 for line in checks)
