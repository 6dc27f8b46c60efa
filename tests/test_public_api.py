"""The public API (`import audit`, audit/api.py): documented, cheap to import, and the CLI's numbers.

Each job is checked against the library function the CLI calls on the same input (the API adds no
number of its own), on real files; the leak / no-leak cases use data whose answer is known.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import audit
from tests.conftest import REPO

ESTIMATORS = (
    "epsilon_lower_bound_one_run",
    "one_run_epsilon_from_counts",
    "one_run_ceiling",
    "epsilon_lower_bound_clopper_pearson",
    "clopper_pearson_upper",
    "epsilon_from_error_rates",
    "fdp_one_run_audit",
    "epsilon_estimate_gdp",
    "gdp_mu_lower_bound",
    "epsilon_from_gdp_mu",
    "epsilon_pld",
)
JOBS = (
    "load_config",
    "run",
    "audit_scores",
    "audit_model",
    "synth_check",
    "canary_audit",
    "whitebox_audit",
    "one_run_whitebox_audit",
    "accountant_check",
)


def test_every_public_name_resolves_and_has_a_docstring():
    assert set(audit.__all__) == set(audit._EXPORTS) and len(audit.__all__) == len(set(audit.__all__))
    undocumented = [name for name in audit.__all__ if len((getattr(audit, name).__doc__ or "").strip()) < 20]
    assert undocumented == []
    assert set(JOBS) | set(ESTIMATORS) | {"AuditResult", "PrivacyClaim", "Ledger"} <= set(audit.__all__)
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        audit.not_a_name  # noqa: B018


def test_each_job_documents_its_arguments_and_result_and_each_estimator_its_paper():
    for name in JOBS:
        doc = getattr(audit, name).__doc__
        assert "Args:" in doc and "Returns:" in doc, name
    paper = re.compile(r"arXiv \d{4}\.\d{4,5}|\(\d{4}\)|\b(19|20)\d{2}\b")
    for name in ESTIMATORS:
        assert paper.search(getattr(audit, name).__doc__ or ""), f"{name} cites no paper"


def test_importing_audit_is_cheap_and_help_shows_the_api():
    probe = (
        "import sys, audit; heavy = ('numpy', 'torch', 'pandas', 'scipy', 'sklearn', 'mlflow', 'sqlalchemy');"
        "print([m for m in heavy if m in sys.modules])"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    import pydoc

    text = pydoc.render_doc(audit, renderer=pydoc.plaintext)
    for name in ("audit_scores", "synth_check", "AuditResult", "epsilon_lower_bound_one_run", "Ledger"):
        assert name in text


def test_the_public_api_sits_on_top_no_library_module_imports_it():
    """Data flows one way: audit.api (and the `audit` package's names) import the jobs, never the reverse."""
    from tests.test_layout import GRAPH

    api = {"audit", "audit.api"}
    assert "audit.api" in GRAPH["audit"] and "audit.sweep.runner" in GRAPH["audit.api"]  # the graph sees them
    assert {module for module, deps in GRAPH.items() if module not in api and deps & api} == set()


def _scores_file(tmp_path, separation: float, n: int = 1000, seed: int = 0):
    rng = np.random.default_rng(seed)
    member = rng.integers(0, 2, n)  # fair coins: the one-run bound's assumption
    pd.DataFrame({"member": member, "score": rng.normal(separation * member, 1.0)}).to_csv(
        tmp_path / f"scores_{separation}.csv", index=False
    )
    return tmp_path / f"scores_{separation}.csv"


@pytest.mark.slow  # > 5 s of CPU: real audits
def test_audit_scores_gives_the_library_numbers_and_the_cli_verdict(tmp_path):
    from audit.model_audits.score_audit import audit_scores as library_audit_scores

    leaky = _scores_file(tmp_path, 3.0)
    result = audit.audit_scores(leaky, membership_randomized=True)
    library = library_audit_scores(leaky, membership_randomized=True)
    assert result.to_dict()["targets"] == library["targets"]  # the same numbers, bit for bit
    # No claim: a leakage statement; on the user's own scores LEAKS fails (the CLI's default).
    assert (result.kind, result.status, result.headline, result.passed) == ("audit-scores", "fail", "FAIL", False)
    assert result.leakage == "LEAKS" and str(result).startswith("audit-scores: FAIL (LEAKS)")
    assert result.epsilon_lower_bound == library["targets"][0]["epsilon_lb_best"] > 1.0
    allowed = audit.audit_scores(leaky, membership_randomized=True, fail_on_leak=False)
    assert (allowed.status, allowed.headline) == ("no_claim", "LEAKS")

    null = audit.audit_scores(_scores_file(tmp_path, 0.0), claimed_epsilon=1.0, membership_randomized=True)
    assert null.status != "fail" and null.headline in ("PASS", "INCONCLUSIVE") and null.claims
    assert "claimed" in str(null) and null.to_dict() == dict(null.results)
    assert json.loads(json.dumps(null.to_dict(), default=str))["verdict"]["status"] == null.status


@pytest.mark.slow  # > 5 s of CPU: real audits
def test_synth_check_takes_files_or_frames_and_flags_a_copy(tmp_path):
    rng = np.random.default_rng(1)

    def table(n):
        return pd.DataFrame(
            {
                "age": rng.normal(40, 10, n).round(),
                "income": rng.lognormal(10, 0.5, n),
                "city": rng.choice(list("abcd"), n),
            }
        )

    train, holdout, fresh = table(300), table(300), table(300)
    copy = train.assign(income=train["income"] * 1.0001)
    for name, frame in (("train", train), ("holdout", holdout), ("copy", copy)):
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
    from_files = audit.synth_check(tmp_path / "train.csv", tmp_path / "holdout.csv", tmp_path / "copy.csv")
    # CSV round trip: the frames read back from the files give the same figures as the files.
    frames = [pd.read_csv(tmp_path / f"{n}.csv") for n in ("train", "holdout", "copy")]
    from_frames = audit.synth_check(*frames)
    assert from_files.to_dict()["synthetic"][0]["dcr"] == from_frames.to_dict()["synthetic"][0]["dcr"]
    assert (from_files.status, from_files.leakage) == ("fail", "LEAKS")
    assert from_files.epsilon_lower_bound is not None and from_files.epsilon_lower_bound > 0
    independent = audit.synth_check(train, holdout, fresh)
    assert independent.status != "fail" and independent.leakage != "LEAKS"
    with pytest.raises(audit.AuditInputError, match="nan_policy"):
        audit.synth_check(train, holdout, fresh, nan_policy="guess")


def _sqrt_composition(noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> float:
    """Unsound on purpose (examples/accountant.py): amplification taken as linear, δ terms dropped."""
    return math.sqrt(steps) * sample_rate * math.sqrt(2.0 * math.log(1.25 / delta)) / noise_multiplier


@pytest.mark.slow  # > 5 s of CPU: real audits
def test_accountant_check_runs_a_callable_and_a_module_spec(monkeypatch):
    from audit.dp_validation.accountant_check import AccountantGrid

    grid = AccountantGrid(noise_multipliers=[1.0], sample_rates=[0.01], steps=[1000], deltas=[1e-5])
    unsound = audit.accountant_check(_sqrt_composition, grid)
    assert unsound.status == "fail" and unsound.to_dict()["counts"]["unsound"] == 1
    monkeypatch.chdir(REPO / "examples")  # a "module:function" spec is imported from the working directory
    sound = audit.accountant_check("accountant:rdp_accountant", grid)  # in an isolated worker
    counts = sound.to_dict()["counts"]  # RDP is sound, and may be loose (> 10 % above the PLD) here
    assert sound.status == "pass" and sound.passed and counts["unsound"] == counts["invalid"] == 0


def test_load_config_names_a_bad_field():
    assert audit.load_config("smoke").name
    with pytest.raises(audit.AuditInputError, match="privacy"):
        audit.load_config("smoke", overrides={"privacy": {"epsilons": "many"}})
