"""The suite's new MLflow stores copy a schema MLflow migrated once per process (tests/mlflow_migration.py):
the copy must be the store MLflow itself makes, and a test about store creation must get MLflow's own path."""

from __future__ import annotations

import contextlib
import sqlite3

import pytest

from tests import mlflow_migration


def _clauses(sql: str | None) -> tuple[str, ...]:
    # MLflow's own migration writes a table's constraints in an order that varies from one process to the
    # next (two stores it migrates differ so): compare each statement's clauses, not their order.
    return tuple(sorted(line.strip().rstrip(",").strip() for line in (sql or "").splitlines()))


def _schema_and_rows(path) -> tuple[list, list, list]:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        rows = connection.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
        schema = sorted((kind, name, table, _clauses(sql)) for kind, name, table, sql in rows)
        version = connection.execute("SELECT version_num FROM alembic_version").fetchall()
        experiments = connection.execute("SELECT experiment_id, name, lifecycle_stage FROM experiments").fetchall()
    return schema, version, experiments


@pytest.mark.slow  # MLflow migrates one store here (2-4 s of CPU): the reference the copy is compared with
def test_a_store_made_from_the_template_is_the_store_mlflow_migrates(tmp_path, monkeypatch):
    import mlflow.store.db.utils as db_utils
    from mlflow.tracking import MlflowClient

    mlflow_migration.install()
    copying = db_utils._initialize_tables
    calls = []
    monkeypatch.setattr(db_utils, "_initialize_tables", lambda engine: (calls.append(engine), copying(engine))[-1])
    copied = tmp_path / "copied.db"
    client = MlflowClient(tracking_uri=f"sqlite:///{copied}")
    assert len(calls) == 1  # the store was new: it went through the copy

    monkeypatch.setattr(db_utils, "_initialize_tables", copying.migrates_with)  # MLflow's own, unwrapped
    migrated = tmp_path / "migrated.db"
    MlflowClient(tracking_uri=f"sqlite:///{migrated}").search_experiments()

    copied_schema = _schema_and_rows(copied)
    assert copied_schema == _schema_and_rows(migrated)
    assert copied_schema[1] and copied_schema[0]  # a schema version and tables: not two empty files

    # The copy is a working store: MLflow writes a run to it and reads it back.
    experiment = client.create_experiment("privacy-audit/x")
    run = client.create_run(experiment)
    client.log_metric(run.info.run_id, "epsilon", 1.5)
    assert client.get_run(run.info.run_id).data.metrics == {"epsilon": 1.5}


def test_a_store_that_is_not_empty_is_left_to_mlflow(tmp_path):
    """A half-made database (a table already there) is never overwritten by the template."""
    path = tmp_path / "half.db"
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE experiments (x INTEGER)")
        connection.commit()
    seen = []
    initialize = mlflow_migration.copying_initializer(seen.append)
    import sqlalchemy

    engine = sqlalchemy.create_engine(f"sqlite:///{path}")
    try:
        initialize(engine)
    finally:
        engine.dispose()
    assert seen == [engine]  # MLflow's own function got it
    with contextlib.closing(sqlite3.connect(path)) as connection:
        assert connection.execute("SELECT name FROM sqlite_master").fetchall() == [("experiments",)]


@pytest.mark.mlflow_migration
def test_a_test_marked_mlflow_migration_gets_mlflows_own_initializer():
    import mlflow.store.db.utils as db_utils

    assert not hasattr(db_utils._initialize_tables, "migrates_with")
