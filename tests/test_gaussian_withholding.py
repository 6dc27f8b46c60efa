"""Gaussian-family figures are withheld wherever the scores contradict a Gaussian trade-off curve
(issue 35, item 5): on randomized-response scores (ε₀ = 2, two values) no Gaussian-family ε above 2
appears anywhere — console, results.json, report.html, summary.md — and on Gaussian scores the
figures are still given. One rule (`gdp_fit.gaussian_family_figure`) applied where each is computed."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from audit.statistics.gdp_fit import gaussian_family_figure, gaussian_tradeoff_fit

EPS0 = 2.0


def randomized_response(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Coin-flip membership, answered truthfully with probability e^ε₀ / (1 + e^ε₀): exactly ε₀-DP."""
    rng = np.random.default_rng(seed)
    members = rng.random(n) < 0.5
    truthful = rng.random(n) < math.exp(EPS0) / (1 + math.exp(EPS0))
    return np.where(truthful, members, ~members).astype(float), members


def gaussian_shift(n: int, seed: int, mu: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    members = rng.random(n) < 0.5
    return rng.standard_normal(n) + mu * members, members


def test_the_rule_withholds_exactly_when_the_fit_check_rejects():
    scores, members = randomized_response(2000, 0)
    discrete = gaussian_tradeoff_fit(scores, members)
    assert discrete["withheld"] and "discrete" in discrete["reason"]
    assert gaussian_family_figure(3.7, discrete) is None
    scores, members = gaussian_shift(2000, 0)
    fitting = gaussian_tradeoff_fit(scores, members)
    assert not fitting["withheld"] and gaussian_family_figure(1.5, fitting) == 1.5


def test_the_fdp_gdp_family_figure_and_the_one_run_estimates_are_withheld_on_randomized_response():
    from audit.statistics.fdp_one_run import fdp_one_run_audit
    from audit.statistics.one_run_audit import one_run_claim_audit
    from audit.statistics.tradeoff_curves import pair_privacy_profile

    scores, members = randomized_response(2000, 1)
    fdp = fdp_one_run_audit(scores, members, None, delta=1e-5)
    assert fdp["gdp_epsilon"] is None and "discrete" in fdp["gdp_epsilon_withheld"]
    audit = one_run_claim_audit(
        scores, members, claimed_epsilon=4.0, delta=1e-5, profile=pair_privacy_profile(4.0, 1e-5)
    )
    assert audit["fdp"]["gdp_family_epsilon"] is None
    for key in ("gaussian_sum", "andrew"):
        assert audit[key]["epsilon"] is None and "discrete" in audit[key]["withheld"]
    # On a Gaussian shift (μ = 1) the same figures are given: the rule withholds only what the data contradict.
    scores, members = gaussian_shift(2000, 1)
    fdp = fdp_one_run_audit(scores, members, None, delta=1e-5)
    assert isinstance(fdp["gdp_epsilon"], float) and fdp["gdp_epsilon_withheld"] is None


# What a Gaussian-family ε looks like in the text outputs: a number after "GDP" / "Gaussian" words,
# the f-DP column of the one-run console line ("scores 2.00 / 3.70") and the report's "f-DP one run: 3.70".
TEXT_FIGURES = (
    re.compile(r"(?:GDP|Gaussian)[^\n<|]{0,40}?ε\s*(?:≥|≈|=)?\s*([0-9]+\.[0-9]+)"),
    re.compile(r"scores [0-9.]+ / ([0-9]+\.[0-9]+)"),
    re.compile(r"f-DP one run: ([0-9]+\.[0-9]+)"),
)


def _text_figures(text: str) -> list[float]:
    return [float(value) for pattern in TEXT_FIGURES for value in pattern.findall(text)]


def _json_figures(node, path: str = "") -> list[tuple[str, float]]:
    """Every number under a key naming a Gaussian-family figure (gdp, gaussian, andrew), its ε."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}"
            gaussian = re.search(r"gdp|gaussian|andrew", here, re.IGNORECASE)
            if (
                gaussian
                and re.search(r"epsilon", key)
                and isinstance(value, (int, float))
                and not isinstance(value, bool)
            ):
                found.append((here, float(value)))
            found += _json_figures(value, here)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _json_figures(value, f"{path}[{i}]")
    return found


def test_the_text_patterns_would_catch_the_figure_issue_35_saw():
    assert _text_figures("one-run f-DP test …: not refuted; GDP-family ε ≥ 3.400 (assumes a Gaussian …)") == [3.4]
    assert _text_figures("(shown only): scores 2.00 / 3.70; f-DP test") == [3.7]
    assert _json_figures({"fdp_one_run": {"epsilon_gdp": 3.7}}) == [(".fdp_one_run.epsilon_gdp", 3.7)]


@pytest.mark.slow  # one audit-scores run in-process: ~10 s of CPU
def test_randomized_response_scores_show_no_gaussian_family_epsilon_above_two_in_any_output(cli_in_process, tmp_path):
    scores, members = randomized_response(2000, 2)
    pd.DataFrame({"member": members.astype(int), "score": scores}).to_csv(tmp_path / "rr.csv", index=False)
    done = cli_in_process(
        "audit-scores",
        "rr.csv",
        "--membership-randomized",
        "--claimed-epsilon",
        "4",
        "--out",
        "runs",
        "--tracking-uri",
        f"sqlite:///{tmp_path}/m.db",
        "--quiet",
    )
    console = done.stdout + done.stderr
    assert done.returncode == 0, console
    (folder,) = [p for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")]
    results = json.loads((folder / "results.json").read_text())
    attack = results["targets"][0]["attacks"][0]
    assert attack["fdp_one_run"]["epsilon_gdp"] is None and attack["fdp_one_run"]["epsilon_gdp_withheld"]
    assert attack["epsilon_estimate_gdp"]["epsilon"] is None
    assert "withheld" in console  # said, not silently dropped
    assert [(k, v) for k, v in _json_figures(results) if v > EPS0] == []
    for name, text in (
        ("console", console),
        ("report.html", (folder / "report.html").read_text()),
        ("summary.md", (folder / "summary.md").read_text()),
    ):
        assert [v for v in _text_figures(text) if v > EPS0] == [], name
