"""Hostile sizes and environments (issue 26): absurd counts, numbers past float32, configs that used
to crash late, options that cannot apply, inputs that pass for data, and file names that carry
terminal escapes. Every count is checked against one range table (audit/machinery/limits.py)
before work starts, with the memory it implies; each case is exit 2, one line naming the option,
field or file, nothing written. docs/errors.md shows the same table (checked here)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hostile_support import assert_refused

from audit.machinery.limits import COUNT_LIMITS, limits_table_markdown, max_workers

DOCS = Path(__file__).resolve().parents[1] / "docs" / "errors.md"
TRAINER = "audit.demos.dp_trainers:correct_dpsgd"
HUGE_WORKERS = str(10**9)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    for name in ("members", "nonmembers"):
        frame = pd.DataFrame(rng.normal(size=(40, 3)), columns=["a", "b", "c"])
        frame["y"] = (frame["a"] > 0).astype(int)
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
    for value, name in ((1e39, "f32_1e39"), (-1e50, "f32_neg"), (3.5e38, "f32_edge"), (1e100, "f32_1e100")):
        frame = pd.read_csv(tmp_path / "members.csv")
        frame.loc[7, "b"] = value
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
    import torch

    torch.save({"w": torch.zeros(2)}, tmp_path / "w.pt")
    train = pd.DataFrame({"age": rng.integers(18, 90, 200), "city": rng.choice(["a", "b", "c"], 200)})
    train.to_csv(tmp_path / "train.csv", index=False)
    pd.DataFrame({"age": rng.integers(18, 90, 200), "city": rng.choice(["a", "b", "c"], 200)}).to_csv(
        tmp_path / "holdout.csv", index=False
    )
    train.to_csv(tmp_path / "train_copy.csv", index=False)
    pd.concat([train.iloc[:100], pd.read_csv(tmp_path / "holdout.csv").iloc[:100]]).to_csv(
        tmp_path / "half_overlap.csv", index=False
    )
    (tmp_path / "train_link.csv").symlink_to(tmp_path / "train.csv")
    (tmp_path / "synthetic.csv").write_text((tmp_path / "holdout.csv").read_text())
    (tmp_path / "policy.yaml").write_text("rules:\n  max_auc: 0.9\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


CANARY = ["canary-audit", "--trainer", TRAINER]
COUNT_CASES = [
    (CANARY + ["--rows", str(10**12)], "--rows"),
    (CANARY + ["--rows", str(COUNT_LIMITS["--rows"].high + 1)], "--rows"),
    (CANARY + ["--rows", "19"], "--rows"),
    (CANARY + ["--rows", "-5"], "--rows"),
    (CANARY + ["--mode", "multi-canary", "--canaries", str(10**12)], "--canaries"),
    (CANARY + ["--mode", "one-run", "--canaries", str(10**12)], "--canaries"),
    (CANARY + ["--mode", "one-run", "--canaries", str(COUNT_LIMITS["--canaries"].high + 1)], "--canaries"),
    (CANARY + ["--models", str(10**20)], "--models"),
    (CANARY + ["--mode", "multi", "--models", str(10**12)], "--models"),
    (CANARY + ["--models", str(COUNT_LIMITS["--models"].high + 1)], "--models"),
    (CANARY + ["--mode", "multi-canary", "--models", str(10**7), "--canaries", str(10**5)], "--models"),  # memory
    (CANARY + ["--workers", HUGE_WORKERS], "--workers"),
    (CANARY + ["--workers", str(max_workers() + 1)], "--workers"),
    (CANARY + ["--workers", "0"], "--workers"),
    (CANARY + ["--workers", "-3"], "--workers"),
    (CANARY + ["--executor", "local", "--workers", "4"], "--workers"),
    (["whitebox-audit", "--builtin", "--noise-multiplier", "1", "--workers", HUGE_WORKERS], "--workers"),
    (["whitebox-audit", "--builtin", "--noise-multiplier", "1", "--workers", "0"], "--workers"),
    (["whitebox-audit", "--builtin", "--noise-multiplier", "1", "--runs", str(10**8)], "--runs"),
    (["whitebox-audit", "--builtin", "--noise-multiplier", "1", "--runs", str(10**7), "--steps", "100000"], "--runs"),
    (["whitebox-audit", "--builtin", "--noise-multiplier", "1", "--steps", str(10**9)], "--steps"),
    (["mechanism-audit", "--mechanism", "audit.demos.mechanisms:laplace_count", "--trials", str(10**12)], "--trials"),
    (["mechanism-audit", "--mechanism", "audit.demos.mechanisms:laplace_count", "--trials", "3"], "--trials"),
    (["accountants", "--noise-multiplier", "1", "--sample-rate", "0.01", "--steps", str(10**12)], "--steps"),
    (["bench", "--models", str(10**9)], "--models"),
    (["bench", "--epochs", str(10**9)], "--epochs"),
    (["run", "--preset", "smoke", "--workers", HUGE_WORKERS, "--dry-run"], "--workers"),
    (["run", "--preset", "smoke", "--workers", "0", "--dry-run"], "--workers"),
    (
        [
            "audit-model",
            "--weights",
            "w.pt",
            "--members",
            "members.csv",
            "--nonmembers",
            "nonmembers.csv",
            "--label",
            "y",
            "--claimed-epsilon",
            "inf",
            "--workers",
            HUGE_WORKERS,
        ],
        "--workers",
    ),
]


@pytest.mark.parametrize("args, names", COUNT_CASES, ids=[" ".join(a)[:90] for a, _ in COUNT_CASES])
def test_an_absurd_count_is_refused_before_work_starts(workdir, capsys, args, names):
    assert_refused(capsys, args, names, folder=workdir, limit=60)


FEDERATED_CASES = {
    "rounds 10⁹": ("rounds: 1000000000", "federated.rounds"),
    "rounds 0": ("rounds: 0", "federated.rounds"),
    "10,000 clients": ("n_clients: 10000", "federated.n_clients"),
    "1000 clients on 2400 rows": ("n_clients: 1000", "federated.n_clients"),
    "server_lr 10⁶": ("server_lr: 1000000.0", "federated.server_lr"),
    "server_lr 1e-300": ("server_lr: 1.0e-300", "federated.server_lr"),
    "client sample rate 1e-300": ("client_sample_rate: 1.0e-300", "federated.client_sample_rate"),
    "Dirichlet α 1e-300": ("dirichlet_alpha: 1.0e-300", "federated.dirichlet_alpha"),
    "Dirichlet α leaving clients empty": ("dirichlet_alpha: 0.001\n  n_clients: 200", "federated"),
    "client clip 10⁹": ("client_clip: 1000000000.0", "federated.client_clip"),
    "10⁶ reference federations": ("n_reference_federations: 1000000", "federated.n_reference_federations"),
    "10⁹ client MIA runs": ("client_mia_runs: 1000000000", "federated.client_mia_runs"),
    "partition feature 10⁹": ("partition_feature: 1000000000", "federated.partition_feature"),
}


@pytest.mark.parametrize("case", list(FEDERATED_CASES))
def test_a_federated_config_that_would_crash_late_is_refused_up_front(workdir, capsys, case):
    text, names = FEDERATED_CASES[case]
    (workdir / "fed.yaml").write_text(f"federated:\n  {text}\n")
    err = assert_refused(
        capsys,
        ["run", "--preset", "clients", "--config", "fed.yaml", "--tracking-uri", f"sqlite:///{workdir}/m.db"],
        names,
        folder=workdir,
        limit=120,
    )
    assert "resume with" not in err


@pytest.mark.parametrize("name, column", [("f32_1e39", "b"), ("f32_neg", "b"), ("f32_edge", "b"), ("f32_1e100", "b")])
def test_numbers_past_float32_are_checked_in_the_dtype_used(workdir, capsys, name, column):
    err = assert_refused(
        capsys,
        [
            "audit-model",
            "--weights",
            "w.pt",
            "--members",
            f"{name}.csv",
            "--nonmembers",
            "nonmembers.csv",
            "--label",
            "y",
            "--claimed-epsilon",
            "inf",
        ],
        f"{name}.csv",
        folder=workdir,
    )
    assert f"column '{column}'" in err


def test_an_option_that_cannot_apply_is_refused(workdir, capsys):
    assert_refused(
        capsys,
        [
            "audit-model",
            "--weights",
            "w.pt",
            "--members",
            "members.csv",
            "--nonmembers",
            "nonmembers.csv",
            "--label",
            "y",
            "--claimed-epsilon",
            "inf",
            "--trainer",
            "pkg:train",
        ],
        "--trainer",
        folder=workdir,
    )


SYNTH_CASES = [
    (["--train", "train.csv", "--holdout", "train.csv", "--synthetic", "synthetic.csv"], "--holdout"),
    (["--train", "train.csv", "--holdout", "train_link.csv", "--synthetic", "synthetic.csv"], "--holdout"),
    (["--train", "train.csv", "--holdout", "holdout.csv", "--synthetic", "holdout.csv"], "--synthetic"),
    (["--train", "train.csv", "--holdout", "train_copy.csv", "--synthetic", "synthetic.csv"], "train_copy.csv"),
    (["--train", "train.csv", "--holdout", "half_overlap.csv", "--synthetic", "synthetic.csv"], "half_overlap.csv"),
    (["--train", "train.csv", "--holdout", "train.csv", "--synthetic", "train.csv"], "--holdout"),
]


@pytest.mark.parametrize("args, names", SYNTH_CASES, ids=[" ".join(a) for a, _ in SYNTH_CASES])
def test_a_holdout_that_is_not_one_is_refused(workdir, capsys, args, names):
    assert_refused(capsys, ["synth-check", *args], names, folder=workdir)


ESCAPES = ["\x1b[2J\x1b[H", "\x1b]0;owned\x07", "\x9b31m", "\u202e", "a\rb", "\x07bell"]


@pytest.mark.parametrize("escape", ESCAPES, ids=[repr(e) for e in ESCAPES])
@pytest.mark.parametrize("command", ["gate", "report", "run", "audit-scores", "synth-check"])
def test_control_characters_in_a_file_name_are_escaped(workdir, capsys, escape, command):
    name = f"bad{escape}name"
    args = {
        "gate": ["gate", f"{name}.json", "--policy", "policy.yaml"],
        "report": ["report", f"{name}.json"],
        "run": ["run", "--config", f"{name}.yaml", "--dry-run"],
        "audit-scores": ["audit-scores", f"{name}.csv"],
        "synth-check": [
            "synth-check",
            "--train",
            f"{name}.csv",
            "--holdout",
            "holdout.csv",
            "--synthetic",
            "synthetic.csv",
        ],
    }[command]
    err = assert_refused(capsys, args, "bad", folder=workdir)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", err), repr(err)


def test_docs_list_every_limit_of_the_range_table():
    text = DOCS.read_text(encoding="utf-8")
    for row in limits_table_markdown():
        assert row in text, f"docs/errors.md lacks the row: {row}"
    assert "isolation boundary" in text.lower()


def test_the_limits_battery_is_large():
    assert len(COUNT_CASES) + len(FEDERATED_CASES) + len(SYNTH_CASES) + len(ESCAPES) * 5 >= 70
    assert os.cpu_count()


@pytest.mark.parametrize(
    "text",
    [
        "attempt to write a readonly database",
        "(sqlite3.OperationalError) readonly database",
        "[Errno 30] Read-only file system: 'mlruns'",
    ],
)
def test_a_read_only_tracking_store_is_one_line_exit_2(text):
    """Root writes through file permissions, so the store's own refusal is what reaches the tracker
    here: every MLflow call goes through `_with_lock_retries`, which names the store, once."""
    from audit.errors import AuditInputError
    from audit.machinery.tracking import _with_lock_retries

    def refuse():
        raise RuntimeError(text)

    with pytest.raises(AuditInputError, match="read-only") as info:
        _with_lock_retries(refuse)
    assert info.value.where == "--tracking-uri" and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "exc, shown",
    [
        (RuntimeError("bug"), "stopped by an error"),
        (KeyboardInterrupt(), "interrupted; finished pieces are kept: resume with"),
    ],
)
def test_a_crash_never_prints_the_interrupt_message(tmp_path, exc, shown):
    from audit.machinery.run_directory import StagedRunDirectory, run_attempt

    notes = []

    class _Progress:
        def note(self, text):
            notes.append(text)

    run_dir = StagedRunDirectory(tmp_path / "runs", "x")
    run_dir.create()
    with pytest.raises(type(exc)), run_attempt(run_dir, None, _Progress()):
        raise exc
    assert len(notes) == 1 and notes[0].startswith(shown)
    if not isinstance(exc, KeyboardInterrupt):
        assert "resume with" not in notes[0]
