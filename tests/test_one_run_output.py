"""Every one-run bound where users look (issue 27, item 2): with randomized membership, audit-scores
and synth-check print the f-DP one-run bound beside Steinke et al.'s, with its assumption and which
one decides, and results.json and report.html carry it."""

import json

import numpy as np
import pandas as pd
import pytest


@pytest.fixture
def cli(cli_in_process):
    """Commands run in this process (tests/conftest.py `run_cli_in_process`): these tests read what a
    command prints, writes and exits with; a fresh interpreter per call cost ~4-5 s of CPU in imports."""
    return cli_in_process


def _only_run_dir(root):
    (run_dir,) = [p for p in root.iterdir() if p.is_dir() and (p / "results.json").is_file()]
    return run_dir


def test_audit_scores_prints_both_one_run_bounds_and_says_which_decides(cli, tmp_path):
    rng = np.random.default_rng(0)
    members = rng.random(2000) < 0.5
    pd.DataFrame({"member": members.astype(int), "score": rng.normal(size=2000) + 2.0 * members}).to_csv(
        tmp_path / "s.csv", index=False
    )
    proc = cli(
        "audit-scores",
        "s.csv",
        "--membership-randomized",
        "--claimed-epsilon",
        "8",
        "--tracking-uri",
        f"sqlite:///{tmp_path}/m.db",
        "--out",
        "runs",
    )
    assert proc.returncode in (0, 1), proc.stderr
    line = next(text for text in proc.stdout.splitlines() if "one-run bounds" in text)
    assert "Steinke et al. ε ≥" in line and "(decides" in line
    assert "f-DP" in line and "Gaussian" in line and "shown only" in line
    run_dir = _only_run_dir(tmp_path / "runs")
    attack = json.loads((run_dir / "results.json").read_text())["targets"][0]["attacks"][0]
    fdp = attack["fdp_one_run"]
    assert fdp["decides"] is False and fdp["epsilon_gdp"] > attack["epsilon_lb"]["one_run"] > 0
    assert "Steinke" in attack["one_run_decision_rule"] and "Gaussian" in fdp["assumption"]
    assert "f-DP one run" in (run_dir / "report.html").read_text()


def test_without_randomized_membership_no_one_run_line_is_printed(cli, tmp_path):
    rng = np.random.default_rng(1)
    members = rng.random(600) < 0.5
    pd.DataFrame({"member": members.astype(int), "score": rng.normal(size=600)}).to_csv(tmp_path / "s.csv", index=False)
    proc = cli("audit-scores", "s.csv", "--tracking-uri", f"sqlite:///{tmp_path}/m.db", "--out", "runs")
    assert proc.returncode == 0, proc.stderr
    assert "one-run bounds" not in proc.stdout
    attack = json.loads((_only_run_dir(tmp_path / "runs") / "results.json").read_text())["targets"][0]["attacks"][0]
    assert attack["fdp_one_run"] is None
