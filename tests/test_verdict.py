"""One verdict everywhere: Holm over the tests that decide, proven bounds only, null false alarms ≤ 5 %,
a tight accountant reference, and the same status on the console, in results.json, report.html,
summary.md, junit.xml and the MLflow parent-run tag."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET

import mlflow
import numpy as np
import pandas as pd
import pytest

from audit.machinery.verdict import CLAIM_STATUSES, Check, decide, status_word, verdict_for_results
from audit.machinery.verdict_words import claim_status_word
from audit.statistics.epsilon_bounds import epsilon_lower_bound_one_run, one_run_ceiling, one_run_claim_p_value
from audit.statistics.multiple_testing import holm_rejections
from tests.mlflow_store import fresh_store


@pytest.fixture
def cli(cli_in_process):
    """The commands below run in this process (tests/conftest.py `run_cli_in_process`): these tests read
    what a command prints, writes and exits with, and a fresh interpreter per case cost ~4-5 s of CPU."""
    return cli_in_process


ALL_ATTACKS = ("loss", "shadow", "lira", "lira_offline", "rmia")


# --- Holm ------------------------------------------------------------------------------------


def test_holm_matches_the_textbook_example():
    # Holm 1979's procedure by hand: α = 0.05, K = 4 → thresholds .0125, .0167, .025, .05.
    assert holm_rejections([0.01, 0.04, 0.03, 0.005], 0.05) == [True, False, False, True]
    assert holm_rejections([0.01, 0.015, 0.02, 0.04], 0.05) == [True, True, True, True]
    assert holm_rejections([0.02, 0.02], 0.05) == [True, True]
    assert holm_rejections([0.03, 0.04], 0.05) == [False, False]


def test_the_claim_test_agrees_with_the_bound_it_comes_from():
    rng = np.random.default_rng(1)
    members = rng.random(2000) < 0.5
    scores = rng.normal(size=2000) + 1.5 * members
    bound = epsilon_lower_bound_one_run(scores, members, 1e-5)
    assert bound.epsilon > 0.5
    assert one_run_claim_p_value(bound.details, bound.epsilon * 0.95, 1e-5) < 0.05
    assert one_run_claim_p_value(bound.details, bound.epsilon * 1.05, 1e-5) > 0.05


def test_a_claim_above_the_ceiling_is_inconclusive_and_the_status_says_so():
    ceiling = one_run_ceiling(200, 1e-5, 0.05)
    assert 0 < ceiling < 5
    checks = [
        Check("targets[0]", "a", "claim 8 cannot be refuted", p_value=0.9, inconclusive=True),
        Check("targets[1]", "b", "ok", p_value=0.5),
    ]
    verdict = decide(checks, alpha=0.05)
    # `passed` is true only for PASS: a CI system reading JSON must not see an untested claim as a pass.
    assert verdict["status"] == "inconclusive" and verdict["passed"] is False
    assert verdict["reasons"] == ["claim 8 cannot be refuted"]
    assert [(c["claim"], c["status"]) for c in verdict["claims"]] == [
        ("targets[0]: a", "untestable"),
        ("targets[1]: b", "held"),
    ]
    assert decide(checks, alpha=0.05, fail_on_inconclusive=True)["status"] == "fail"


def test_shown_only_checks_never_decide_and_deterministic_failures_do():
    shown = Check("targets[0]", "cp", "CP 3.0 (assumes independent trials)", failed=True, decides=False)
    # Nothing claimed was tested: no claim, never a pass.
    assert decide([shown])["status"] == "no_claim" and decide([shown])["passed"] is False
    assert decide([shown, Check("x", "held", "ok")])["status"] == "pass"
    assert decide([shown, Check("x", "rule", "rule failed", failed=True)])["reasons"] == ["rule failed"]


# --- the verdict's null false-alarm rate -----------------------------------------------------


def _null_attack(name: str, rng: np.random.Generator, members: np.ndarray) -> dict:
    """An attack record as `evaluate_attack` writes the parts the verdict reads, from null scores.

    Only the one-run bound can decide (Clopper-Pearson over one model is shown only), so the record
    holds the real one-run estimator's output; the full `evaluate_attack` costs ~10× more per call.
    """
    bound = epsilon_lower_bound_one_run(rng.normal(size=members.size), members, 1e-5)
    return {
        "name": name,
        "epsilon_lb": {"clopper_pearson": None, "one_run": bound.epsilon},
        "epsilon_lb_details": {"one_run": bound.details},
        "tpr_at_fpr": {},
    }


def _null_results(rng: np.random.Generator, claims=(0.5, 1.0), m: int = 400) -> dict:
    """Results shaped like a run: each claimed ε a target, all five attacks, scores independent of membership."""
    members = rng.random(m) < 0.5
    targets = [
        {
            "epsilon_target": claim,
            "delta": 1e-5,
            "epsilon": {},
            "epsilon_accountant": claim,
            "accountant": "prv",
            "test_accuracy": None,
            "epsilon_lb_best": None,
            "violation": False,
            "attacks": [_null_attack(name, rng, members) for name in ALL_ATTACKS],
        }
        for claim in claims
    ]
    return {"schema_version": 2, "config": {"attacks": {"confidence": 0.95}}, "targets": targets, "synthetic": []}


@pytest.mark.slow
def test_the_verdict_false_alarm_rate_on_null_scores_is_at_most_5_percent_over_200_repeats():
    # No attack carries any signal, so every "fail" is a false alarm; 2 claims × 5 attacks = 10 tests each time.
    # 200 repeats (~0.15 s of CPU each, the one-run estimator): a verdict whose false-alarm rate were 10 %
    # would still show ≤ 5 % here with probability 0.008 (binomial), one with 10 uncorrected 5 % tests (up
    # to 40 %) never; 500 repeats cost 2.5× as much to tighten that to 0.0001.
    rng = np.random.default_rng(2026)
    repeats = 200
    outcomes = [verdict_for_results(_null_results(rng))[0]["verdict"] for _ in range(repeats)]
    fails = sum(v["status"] == "fail" for v in outcomes)
    assert outcomes[0]["family_wise_error"]["n_tests"] == 10 and outcomes[0]["family_wise_error"]["method"] == "holm"
    assert fails / repeats <= 0.05, f"{fails} false alarms in {repeats}"


def test_the_same_tests_catch_a_real_leak():
    # The power side: the same pipeline on scores that separate members fails a claim of ε = 0.5.
    rng = np.random.default_rng(7)
    results = _null_results(rng, claims=(0.5,))
    members = rng.random(400) < 0.5
    strong = epsilon_lower_bound_one_run(rng.normal(size=400) + 4.0 * members, members, 1e-5)
    results["targets"][0]["attacks"][0] = {
        "name": "lira",
        "epsilon_lb": {"clopper_pearson": None, "one_run": strong.epsilon},
        "epsilon_lb_details": {"one_run": strong.details},
        "tpr_at_fpr": {},
    }
    decided = verdict_for_results(results)[0]
    assert decided["verdict"]["status"] == "fail" and decided["targets"][0]["violation"] is True
    assert "lira" in decided["verdict"]["reasons"][0]


def test_federated_rows_are_tested_against_their_own_level_and_a_row_without_a_claim_never_decides():
    # A client-level target: record rows and client_mia test the client-level ε; the server's view of
    # an update is not covered by client-level DP (claim None), so even a perfect leak there decides nothing.
    rng = np.random.default_rng(11)
    members = rng.random(400) < 0.5

    def row(name, level, claim, shift):
        bound = epsilon_lower_bound_one_run(rng.normal(size=400) + shift * members, members, 1e-5)
        return {
            "name": name,
            "claim": {"level": level, "client": None, "epsilon": claim},
            "epsilon_lb": {"clopper_pearson": None, "one_run": bound.epsilon},
            "epsilon_lb_details": {"one_run": bound.details},
            "tpr_at_fpr": {},
            "violation": False,
        }

    target = {
        "kind": "federated",
        "epsilon_target": 0.5,
        "delta": 1e-5,
        "epsilon": {"prv": 0.5},
        "epsilon_accountant": 0.5,
        "accountant": "prv",
        "epsilon_lb_best": None,
        "violation": False,
        "attacks": [
            row("loss/all", "record", 0.5, 0.0),
            row("server_update/client_0", "record", None, 8.0),
            row("client_mia", "client", 0.5, 0.0),
        ],
    }
    results = {"schema_version": 2, "config": {"attacks": {"confidence": 0.95}}, "targets": [target], "synthetic": []}
    decided = verdict_for_results(results)[0]
    # membership rows alone have no power against every violation: not refuted, the top line INCONCLUSIVE
    assert decided["verdict"]["status"] == "inconclusive" and decided["verdict"]["family_wise_error"]["n_tests"] == 2
    assert {c["status"] for c in decided["verdict"]["claims"] if "-DP" in c["claim"]} == {"not_refuted"}
    assert [a["violation"] for a in decided["targets"][0]["attacks"]] == [False, False, False]
    results["targets"][0]["attacks"][2] = row("client_mia", "client", 0.5, 6.0)  # the client level leaks
    decided = verdict_for_results(results)[0]
    assert decided["verdict"]["status"] == "fail" and "client_mia (client-level ε)" in decided["verdict"]["reasons"][0]
    assert [a["violation"] for a in decided["targets"][0]["attacks"]] == [False, False, True]
    assert decided["targets"][0]["violation"] is True


def test_a_row_that_could_not_refute_its_claim_even_alone_costs_the_family_nothing_and_decides_nothing():
    # 12 candidates (a small client's rows): even a perfect attack proves ε ≥ ~0 at α = 5 %, so the row
    # is left out of the Holm family (K stays 1). Alone it leaves the claim untestable, never held; beside
    # a row that could have refuted it and did not, the claim is decided by that row (its tests decide
    # together) and the powerless row is named.
    rng = np.random.default_rng(3)
    results = _null_results(rng, claims=(1.0,))
    powered = results["targets"][0]["attacks"][:1]
    small = rng.random(12) < 0.5
    tiny = epsilon_lower_bound_one_run(rng.normal(size=12), small, 1e-5)
    assert one_run_ceiling(12, 1e-5, 0.05) <= 1.0
    client = {
        "name": "loss/client_9",
        "epsilon_lb": {"one_run": tiny.epsilon},
        "epsilon_lb_details": {"one_run": tiny.details},
        "tpr_at_fpr": {},
    }
    results["targets"][0]["attacks"] = [client]
    alone = verdict_for_results(results)[0]["verdict"]
    assert alone["family_wise_error"]["n_tests"] == 0
    assert alone["status"] == "inconclusive" and "loss/client_9" in alone["reasons"][0]
    results["targets"][0]["attacks"] = powered + [client]
    both = verdict_for_results(results)[0]["verdict"]
    assert both["family_wise_error"]["n_tests"] == 1
    (claim,) = [c for c in both["claims"] if "-DP" in c["claim"] and "accountant" not in c["claim"]]
    # (a black-box membership row has no power against every violation: the claim is not refuted, not held)
    assert (
        claim["status"] == "not_refuted"
        and "untestable alone" in claim["reason"]
        and "loss/client_9" in claim["reason"]
    )


# --- tight accountant reference --------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("sigma, q, steps", [(2.0, 0.004, 4000), (1.0, 0.01, 1000)])
def test_opacus_gdp_is_flagged_unsound_once_the_pld_interval_is_tight(sigma, q, steps):
    from audit.dp_validation.accountant_check import AccountantGrid, check_accountant, opacus_gdp

    grid = AccountantGrid(noise_multipliers=[sigma], sample_rates=[q], steps=[steps], deltas=[1e-5])
    (point,) = check_accountant(opacus_gdp, grid, time_budget_s=120)
    assert point.pld_tight and (point.pld_upper - point.pld_lower) <= 0.01 * point.pld_upper
    assert point.label == "unsound", point


@pytest.mark.slow
def test_opacus_prv_and_rdp_are_never_unsound_on_the_default_grid():
    from audit.dp_validation.accountant_check import AccountantGrid, classify, opacus_prv, opacus_rdp
    from audit.statistics.accountants import DPSGDEvent, _single_step_pld, pld_epsilon_interval

    def pessimistic_epsilon(event, delta, interval):
        distribution = _single_step_pld(event.noise_multiplier, event.sample_rate, interval, True)
        return float(distribution.self_compose(event.steps).get_epsilon_for_delta(delta))

    for sigma, q, steps, delta in AccountantGrid().points():
        event = DPSGDEvent(sigma, q, steps)
        reported = {"prv": opacus_prv(sigma, q, steps, delta), "rdp": opacus_rdp(sigma, q, steps, delta)}
        # The pessimistic PLD's ε is an upper bound on the true ε at every discretisation h (the coarser,
        # the larger and the cheaper), so a value at or above it can be unsound at no refinement. h is
        # refined (1e-2, 1e-3, 1e-4: each ~3-10× the cost of the last; idle, all 27 points at 1e-4 with the
        # optimistic end cost ~25 s, at 1e-3 ~1.5 s) only while a value is below it; then the tight interval.
        if any(min(reported.values()) >= pessimistic_epsilon(event, delta, h) for h in (1e-2, 1e-3, 1e-4)):
            continue
        tight = pld_epsilon_interval(event, delta)
        for name, value in reported.items():
            label = classify(value, tight.lower, tight.upper, 0.10)[0]
            assert label not in ("unsound", "invalid"), (name, sigma, q, steps, value, tight)


# --- every output agrees, every command -------------------------------------------------------


def _tables(tmp_path):
    rng = np.random.default_rng(0)

    def table(n):
        return pd.DataFrame(
            {
                "age": rng.normal(40, 10, n).round(),
                "income": rng.lognormal(10, 0.5, n),
                "city": rng.choice(list("abcd"), n),
            }
        )

    train, holdout = table(300), table(300)
    train.to_csv(tmp_path / "train.csv", index=False)
    holdout.to_csv(tmp_path / "holdout.csv", index=False)
    train.assign(income=train["income"] * 1.0001).to_csv(tmp_path / "copy.csv", index=False)
    table(300).to_csv(tmp_path / "independent.csv", index=False)
    members = rng.random(600) < 0.5
    pd.DataFrame({"member": members.astype(int), "score": rng.normal(size=600) + 3.0 * members}).to_csv(
        tmp_path / "leaky_scores.csv", index=False
    )
    pd.DataFrame({"member": members.astype(int), "score": rng.normal(size=600)}).to_csv(
        tmp_path / "null_scores.csv", index=False
    )
    (tmp_path / "grid.yaml").write_text("noise_multipliers: [1.0]\nsample_rates: [0.01]\nsteps: [1000]\n")
    (tmp_path / "auc.yaml").write_text("rules: {max_auc: 0.6}\n")
    (tmp_path / "any_auc.yaml").write_text("rules: {max_auc: 0.01}\n")  # every attack row fails it
    (tmp_path / "fed.yaml").write_text(FEDERATED)
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    _memorising_model(tmp_path)


# A two-client federation small enough for the table (record-level DP-SGD, loss attack only): its
# claim ε = 4 is above what ~100 coin-flip candidates per row could ever refute (built-in verdict:
# inconclusive); a policy's max_auc applies to every per-client row and fails it.
FEDERATED = """
name: fedtable
data: {n_rows: 400}
split: {test_fraction: 0.2, candidate_fraction: 0.5}
training: {hidden_sizes: [8], epochs: 1, batch_size: 128, lr: 0.1}
privacy: {epsilons: [4.0, inf]}
attacks: {names: [loss]}
federated: {level: record, n_clients: 2, rounds: 2, n_reference_federations: 0}
"""

# The same data and model centrally (`run`'s sweep) with the membership attacks alone: the ε = 4 row
# cannot be refuted by ~100 coin-flip candidates (built-in verdict: inconclusive, exit 0); max_auc fails
# every attack row. The white-box one-run twin is switched off here: with it the claim is testable and
# held (the PASS case, tests/test_one_run_rows_verdict.py), and this table needs an inconclusive run.
SWEEP = (
    FEDERATED.replace("name: fedtable", "name: sweeptable")
    .replace("federated: {level: record, n_clients: 2, rounds: 2, n_reference_federations: 0}\n", "")
    .replace("privacy: {epsilons: [4.0, inf]}", "privacy: {epsilons: [4.0, inf], whitebox_one_run: false}")
)


def _memorising_model(tmp_path) -> None:
    """An MLP trained to memorise its 200 members (audit-model's files: members.csv, nonmembers.csv)."""
    import torch

    from targets.datasets import make_default_tabular
    from targets.models import build_mlp

    data = make_default_tabular(400, seed=1)
    columns = [f"f{i}" for i in range(data.features.shape[1])]
    frame = pd.DataFrame(data.features, columns=columns).assign(y=data.labels)
    frame.iloc[:200].to_csv(tmp_path / "members.csv", index=False)
    frame.iloc[200:].to_csv(tmp_path / "nonmembers.csv", index=False)
    model = build_mlp(len(columns), [32], 2, seed=0)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = torch.as_tensor(data.features[:200]), torch.as_tensor(data.labels[:200])
    for _ in range(150):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    torch.save(model.state_dict(), tmp_path / "model.pt")
    (tmp_path / "model.yaml").write_text("training:\n  hidden_sizes: [32]\n")


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """The input files, built once for the module (~3.5 s of CPU, most of it training the memorising
    model) and copied into each test's folder: every command reads its own copy, none shares a file."""
    built = tmp_path_factory.mktemp("verdict_inputs")
    _tables(built)

    def copy_into(folder):
        for path in built.iterdir():
            shutil.copy2(path, folder / path.name)

    return copy_into


SYNTH = ["synth-check", "--train", "train.csv", "--holdout", "holdout.csv"]
MODEL = [
    "audit-model",
    "--config",
    "model.yaml",
    "--weights",
    "model.pt",
    "--members",
    "members.csv",
    "--nonmembers",
    "nonmembers.csv",
    "--label",
    "y",
    "--attacks",
    "loss",
    "--quiet",
]
CASES = [
    # (command line, expected status, expected exit code, output kind)
    # A near-copy release without a DP claim: LEAKS on the user's own release is a finding, exit 1 …
    ([*SYNTH, "--synthetic", "copy.csv"], "fail", 1, "folder"),
    # … report-only with --allow-leak (no claim is not a pass, nor a fail); --fail-on-leak is the old no-op.
    ([*SYNTH, "--synthetic", "copy.csv", "--allow-leak"], "no_claim", 0, "folder"),
    ([*SYNTH, "--synthetic", "copy.csv", "--fail-on-leak"], "fail", 1, "folder"),
    # audit-scores: the five outcomes on generated score files
    (["audit-scores", "null_scores.csv", "--claimed-epsilon", "1"], "inconclusive", 0, "folder"),  # no coin flip
    # coin-flip null scores: the claim is not refuted by these scores, never held (docs/verdict.md "Power")
    (
        ["audit-scores", "null_scores.csv", "--claimed-epsilon", "1", "--membership-randomized"],
        "inconclusive",
        0,
        "folder",
    ),
    (["audit-scores", "leaky_scores.csv", "--claimed-epsilon", "1", "--membership-randomized"], "fail", 1, "folder"),
    (["audit-scores", "leaky_scores.csv"], "fail", 1, "folder"),  # no claim, leaks: a finding on the user's scores
    (["audit-scores", "leaky_scores.csv", "--allow-leak"], "no_claim", 0, "folder"),  # … report-only
    (["audit-scores", "null_scores.csv"], "no_claim", 0, "folder"),  # no claim, no significant leakage
    (
        ["mechanism-audit", "--mechanism", "audit.demos.mechanisms:laplace_count_wrong_scale", "--trials", "4000"],
        "fail",
        1,
        "single",
    ),
    (
        ["accountant-check", "--accountant", "audit.dp_validation.accountant_check:opacus_gdp", "--grid", "grid.yaml"],
        "fail",
        1,
        "single",
    ),
    (["conformance", "--trainer", "audit.demos.planted_bugs:batch_clip"], "fail", 1, "single"),  # planted bug
    (["conformance", "--trainer", "audit.demos.planted_bugs:correct_eps_1"], "pass", 0, "single"),
    # client-level DP-FedAvg whose noise is σ instead of σ·C (tests/test_federated_conformance.py)
    (
        ["conformance", "--trainer", "audit.demos.federated_aggregators:dp_fedavg_noise_sigma_not_sigma_c"],
        "fail",
        1,
        "single",
    ),
    # Both canary rows: 12 runs on one worker (the verdicts of 40 runs on two, measured: most of a row's
    # cost was starting workers that import Opacus, so one worker, and fewer runs for what the table reads).
    (
        [
            "canary-audit",
            "--trainer",
            "audit.demos.dp_trainers:broken_no_clipping",
            "--mode",
            "multi-canary",
            "--models",
            "12",
            "--workers",
            "1",
            "--quiet",
        ],
        "fail",
        1,
        "single",
    ),
    # input-space canaries read from final models: not refuted, never held (issue #35)
    (
        [
            "canary-audit",
            "--trainer",
            "audit.demos.dp_trainers:correct_dpsgd",
            "--mode",
            "multi-canary",
            "--models",
            "12",
            "--workers",
            "1",
            "--quiet",
        ],
        "inconclusive",
        0,
        "single",
    ),
    (
        [
            "whitebox-audit",
            "--builtin",
            "--noise-multiplier",
            "2",
            "--steps",
            "4",
            "--runs",
            "200",
            "--claimed-epsilon",
            "0.8",
            "--workers",
            "1",
            "--quiet",
        ],
        "fail",
        1,
        "single",
    ),  # the claim is 4× too private
    # audit-model: a memorising model claiming no DP is never a pass: LEAKS, a finding on the user's
    # model (exit 1; report-only with --allow-leak), and fails a policy's max_auc; with a claim it is
    # inconclusive (files are not coin flips).
    ([*MODEL, "--claimed-epsilon", "inf"], "fail", 1, "folder"),
    ([*MODEL, "--claimed-epsilon", "inf", "--allow-leak"], "no_claim", 0, "folder"),
    ([*MODEL, "--claimed-epsilon", "inf", "--policy", "auc.yaml"], "fail", 1, "folder"),
    # (with a claim it is inconclusive: files are not coin flips; tests/test_cli_audits.py has that case)
    # the federated job (`run` with a federated: section): its per-client rows under a max_auc rule
    pytest.param(
        ["run", "--config", "fed.yaml", "--policy", "any_auc.yaml", "--quiet"],
        "fail",
        1,
        "folder",
        marks=pytest.mark.slow,
    ),  # two federations and their attacks in a fresh process: ~15-25 s
    # `run` (the central sweep): built-in checks, then under a policy
    pytest.param(["run", "--config", "sweep.yaml", "--quiet"], "inconclusive", 0, "folder", marks=pytest.mark.slow),
    pytest.param(
        ["run", "--config", "sweep.yaml", "--policy", "any_auc.yaml", "--quiet"],
        "fail",
        1,
        "folder",
        marks=pytest.mark.slow,
    ),
]


def _console_status(proc) -> str:
    text = proc.stdout + proc.stderr
    for word, status in (
        ("FAIL", "fail"),
        ("INCONCLUSIVE", "inconclusive"),
        ("PASS", "pass"),
        ("LEAKS", "no_claim"),
        ("NO SIGNIFICANT LEAKAGE FOUND", "no_claim"),
    ):
        if any(line.startswith(word) for line in text.splitlines()):
            return status
    return "none"


@pytest.mark.parametrize("args, status, code, kind", CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_console_results_report_summary_junit_and_mlflow_agree(cli, tables, tmp_path, args, status, code, kind):
    tables(tmp_path)
    db = fresh_store(tmp_path)
    proc = cli(*args, "--tracking-uri", db)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert _console_status(proc) == status
    folders = [p for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")]
    (folder,) = folders
    if kind == "single":
        (result_file,) = folder.glob("*.json")
        verdict = json.loads(result_file.read_text())["verdict"]
    else:
        results = json.loads((folder / "results.json").read_text())
        verdict = results["verdict"]
        assert results["schema_version"] == 3
    word = status_word(status, verdict)
    console = (proc.stdout + proc.stderr).splitlines()
    assert any(line.startswith(word) for line in console), word  # LEAKS / NO SIGNIFICANT … / PASS / …
    assert verdict["status"] == status and verdict["passed"] == (status == "pass")
    claims = verdict["claims"]
    # no claim tested: a leakage statement, failing when it leaks on the user's own release (no --allow-leak)
    # or when a policy rule failed (rules are not claims, so a subject without a claim can fail one)
    failed_rules = sum(r["status"] == "failed" for r in verdict.get("rules") or [])
    if claims:
        assert status != "no_claim"
    else:
        assert status == "no_claim" or (
            status == "fail"
            and bool(
                failed_rules or (verdict["fail_on_leak"] and any(e["status"] == "leaks" for e in verdict["leakage"]))
            )
        )
    if not claims:
        assert verdict["leakage"] and all(
            e["status"] in ("leaks", "no_significant_leakage") for e in verdict["leakage"]
        )
    counts = {s: sum(c["status"] == s for c in claims) for s in CLAIM_STATUSES}
    rules = verdict.get("rules") or []  # a policy's rules: their own list, never claims
    assert (status == "pass") == (counts["held"] == len(claims) > 0)
    for claim in claims:  # every claim's status on the console, in words
        assert any(line.startswith("claim ") and claim["claim"] in line for line in console), claim["claim"]
    report = (folder / "report.html").read_text()
    assert f'data-status="{status}"' in report or f"data-status='{status}'" in report
    if kind == "folder":
        assert (folder / "summary.md").read_text().splitlines()[0].endswith(word)
        junit = ET.parse(folder / "junit.xml").getroot()
        properties = {p.get("name"): p.get("value") for p in junit.iter("property")}
        assert properties["verdict"] == status and properties["passed"] == str(status == "pass").lower()
        cases = junit.findall("./testsuite/testcase")
        failing = sum(c.find("failure") is not None for c in cases)
        assert sum(c.find("skipped") is not None for c in cases) == (
            counts["untestable"] + counts["not_refuted"] + sum(r["status"] == "not_applicable" for r in rules)
        )
        # a leak check of the user's own release decides (one case per leakage statement) unless --allow-leak
        leak_cases = verdict["leakage"] if verdict["fail_on_leak"] else []
        leaking = sum(e["status"] == "leaks" for e in leak_cases)
        why = status == "fail" and counts["refuted"] == 0 and failed_rules == 0 and leaking == 0  # the extra case
        assert failing == counts["refuted"] + failed_rules + leaking + why
        assert len(cases) == len(claims) + len(rules) + len(leak_cases) + why
        for claim in claims:
            assert f'data-claim-status="{claim["status"]}"' in report
        for entry in verdict["leakage"]:
            assert f'data-leakage="{entry["status"]}"' in report
    mlflow.set_tracking_uri(db)
    runs = mlflow.search_runs(search_all_experiments=True)
    parents = runs[runs.get("tags.mlflow.parentRunId").isna()] if "tags.mlflow.parentRunId" in runs else runs
    assert list(parents["tags.verdict"]) == [status]
    assert list(parents["tags.verdict.headline"]) == [word]
    for i, claim in enumerate(claims):
        assert list(parents[f"tags.verdict.claim.{i:02d}"]) == [
            f"{claim_status_word(claim['status'])}: {claim['claim']}"[:4900]
        ]


@pytest.mark.slow
def test_gate_rerenders_the_report_and_a_later_report_keeps_the_policy_verdict(cli, tables, tmp_path):
    from tests.conftest import REPO

    tables(tmp_path)
    db = fresh_store(tmp_path)
    assert cli(*SYNTH, "--synthetic", "independent.csv", "--tracking-uri", db).returncode == 0
    (folder,) = [p for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")]
    policy = tmp_path / "tight.yaml"
    policy.write_text("rules: {max_dcr_share: 0.1}\n")
    gated = cli("gate", "--policy", str(policy), str(folder / "results.json"))
    assert gated.returncode == 1 and _console_status(gated) == "fail", gated.stdout + gated.stderr
    for name in ("report.html", "summary.md", "junit.xml"):
        assert "tight.yaml" in (folder / name).read_text(), name
    again = cli("report", str(folder / "results.json"))
    assert again.returncode == 1 and 'data-status="fail"' in (folder / "report.html").read_text()
    assert "FAIL" in (folder / "summary.md").read_text().splitlines()[0]
    lenient = cli("report", str(folder / "results.json"), "--policy", str(REPO / "examples/policy-lenient.yaml"))
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr
