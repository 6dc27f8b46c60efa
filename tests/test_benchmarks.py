"""The README's benchmark commands still run (tiny sizes: the numbers themselves are the benches' job)."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _bench(script: str, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", str(REPO / "benchmarks" / script), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _rows(table: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in table.splitlines()
        if line.startswith("| ") and not line.startswith("| trainer") and not line.startswith("| target")
    ]


@pytest.mark.slow
def test_the_one_run_tightness_bench_bounds_below_a_claim_it_does_not_refute():
    (row,) = _rows(_bench("bench_one_run_tightness.py", "--epsilons", "4", "--canaries", "2000", "--seeds", "1"))
    claim, steinke, fdp = float(row[2]), float(row[4]), float(row[6])
    assert 0 < steinke < fdp < claim and row[8] == "0 of 1"


@pytest.mark.slow
def test_the_dirac_tightness_bench_reports_both_bounds_below_the_claim():
    rows = _rows(_bench("bench_dirac_tightness.py", "--points", "4:400", "--workers", "1"))
    assert [r[3] for r in rows] == ["all iterates", "final model"]
    for r in rows:
        claim, gdp, cp = float(r[2]), float(r[5]), float(r[7])
        assert 0 <= cp <= gdp <= claim and r[10] == "pass"


@pytest.mark.slow  # ~15 s: 1800 thresholds × 2 run counts × 2 targets of Clopper-Pearson
def test_the_sound_bound_ceiling_grows_with_the_runs_and_stays_below_the_claim():
    rows = _rows(_bench("bench_dirac_tightness.py", "--points", "1:0", "4:0", "--sound-ceiling", "1000", "100000"))
    assert [r[0] for r in rows] == ["1", "4"]
    for r in rows:
        small, large = float(r[2]), float(r[3])
        assert 0 < small < large < 1  # a fraction of the claim, never above it


@pytest.mark.slow
def test_the_planted_bug_bench_audits_and_checks_conformance():
    out = _bench("bench_planted_bugs.py", "--only", "noise_divided_twice", "--models", "200", "--seeds", "0")
    (row,) = _rows(out)
    assert row[0] == "noise_divided_twice" and row[4] == "fail" and row[9] == "fail"
    assert "pilot margin below the claim's curve" in out and "shuffled_batches, final model" in out


@pytest.mark.slow  # a subprocess importing torch, pandas and sklearn: ~6 s on the shared machine
def test_the_synthetic_bench_times_every_stage_of_the_whole_check():
    out = _bench("bench_synthetic.py", "--n-synthetic", "400", "--n-train", "400", "--n-cols", "6", "--stages")
    assert "passed True" in out  # independent draws of one population: nothing to flag
    for stage in ("neighbours: synthetic × train", "risk: singling out", "risk: inference", "DCR vs random rows"):
        assert stage in out, out
