"""`run` on a federated config: results.json carries federated targets with ε per level and attack
rows per client and per level; a policy's max_auc applies to every client's row; MLflow has a child
per ε with one point per round."""

from __future__ import annotations

import json

import jsonschema
import pytest
from conftest import REPO

from audit.machinery.config import resolve_config

SMALL = """
name: fedtest
data: {n_rows: 400}
split: {test_fraction: 0.2, candidate_fraction: 0.5}
training: {hidden_sizes: [8], epochs: 1, batch_size: 128, lr: 0.1}   # q = 1: a fast σ calibration
privacy: {epsilons: [4.0, inf]}
attacks: {names: [loss]}
federated: {level: record, n_clients: 2, rounds: 2, n_reference_federations: 1}
"""


@pytest.mark.slow
def test_federated_run_writes_per_level_results_and_a_per_client_auc_gate_fails_it(cli_in_process, tmp_path):
    # reads what the run writes and exits with: in this process (test_end_to_end runs `run` fresh)
    cli = cli_in_process
    (tmp_path / "fed.yaml").write_text(SMALL)
    (tmp_path / "policy.yaml").write_text("name: any-auc\nrules: {max_auc: 0.01}\n")
    result = cli(
        "run",
        "--config",
        "fed.yaml",
        "--policy",
        "policy.yaml",
        "--out",
        "runs",
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'mlflow.db'}",
    )
    assert result.returncode == 1, result.stderr[-3000:]  # every AUC is above 0.01: the gate must fail
    results = json.loads(next((tmp_path / "runs").glob("*-fedtest/results.json")).read_text())
    schema = json.loads((REPO / "audit" / "schema" / "results.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(results)
    private, baseline = results["targets"]
    assert private["kind"] == baseline["kind"] == "federated"
    assert private["federated"]["level"] == "record" and baseline["federated"]["level"] == "none"
    clients = private["federated"]["clients"]
    assert len(clients) == 2
    for client in clients:  # record-level ε per client from its own local steps, PLD and Opacus
        assert client["local_steps"] > 0 and set(client["epsilon"]) >= {"prv", "rdp", "pld"}
        assert client["epsilon"]["prv"] == pytest.approx(4.0, abs=0.1)
    names = {a["name"] for a in private["attacks"]}
    assert {"loss/all", "loss/client_0", "loss/client_1", "lira_offline/client_0", "server_update/client_0"} <= names
    for attack in private["attacks"]:
        assert attack["claim"]["level"] == "record" and attack["claim"]["epsilon"] is not None
        assert attack["epsilon_lb"]["one_run"] is not None  # coin-flip membership: the one-run bound applies
    assert baseline["epsilon"] == {} and all(a["claim"]["epsilon"] is None for a in baseline["attacks"])
    failed = [c for c in results["policy_evaluation"]["checks"] if c["rule"] == "max_auc" and not c["passed"]]
    assert any("client_1" in json.dumps(c) for c in failed)

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    child = private["mlflow_run_id"]
    assert [m.step for m in client.get_metric_history(child, "test_accuracy") if m.step > 0] == [1, 2]


def test_client_level_federation_reports_client_epsilon_and_a_client_mia(tmp_path):
    from audit.federated.runner import run_federated_audit
    from audit.statistics.epsilon_bounds import one_run_ceiling

    config = resolve_config(
        "clients",
        overrides={
            "name": "clienttest",
            "data": {"n_rows": 800},
            "training": {"hidden_sizes": [8], "epochs": 1},
            "privacy": {
                "epsilons": [2.0],
                "one_run_canaries": 200,
            },  # q = 1 keeps the σ calibration fast; Poisson q < 1 is unit-tested
            "federated": {"n_clients": 6, "rounds": 3, "client_mia_runs": 2, "client_sample_rate": 1.0},
        },
    )
    run = run_federated_audit(config, out_dir=tmp_path / "runs", tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (target,) = run.results["targets"]
    level = target["federated"]["client_level"]
    assert level["epsilon"]["prv"] == pytest.approx(2.0, abs=0.1) and level["rounds"] == 3
    assert target["epsilon"] == level["epsilon"]  # the headline ε of a client-level target is the client's
    (client_mia,) = [a for a in target["attacks"] if a["name"] == "client_mia"]
    assert client_mia["n_members"] + client_mia["n_nonmembers"] == 2 * 6
    assert client_mia["claim"] == {"level": "client", "client": None, "epsilon": level["epsilon"]["prv"]}
    (server,) = [a for a in target["attacks"] if a["name"].startswith("server_update")]
    assert server["claim"]["epsilon"] is None  # the server is trusted by central client-level DP
    # The one verdict model (audit.machinery.verdict): Holm over every row with a claim; the same
    # verdict in results.json on disk.
    verdict = run.results["verdict"]
    claimed = [a for a in target["attacks"] if a["claim"]["epsilon"] is not None]
    assert verdict["family_wise_error"]["method"] == "holm"
    # Rows that could not refute their claim even alone (too few candidates) are inconclusive and
    # left out of the family, so they cost the others no power.
    alone = [
        a
        for a in claimed
        if one_run_ceiling(a["n_members"] + a["n_nonmembers"], target["delta"], 0.05) > a["claim"]["epsilon"]
    ]
    # The canary clients' row (Andrew et al. 2023; a twin federation) tests the same client-level claim.
    canaries = target["whitebox_one_run"]
    assert canaries["family"] == "canary clients (one-run)" and canaries["level"] == "client" and canaries["m"] == 200
    assert canaries["claim"] == level["epsilon"]["prv"] and canaries["canary_rows_inserted"] > 0
    assert any(c["name"].endswith("canary clients (one-run)") for c in verdict["checks"])
    assert verdict["family_wise_error"]["n_tests"] == len(alone) + int(canaries["refutable_alone"])
    on_disk = json.loads((run.run_dir / "results.json").read_text())
    assert on_disk["verdict"]["status"] == verdict["status"]
    # The canary clients' row is described by the shipped schema (its $defs one_run_row).
    schema = json.loads((REPO / "audit" / "schema" / "results.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(on_disk)
    for attack in claimed:  # each row's ceiling is the one its test had: α/K at Holm's first step
        m = attack["n_members"] + attack["n_nonmembers"]
        assert attack["ceiling_one_run"] == one_run_ceiling(
            m, target["delta"], 0.05 / max(1, len(alone) + int(canaries["refutable_alone"]))
        )


class _InterruptSecondTarget:
    """Progress (a callback, as the Python API takes it) that presses Ctrl-C in the second target's
    first round, and records (target, rounds done) of every round update."""

    def __init__(self, interrupt: bool):
        self.interrupt, self.calls = interrupt, []

    def __call__(self, event):
        if event.get("event") != "update" or not event["description"].startswith("target "):
            return
        target = int(event["description"].split()[1].split("/")[0]) - 1
        self.calls.append((target, event["completed"]))
        if self.interrupt and target == 1:
            raise KeyboardInterrupt


def test_an_interrupted_federated_run_resumes_without_retraining_finished_targets(tmp_path):
    import yaml

    from audit.federated.runner import run_federated_audit

    raw = yaml.safe_load(SMALL)
    raw["federated"]["n_reference_federations"] = 0
    config = resolve_config("hospitals", overrides={**raw, "name": "fedresume"})
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    first = _InterruptSecondTarget(interrupt=True)
    with pytest.raises(KeyboardInterrupt):
        run_federated_audit(config, out_dir=tmp_path / "runs", tracking_uri=store, progress=first)
    assert (0, 2) in first.calls  # the first target finished both rounds before the interruption
    second = _InterruptSecondTarget(interrupt=False)
    run = run_federated_audit(config, out_dir=tmp_path / "runs", tracking_uri=store, progress=second, resume="latest")
    assert [c for c in second.calls if c[0] == 0] == [(0, 2)]  # reloaded from its checkpoint, not retrained
    assert [c for c in second.calls if c[0] == 1] == [(1, 1), (1, 2)]
    assert run.results["mlflow"]["resumed_from"] and len(run.results["targets"]) == 2


@pytest.mark.slow  # three small federations per executor, and two spawned workers that import torch
def test_the_numbers_are_the_same_on_the_local_and_the_processes_executor(tmp_path):
    """Target, reference and client-level MIA federations are executor tasks seeded from (seed, task
    id): two worker processes give exactly the numbers of the in-process loop."""
    from audit.federated.runner import run_federated_audit
    from audit.machinery.executors import make_executor

    config = resolve_config(
        "clients",
        overrides={
            "name": "fedexec",
            "data": {"n_rows": 500},
            "training": {"hidden_sizes": [8], "epochs": 1},
            "privacy": {"epsilons": [2.0]},
            "federated": {
                "n_clients": 3,
                "rounds": 2,
                "client_mia_runs": 2,
                "client_sample_rate": 1.0,
                "dirichlet_alpha": 5.0,
                "n_reference_federations": 1,
            },
        },
    )
    tables = {}
    for name in ("local", "processes"):
        executor = make_executor(name, workers=2 if name == "processes" else None, ray_address=None, threads=1)
        try:
            run = run_federated_audit(
                config, out_dir=tmp_path / name, executor=executor, tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}"
            )
        finally:
            executor.close()
        assert run.results["execution"]["executor"] == name
        tables[name] = (run.run_dir / "results.csv").read_text()
        names = {a["name"] for a in run.results["targets"][0]["attacks"]}
        assert {"lira_offline/all", "client_mia"} <= names  # every kind of task ran
    assert tables["local"] == tables["processes"]
