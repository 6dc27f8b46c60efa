"""The ledger database: append-only rows with who/when/what, budgets enforced in one transaction,
migrations on open, and concurrent writers (separate processes) into SQLite and a real PostgreSQL
server that neither lose nor double a release."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from sqlalchemy import create_engine, inspect, text

from audit.errors import AuditInputError
from audit.ledger.composition import compose_mechanisms
from audit.ledger.mechanisms import validate_mechanism
from audit.ledger.store import BudgetBelowSpent, BudgetExceeded, Ledger, Provenance, ReleaseInput
from tests.conftest import REPO
from tests.ledger_postgres import postgres_server  # noqa: F401 - the session fixture

# Eight writers, 25 releases each: all eight are forked within milliseconds and each commits one
# transaction per release, so their transactions overlap for the whole run. The tests check that the
# contention was real (the recorded order switches writer many times, not one writer's block after
# another's), which is what "no lost update" needs; 100 per writer (800 in all) exercised the same
# transactions four times as long.
PROCESSES, PER_PROCESS = 8, 25

# Four distinct mechanisms, so grouping is exercised and one composition stays cheap.
# One fresh interpreter imports the ledger (and dp_accounting, which a budget check composes with)
# once, then forks the PROCESSES writers: separate processes, each opening its own connection and
# writing at the same time (all start within milliseconds, closer together than interpreters that
# each import for ~1 s would), without paying the imports eight times. Nothing is connected before
# the fork, and the launcher runs no threads.
_WRITERS = r"""
import json, os, sys, traceback
from audit.ledger.store import BudgetExceeded, Ledger, ReleaseInput
uri, dataset, processes, count, with_budget = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
if with_budget:
    import dp_accounting  # noqa: F401 - composed inside every budgeted record: imported once, here
kinds = [{"kind": "laplace", "scale": 200.0}, {"kind": "laplace", "scale": 400.0},
         {"kind": "gaussian", "scale": 50.0}, {"kind": "gaussian", "scale": 100.0}]

def write(worker):
    refused = 0
    with Ledger.open(uri) as ledger:
        for i in range(count):
            spec = {"kind": "laplace", "scale": 10.0} if with_budget else kinds[(worker * count + i) % 4]
            try:
                ledger.record(dataset, [ReleaseInput(f"worker {worker} release {i}", "hand", [spec])], compute_spent=False)
            except BudgetExceeded:
                refused += 1
    return refused

children = []
for worker in range(processes):
    read, written = os.pipe()
    pid = os.fork()
    if pid == 0:  # the writer
        os.close(read)
        try:
            os.write(written, str(write(worker)).encode())
            code = 0
        except BaseException:
            traceback.print_exc()
            code = 1
        os._exit(code)
    os.close(written)
    children.append((pid, read))
refused, failed = [], 0
for pid, read in children:
    with os.fdopen(read) as pipe:
        value = pipe.read()
    _, status = os.waitpid(pid, 0)
    failed += os.waitstatus_to_exitcode(status) != 0
    refused.append(int(value) if value else None)
print(json.dumps({"refused": refused, "failed": failed, "pids": [pid for pid, _ in children]}))
"""


def _mechanism(worker: int, i: int, count: int = PER_PROCESS) -> dict:
    kinds = [
        {"kind": "laplace", "scale": 200.0},
        {"kind": "laplace", "scale": 400.0},
        {"kind": "gaussian", "scale": 50.0},
        {"kind": "gaussian", "scale": 100.0},
    ]
    return kinds[(worker * count + i) % 4]


def _writers(uri: str, dataset: str, count: int, with_budget: bool = False) -> list[int]:
    """PROCESSES concurrent writer processes, `count` releases each; how many each had refused."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", _WRITERS, uri, dataset, str(PROCESSES), str(count), "1" if with_budget else "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["failed"] == 0, done.stderr[-2000:]
    assert len(set(report["pids"])) == PROCESSES  # eight separate processes wrote
    return report["refused"]


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_uri(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "ledger.db")
    return request.getfixturevalue("postgres_server").new_database()


def _concurrent_matches_sequential(uri: str, sequential_uri: str) -> None:
    _writers(uri, "adult", PER_PROCESS)
    with Ledger.open(uri) as ledger:
        assert ledger.count_releases("adult") == PROCESSES * PER_PROCESS
        labels = [r["label"] for r in ledger.dataset_state("adult")["releases"]]
        concurrent = ledger.dataset_state("adult")["composition"]
    assert len(set(labels)) == PROCESSES * PER_PROCESS  # none doubled, none lost
    # Contention was real: in the committed order (by id) the writer changes often. Writers run one
    # after another would change it PROCESSES - 1 times; overlapping ones change it far more often.
    writers = [label.split(" release ")[0] for label in labels]
    switches = sum(a != b for a, b in zip(writers, writers[1:]))
    assert switches >= 4 * PROCESSES, f"the writers barely overlapped ({switches} switches): nothing concurrent tested"
    with Ledger.open(sequential_uri) as ledger:
        for w in range(PROCESSES):
            for i in range(PER_PROCESS):
                ledger.record(
                    "adult", [ReleaseInput(f"worker {w} release {i}", "hand", [_mechanism(w, i)])], compute_spent=False
                )
        sequential = ledger.dataset_state("adult")["composition"]
    assert concurrent == sequential  # identical, bit for bit (canonical composition order)
    assert concurrent.n_mechanisms == PROCESSES * PER_PROCESS


@pytest.mark.slow
def test_eight_concurrent_writers_into_sqlite_record_exactly_every_release(tmp_path):
    _concurrent_matches_sequential(str(tmp_path / "ledger.db"), str(tmp_path / "sequential.db"))


@pytest.mark.slow
def test_eight_concurrent_writers_into_postgresql_record_exactly_every_release(postgres_server):  # noqa: F811
    _concurrent_matches_sequential(postgres_server.new_database(), postgres_server.new_database())


@pytest.mark.slow
def test_concurrent_writers_never_overspend_a_budget_together(ledger_uri):
    # Laplace ε = 0.1 releases against a budget of 1.0: how many fit is what a sequential ledger says.
    spec = validate_mechanism({"kind": "laplace", "scale": 10.0})
    fit = max(n for n in range(1, 30) if compose_mechanisms([spec] * n, 1e-5).epsilon <= 1.0)
    with Ledger.open(ledger_uri) as ledger:
        ledger.set_budget("adult", 1.0, None)
    refused = _writers(ledger_uri, "adult", 3, with_budget=True)
    with Ledger.open(ledger_uri) as ledger:
        assert ledger.count_releases("adult") == fit
        assert ledger.dataset_state("adult")["composition"].epsilon <= 1.0
    assert sum(refused) == PROCESSES * 3 - fit


def test_a_release_carries_who_when_what_and_the_migration_ran(ledger_uri, tmp_path):
    source = tmp_path / "results.json"
    source.write_text('{"schema_version": 2}')
    with Ledger.open(ledger_uri) as ledger:
        outcome = ledger.record(
            "adult",
            [
                ReleaseInput(
                    "model v1",
                    "run",
                    [{"kind": "dpsgd", "noise_multiplier": 1.0, "sample_rate": 0.01, "steps": 100}],
                    source_file=str(source),
                    source_sha256="ab" * 32,
                    mlflow_run_id="r1",
                )
            ],
            Provenance(command="privacy-audit run --ledger x", by="alice@host", git_commit="c0ffee"),
        )
        row = ledger.dataset_state("adult")["releases"][0]
    assert outcome.release_ids == [row["id"]]
    assert (row["by"], row["command"], row["git_commit"], row["source_sha256"], row["mlflow_run_id"]) == (
        "alice@host",
        "privacy-audit run --ledger x",
        "c0ffee",
        "ab" * 32,
        "r1",
    )
    assert row["at"].endswith("+00:00") and row["epsilon_after"] == outcome.composition.epsilon
    url = ledger.url
    engine = create_engine(url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM ledger_alembic_version")).scalar() == "0001_initial"
        assert {"ledger_datasets", "ledger_releases", "ledger_removals", "ledger_budget_changes"} <= set(
            inspect(conn).get_table_names()
        )
    engine.dispose()
    Ledger.open(ledger_uri).close()  # reopening at head migrates nothing and keeps the rows
    with Ledger.open(ledger_uri) as ledger:
        assert ledger.count_releases() == 1


def test_removal_is_recorded_never_deleted_and_the_budget_frees_up(ledger_uri):
    with Ledger.open(ledger_uri) as ledger:
        first = ledger.record("adult", [ReleaseInput("q1", "hand", [{"kind": "laplace", "scale": 2.0}])]).release_ids[0]
        ledger.record("adult", [ReleaseInput("q2", "hand", [{"kind": "laplace", "scale": 4.0}])])
        with pytest.raises(BudgetBelowSpent):  # below the spent 0.75: refused, nothing saved
            ledger.set_budget("adult", 0.5, None)
        assert ledger.dataset_state("adult")["max_total_epsilon"] is None
        ledger.set_budget("adult", 0.8, None)
        with pytest.raises(BudgetExceeded):
            ledger.record("adult", [ReleaseInput("q3", "hand", [{"kind": "laplace", "scale": 4.0}])])
        after = ledger.remove("adult", first, "recorded twice by mistake", Provenance(by="bob@host"))
        assert after.epsilon == pytest.approx(0.25, abs=1e-3)
        with pytest.raises(AuditInputError, match="already removed"):
            ledger.remove("adult", first, "again")
        ledger.record("adult", [ReleaseInput("q3", "hand", [{"kind": "laplace", "scale": 4.0}])])
        state = ledger.dataset_state("adult")
    assert [r["label"] for r in state["releases"]] == ["q1", "q2", "q3"]
    assert state["releases"][0]["removed"]["by"] == "bob@host"
    assert state["releases"][0]["removed"]["reason"] == "recorded twice by mistake"


def test_a_release_over_budget_records_nothing_not_even_the_new_dataset(ledger_uri):
    with Ledger.open(ledger_uri) as ledger:
        with pytest.raises(BudgetExceeded, match="max_total_epsilon 0.5"):
            ledger.record(
                "fresh",
                [ReleaseInput("big", "hand", [{"kind": "laplace", "scale": 1.0}])],
                policy_limit=0.5,
                policy_name="strict",
            )
        assert ledger.datasets() == [] and ledger.count_releases() == 0
        # several releases at once are all-or-nothing
        ledger.set_budget("adult", 1.0, None)
        with pytest.raises(BudgetExceeded):
            ledger.record(
                "adult", [ReleaseInput(f"q{i}", "hand", [{"kind": "laplace", "scale": 2.0}]) for i in range(3)]
            )
        assert ledger.count_releases("adult") == 0


def test_the_tighter_of_the_ledgers_and_the_policys_budget_applies(ledger_uri):
    with Ledger.open(ledger_uri) as ledger:
        ledger.set_budget("adult", 5.0, None)
        with pytest.raises(BudgetExceeded, match="policy strict"):
            ledger.record(
                "adult",
                [ReleaseInput("q", "hand", [{"kind": "laplace", "scale": 1.0}])],
                policy_limit=0.5,
                policy_name="strict",
            )
        outcome = ledger.record(
            "adult", [ReleaseInput("q", "hand", [{"kind": "laplace", "scale": 1.0}])], policy_limit=8.0
        )
    assert outcome.limit == 5.0 and outcome.limit_source == "the ledger's budget for this dataset"


@pytest.mark.parametrize(
    "uri, message",
    [
        ("http://example.com/ledger", "not a supported ledger database"),
        ("mysql://user@host/db", "not a supported ledger database"),
        ("sqlite://", "needs a file"),
        ("postgresql+psycopg://user@127.0.0.1:1", "must name the database"),
    ],
)
def test_a_uri_that_is_not_a_ledger_database_is_refused(uri, message):
    with pytest.raises(AuditInputError, match=message):
        Ledger.open(uri)


def test_a_corrupt_file_is_refused_and_left_as_it_was(tmp_path):
    corrupt = tmp_path / "ledger.db"
    corrupt.write_bytes(b"SQLite format 3\x00" + os.urandom(4000))  # the right header, garbage after it
    before = corrupt.read_bytes()
    with pytest.raises(AuditInputError, match="not a SQLite database"):
        Ledger.open(str(corrupt))
    assert corrupt.read_bytes() == before
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    with pytest.raises(AuditInputError, match="not a SQLite database"):
        Ledger.open(str(other))


def test_an_unreachable_postgresql_server_is_bad_input_not_a_crash():
    with pytest.raises(AuditInputError, match="--ledger"):
        Ledger.open("postgresql+psycopg://nobody@127.0.0.1:1/ledger")


@pytest.mark.parametrize("name", ["../etc", "a/b", "a\\b", "", ".hidden", "x" * 101, "a b", "a..b"])
def test_dataset_names_are_labels_never_paths(tmp_path, name):
    with Ledger.open(str(tmp_path / "ledger.db")) as ledger:
        with pytest.raises(AuditInputError, match="--dataset"):
            ledger.record(name, [ReleaseInput("q", "hand", [{"kind": "laplace", "scale": 1.0}])])
        assert ledger.count_releases() == 0
