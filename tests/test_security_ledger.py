"""The ledger database is an input (issue #39 item 3) and its budget rule (issue #36 item 4).

Each case is a distinct hostile ledger or flag: a FIFO (never opened for reading: the test would
hang), a directory, a device, someone else's SQLite database (left exactly as it was), a ledger
from a newer version, hand-edited rows (each named), numbers outside the range table, numbers
inside it that no PLD grid here could hold (computed by the RDP bound instead, never a
MemoryError), `set-budget` below what is spent, and an interrupt after the commit. Plus hypothesis
fuzzing of the row reader: any value in any column ends in a result or a named refusal.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import sqlite3
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.errors import AuditInputError
from audit.ledger.composition import compose_mechanisms
from audit.ledger.store import Ledger, ReleaseInput
from tests.conftest import run_cli_in_process

pytestmark = pytest.mark.security

READERS = {
    "record": ["ledger", "record", "--dataset", "d", "--epsilon", "1", "--delta", "0", "--ledger"],
    "show": ["ledger", "show", "--dataset", "d", "--ledger"],
    "list": ["ledger", "list", "--ledger"],
    "set-budget": ["ledger", "set-budget", "--dataset", "d", "--max-epsilon", "5", "--ledger"],
}


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _ledger_with_one_release(path: Path) -> Path:
    with Ledger.open(str(path)) as ledger:
        ledger.record("d", [ReleaseInput("q", "hand", [{"kind": "laplace", "scale": 2.0}])])
    return path


def _sql(path: Path, *statements: str) -> Path:
    connection = sqlite3.connect(path)
    for statement in statements:
        connection.execute(statement)
    connection.commit()
    connection.close()
    return path


# ----------------------------------------------------------------------------------------------
# Files that are not a ledger: refused unopened or unchanged, exit 2, one line.


def _fifo(folder: Path) -> Path:
    path = folder / "fifo.db"
    os.mkfifo(path)
    return path


def _symlink_to_fifo(folder: Path) -> Path:
    target = _fifo(folder)
    link = folder / "link.db"
    link.symlink_to(target)
    return link


def _directory(folder: Path) -> Path:
    path = folder / "dir.db"
    path.mkdir()
    return path


def _foreign(folder: Path) -> Path:
    return _sql(
        folder / "app.db",
        "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)",
        "INSERT INTO users (name) VALUES ('alice')",
    )


def _foreign_view(folder: Path) -> Path:
    return _sql(folder / "view.db", "CREATE VIEW answer AS SELECT 42 AS value")


def _lookalike(folder: Path) -> Path:  # our table name, not our schema, no revision table
    return _sql(folder / "lookalike.db", "CREATE TABLE ledger_datasets (id INTEGER, name TEXT)")


def _newer(folder: Path) -> Path:
    return _sql(
        _ledger_with_one_release(folder / "newer.db"), "UPDATE ledger_alembic_version SET version_num = '0099_future'"
    )


def _two_revisions(folder: Path) -> Path:
    return _sql(_ledger_with_one_release(folder / "two.db"), "INSERT INTO ledger_alembic_version VALUES ('0002_x')")


def _missing_table(folder: Path) -> Path:
    return _sql(_ledger_with_one_release(folder / "missing.db"), "DROP TABLE ledger_budget_changes")


def _extra_table(folder: Path) -> Path:
    return _sql(_ledger_with_one_release(folder / "extra.db"), "CREATE TABLE notes (x TEXT)")


def _text_file(folder: Path) -> Path:
    path = folder / "notes.db"
    path.write_text("not a database\n")
    return path


def _truncated_header(folder: Path) -> Path:
    path = folder / "trunc.db"
    path.write_bytes(b"SQLite for")
    return path


HOSTILE_FILES = {
    "FIFO": (_fifo, "FIFO"),
    "symlink to a FIFO": (_symlink_to_fifo, "FIFO"),
    "directory": (_directory, "directory"),
    "another application's database": (_foreign, "something else"),
    "a database with a view": (_foreign_view, "something else"),
    "ledger table name without a revision": (_lookalike, "not created by privacy-audit"),
    "revision from a newer version": (_newer, "0099_future"),
    "two revisions": (_two_revisions, "schema revision"),
    "ledger with a table dropped": (_missing_table, "missing"),
    "ledger with an extra table": (_extra_table, "something else"),
    "text file": (_text_file, "not a SQLite database"),
    "truncated header": (_truncated_header, "not a SQLite database"),
}


@pytest.mark.parametrize("command", list(READERS), ids=list(READERS))
@pytest.mark.parametrize("case", list(HOSTILE_FILES), ids=list(HOSTILE_FILES))
def test_a_file_that_is_not_our_ledger_is_refused_and_left_as_it_was(tmp_path, case, command):
    make, words = HOSTILE_FILES[case]
    path = make(tmp_path)
    before = None if stat.S_ISFIFO(os.stat(path).st_mode) or path.is_dir() else _digest(path)
    ended = run_cli_in_process(*READERS[command], str(path), cwd=tmp_path)
    assert ended.returncode == 2, (ended.returncode, ended.stderr)
    assert ended.stderr.startswith("error:") and ended.stderr.count("\n") == 1 and words in ended.stderr, ended.stderr
    if before is not None:
        assert _digest(path) == before, "the refused database was changed"


def test_a_character_device_is_refused(tmp_path):
    ended = run_cli_in_process(*READERS["show"], "/dev/null", cwd=tmp_path)
    assert ended.returncode == 2 and "device" in ended.stderr


# ----------------------------------------------------------------------------------------------
# Hand-edited rows: each named, exit 2, for every command that reads them.

ROW_EDITS = {
    "mechanisms not JSON": ("UPDATE ledger_releases SET mechanisms = '[{oops'", "mechanisms"),
    "mechanisms nested 100000 deep": (
        "UPDATE ledger_releases SET mechanisms = '" + "[" * 100_000 + "]" * 100_000 + "'",
        "mechanisms",
    ),
    "mechanisms null": ("UPDATE ledger_releases SET mechanisms = 'null'", "mechanisms"),
    "mechanisms empty list": ("UPDATE ledger_releases SET mechanisms = '[]'", "mechanisms"),
    "unknown kind": ("""UPDATE ledger_releases SET mechanisms = '[{"kind": "magic"}]'""", "kind"),
    "negative scale": (
        """UPDATE ledger_releases SET mechanisms = '[{"kind": "laplace", "scale": -2.0, "sensitivity": 1.0, "count": 1}]'""",
        "scale",
    ),
    "scale as a string": (
        """UPDATE ledger_releases SET mechanisms = '[{"kind": "laplace", "scale": "2.0", "sensitivity": 1.0, "count": 1}]'""",
        "scale",
    ),
    "count a fraction": (
        """UPDATE ledger_releases SET mechanisms = '[{"kind": "laplace", "scale": 2.0, "sensitivity": 1.0, "count": 2.5}]'""",
        "count",
    ),
    "unknown field": (
        """UPDATE ledger_releases SET mechanisms = '[{"kind": "laplace", "scale": 2.0, "sensitivity": 1.0, "count": 1, "x": 1}]'""",
        "unknown field",
    ),
    "sigma below the range": (
        """UPDATE ledger_releases SET mechanisms = '[{"kind": "dpsgd", "noise_multiplier": 1e-300, "sample_rate": 0.1, "steps": 10}]'""",
        "noise_multiplier",
    ),
    "date garbage": ("UPDATE ledger_releases SET at = 'yesterday-ish'", "at"),
    "epsilon_after text": ("UPDATE ledger_releases SET epsilon_after = 'abc'", "epsilon_after"),
    "epsilon_after negative": ("UPDATE ledger_releases SET epsilon_after = -1", "epsilon_after"),
    "dataset delta 2": ("UPDATE ledger_datasets SET delta = 2", "delta"),
    "dataset budget negative": ("UPDATE ledger_datasets SET max_total_epsilon = -1", "max_total_epsilon"),
    "dataset created_at garbage": ("UPDATE ledger_datasets SET created_at = 'x'", "created_at"),
}


@pytest.mark.parametrize("command", ["record", "show", "set-budget"])
@pytest.mark.parametrize("edit", list(ROW_EDITS), ids=list(ROW_EDITS))
def test_a_hand_edited_row_is_named_and_refused(tmp_path, edit, command):
    statement, words = ROW_EDITS[edit]
    path = _sql(_ledger_with_one_release(tmp_path / "l.db"), statement)
    before = _digest(path)
    ended = run_cli_in_process(*READERS[command], str(path), cwd=tmp_path)
    assert ended.returncode == 2, (ended.returncode, ended.stderr)
    assert "edited by hand or is corrupt" in ended.stderr and words in ended.stderr, ended.stderr
    assert ("release #1" in ended.stderr) or ("dataset" in ended.stderr)
    assert _digest(path) == before


def test_a_renamed_dataset_with_path_characters_is_named_by_list(tmp_path):
    path = _sql(_ledger_with_one_release(tmp_path / "l.db"), "UPDATE ledger_datasets SET name = '../etc'")
    ended = run_cli_in_process(*READERS["list"], str(path), cwd=tmp_path)
    assert ended.returncode == 2 and "is not a dataset name" in ended.stderr, ended.stderr


@pytest.mark.slow  # ~40 s: 60 ledgers written and read
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    column=st.sampled_from(
        [("ledger_releases", c) for c in ("mechanisms", "at", "epsilon_after", "label", "by", "delta_after")]
        + [("ledger_datasets", c) for c in ("delta", "max_total_epsilon", "created_at", "name")]
    ),
    value=st.one_of(
        st.none(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=40),
        st.binary(max_size=20),
        st.recursive(
            st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False), st.text(max_size=5)),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
            max_leaves=8,
        ).map(json.dumps),
    ),
)
def test_fuzzed_rows_end_in_a_result_or_a_named_refusal(tmp_path_factory, column, value):
    folder = tmp_path_factory.mktemp("fuzz")
    path = _ledger_with_one_release(folder / "l.db")
    connection = sqlite3.connect(path)
    try:
        connection.execute(f"UPDATE {column[0]} SET {column[1]} = ?", (value,))
        connection.commit()
    except (sqlite3.IntegrityError, OverflowError):  # the database itself refused the value: nothing to read
        return
    finally:
        connection.close()
    try:
        with Ledger.open(str(path), create=False) as ledger:
            names = ledger.datasets()
            for name in names:
                state = ledger.dataset_state(name)
                assert math.isnan(state["composition"].epsilon) is False
    except AuditInputError as refused:
        assert "edited by hand or is corrupt" in str(refused) or "no dataset" in str(refused), refused


# ----------------------------------------------------------------------------------------------
# Numbers: outside the range table → exit 2; inside it → computed, never MemoryError/OverflowError.

OUT_OF_RANGE = {
    "sigma 1e-300": ["--noise-multiplier", "1e-300", "--sample-rate", "0.01", "--steps", "10"],
    "sigma zero": ["--noise-multiplier", "0", "--sample-rate", "0.01", "--steps", "10"],
    "sigma NaN": ["--noise-multiplier", "nan", "--sample-rate", "0.01", "--steps", "10"],
    "sigma inf": ["--noise-multiplier", "inf", "--sample-rate", "0.01", "--steps", "10"],
    "sample rate zero": ["--noise-multiplier", "1", "--sample-rate", "0", "--steps", "10"],
    "sample rate 1.5": ["--noise-multiplier", "1", "--sample-rate", "1.5", "--steps", "10"],
    "steps zero": ["--noise-multiplier", "1", "--sample-rate", "0.01", "--steps", "0"],
    "steps negative": ["--noise-multiplier", "1", "--sample-rate", "0.01", "--steps", "-5"],
    "steps above the table": ["--noise-multiplier", "1", "--sample-rate", "0.01", "--steps", "100000001"],
    "count zero": ["--laplace-scale", "1", "--count", "0"],
    "count above the table": ["--laplace-scale", "1", "--count", "10000001"],
    "gaussian scale 1e-300": ["--gaussian-scale", "1e-300"],
    "laplace scale far below its sensitivity": ["--laplace-scale", "1e-6", "--sensitivity", "10"],
    "sensitivity zero": ["--gaussian-scale", "1", "--sensitivity", "0"],
    "zcdp rho zero": ["--zcdp-rho", "0"],
    "zcdp rho huge": ["--zcdp-rho", "1e9"],
    "epsilon above 1000": ["--epsilon", "1001", "--delta", "0"],
    "delta one": ["--epsilon", "1", "--delta", "1"],
    "delta negative": ["--epsilon", "1", "--delta", "-0.1"],
}


@pytest.mark.parametrize("case", list(OUT_OF_RANGE), ids=list(OUT_OF_RANGE))
def test_ledger_record_numbers_outside_the_range_table_are_exit_2(tmp_path, case):
    ended = run_cli_in_process(
        "ledger", "record", "--dataset", "d", "--ledger", "l.db", *OUT_OF_RANGE[case], cwd=tmp_path
    )
    assert ended.returncode == 2, (ended.returncode, ended.stderr)
    assert ended.stderr.startswith("error: --") and ended.stderr.count("\n") == 1, ended.stderr
    assert not (tmp_path / "l.db").exists()


@pytest.mark.parametrize(
    "flags",
    [
        ["--max-epsilon", "0"],
        ["--max-epsilon", "1e5"],
        ["--max-epsilon", "nan"],
        ["--delta", "1"],
        ["--delta", "-1e-9"],
    ],
    ids=lambda f: " ".join(f),
)
def test_set_budget_numbers_outside_the_range_table_are_exit_2(tmp_path, flags):
    ended = run_cli_in_process("ledger", "set-budget", "--dataset", "d", "--ledger", "l.db", *flags, cwd=tmp_path)
    assert ended.returncode == 2 and not (tmp_path / "l.db").exists(), ended.stderr


@pytest.mark.parametrize("release", ["0", "-3", str(2**70)])
def test_remove_with_a_release_number_out_of_range_is_exit_2(tmp_path, release):
    _ledger_with_one_release(tmp_path / "l.db")
    ended = run_cli_in_process(
        "ledger", "remove", "--dataset", "d", "--ledger", "l.db", "--release", release, "--reason", "x", cwd=tmp_path
    )
    assert ended.returncode == 2, ended.stderr


@pytest.mark.parametrize(
    "mechanism",
    [
        {"kind": "dpsgd", "noise_multiplier": 1.0, "sample_rate": 0.01, "steps": 100_000_000},
        {"kind": "laplace", "scale": 1.0, "sensitivity": 1.0, "count": 10_000_000},
        {"kind": "gaussian", "scale": 1.0, "sensitivity": 1.0, "count": 10_000_000},
        {"kind": "epsilon_delta", "epsilon": 1.0, "delta": 0.0, "count": 10_000_000},
        {"kind": "dpsgd", "noise_multiplier": 1e-3, "sample_rate": 1.0, "steps": 1},
    ],
    ids=[
        "1e8 DP-SGD steps",
        "1e7 Laplace queries",
        "1e7 Gaussian queries",
        "1e7 pure pairs",
        "sigma at the table's floor",
    ],
)
def test_counts_in_range_that_no_pld_grid_holds_are_bounded_by_rdp(mechanism):
    c = compose_mechanisms([mechanism], 1e-5)
    assert math.isfinite(c.epsilon) and c.epsilon > 200
    assert c.method != "pld" and "PLD not computed" in c.method_note and "iB" in c.method_note, c.method_note
    assert c.advanced_epsilon <= c.basic_epsilon


# ----------------------------------------------------------------------------------------------
# The budget rule (docs/ledger.md): below the spent ε refused, nothing saved; advanced never above basic.


def test_set_budget_below_what_is_spent_refuses_and_saves_nothing(tmp_path):
    run_cli_in_process(
        "ledger", "record", "--dataset", "d", "--ledger", "l.db", "--epsilon", "3", "--delta", "0", cwd=tmp_path
    )
    refused = run_cli_in_process(
        "ledger", "set-budget", "--dataset", "d", "--ledger", "l.db", "--max-epsilon", "1", cwd=tmp_path
    )
    assert refused.returncode == 1 and "nothing was saved" in refused.stderr and "FAIL" in refused.stderr
    shown = run_cli_in_process("ledger", "show", "--dataset", "d", "--ledger", "l.db", "--json", cwd=tmp_path)
    assert json.loads(shown.stdout)["max_total_epsilon"] is None
    with sqlite3.connect(tmp_path / "l.db") as connection:
        assert connection.execute("SELECT COUNT(*) FROM ledger_budget_changes").fetchone()[0] == 0
    kept = run_cli_in_process(
        "ledger", "set-budget", "--dataset", "d", "--ledger", "l.db", "--max-epsilon", "3.5", cwd=tmp_path
    )
    assert kept.returncode == 0 and "budget 3.5" in kept.stdout


@pytest.mark.parametrize(
    "mechanisms",
    [
        [{"kind": "laplace", "scale": 10.0, "count": 10}],
        [{"kind": "epsilon_delta", "epsilon": 3.0, "delta": 0.0}],
        pytest.param(
            [{"kind": "dpsgd", "noise_multiplier": 1.1, "sample_rate": 0.01, "steps": 1000}], marks=pytest.mark.slow
        ),
        [{"kind": "laplace", "scale": 100.0, "count": 1000}],
        [{"kind": "gaussian", "scale": 0.5, "count": 3}, {"kind": "zcdp", "rho": 0.5}],
    ],
    ids=["10 Laplace", "one pair", "one training", "1000 small Laplace", "Gaussian + zCDP"],
)
def test_advanced_composition_is_never_reported_above_basic(mechanisms):
    from audit.ledger.mechanisms import validate_mechanism

    c = compose_mechanisms([validate_mechanism(m) for m in mechanisms], 1e-5)
    assert c.advanced_epsilon == min(c.advanced_formula_epsilon, c.basic_epsilon)
    assert bool(c.advanced_note) == (c.advanced_formula_epsilon > c.basic_epsilon)


def test_advanced_looser_than_basic_is_said_in_words_on_the_console(tmp_path):
    ended = run_cli_in_process(
        "ledger", "record", "--dataset", "d", "--ledger", "l.db", "--epsilon", "3", "--delta", "0", cwd=tmp_path
    )
    assert "basic composition 3, advanced 3 (= basic: the advanced formula is looser here)" in ended.stdout
    assert "71.6" not in ended.stdout


def test_set_budget_help_offers_no_double_negative(tmp_path):
    ended = run_cli_in_process("ledger", "set-budget", "--help", cwd=tmp_path)
    assert "--no-limit" in ended.stdout and "--no-no-limit" not in ended.stdout


# ----------------------------------------------------------------------------------------------
# Interrupts: after the commit the release is kept and said so (0); before it, nothing kept (130).


def _interrupt_on_commit(number: int):
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    seen = []

    def on_commit(_connection):
        seen.append(1)
        if len(seen) == number:
            os.kill(os.getpid(), signal.SIGINT)

    event.listen(Engine, "commit", on_commit)
    return lambda: event.remove(Engine, "commit", on_commit)


def test_an_interrupt_at_the_commit_reports_the_kept_release_with_exit_0(tmp_path):
    remove = _interrupt_on_commit(2)  # the 1st commit is the schema migration, the 2nd the release
    try:
        ended = run_cli_in_process(
            "ledger", "record", "--dataset", "d", "--ledger", "l.db", "--epsilon", "1", "--delta", "0", cwd=tmp_path
        )
    finally:
        remove()
    assert ended.returncode == 0, ended.stderr
    assert "recorded #1" in ended.stdout and "recorded #1 is kept" in ended.stderr
    with Ledger.open(str(tmp_path / "l.db"), create=False) as ledger:
        assert ledger.count_releases("d") == 1


def test_an_interrupt_before_the_commit_keeps_nothing_and_exits_130(tmp_path):
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    def on_insert(_conn, _cursor, statement, *_args):
        if statement.startswith("INSERT INTO ledger_releases"):
            os.kill(os.getpid(), signal.SIGINT)

    event.listen(Engine, "before_cursor_execute", on_insert)
    try:
        ended = run_cli_in_process(
            "ledger", "record", "--dataset", "d", "--ledger", "l.db", "--epsilon", "1", "--delta", "0", cwd=tmp_path
        )
    finally:
        event.remove(Engine, "before_cursor_execute", on_insert)
    assert ended.returncode == 130 and "recorded" not in ended.stdout
    with Ledger.open(str(tmp_path / "l.db"), create=False) as ledger:
        assert ledger.count_releases() == 0


# ----------------------------------------------------------------------------------------------
# A one-run white-box result is a release the ledger can record (issue #39 item 6).


def test_a_one_run_whitebox_result_is_recognised_as_its_dpsgd_release():
    from audit.ledger.sources import refuted_claims, releases_in_results

    result = {
        "audit": "whitebox-audit",
        "mode": "one-run",
        "subject": "MLP",
        "settings": {
            "noise_multiplier": 1.0,
            "sample_rate": 1.0,
            "steps": 20,
            "accountant_history": [[1.0, 1.0, 20.0]],
        },
        "claim": {"epsilon": 28.37, "source": "PLD accountant of the run's (σ, q, T)"},
        "claimed_epsilon": 28.37,
        "delta": 1e-5,
        "verdict": {"status": "pass", "claims": []},
    }
    found, _, kind = releases_in_results(result, "r")
    assert kind == "whitebox-audit"
    assert found[0][1] == [{"kind": "dpsgd", "noise_multiplier": 1.0, "sample_rate": 1.0, "steps": 20.0}]
    assert refuted_claims({**result, "verdict": {"status": "fail", "reasons": ["refuted"]}})
