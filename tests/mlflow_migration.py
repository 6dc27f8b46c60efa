"""Every new MLflow SQLite store a test process opens gets its schema copied from one migrated by MLflow.

Opening a new SQLite store makes MLflow create its tables and run its alembic migrations: 2.4-4.4 s of CPU
per store (measured in-process, MLflow 3.17, load ~7), paid by every test whose command writes to a store of
its own (the default `sqlite:///mlflow.db` in the test's folder). `install()` wraps MLflow's
`mlflow.store.db.utils._initialize_tables` — what `SqlAlchemyStore` calls on a database without MLflow's
tables — so that, for an empty SQLite file, the pages of a template database are copied into it (SQLite's
backup API, ~0.1 s) instead. The template is made once per process by MLflow's own `_initialize_tables` on a
fresh file: the store a test gets is, page for page, the one MLflow would have made; the rest of MLflow's
store start-up (schema check, default experiment) runs on it as before. A database that is not a file, or
not empty (a half-made store), is left to MLflow.

tests/conftest.py installs it for each test (a test that is about MLflow creating its store opts out with
`@pytest.mark.mlflow_migration`); tests/cli_server.py installs it in the preloaded CLI, whose forked commands
inherit it. A fresh `python -m audit.cli` process migrates as a user's first run does.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

_template: Path | None = None


def _migrated_template(initialize: Callable[[Any], None], folder: Path | None = None) -> Path:
    global _template
    if _template is None:
        import sqlalchemy

        if folder is None:
            folder = Path(tempfile.mkdtemp(prefix="privacy-audit-mlflow-schema-"))
            atexit.register(shutil.rmtree, folder, True)
        path = Path(folder) / "mlflow-schema.db"
        engine = sqlalchemy.create_engine(f"sqlite:///{path}")
        try:
            initialize(engine)  # MLflow's own: create_all and the alembic upgrade to head
        finally:
            engine.dispose()
        _template = path
    return _template


def _empty_sqlite_file(engine: Any) -> str | None:
    """The database file of `engine` when it is SQLite, on disk, and holds no table yet; else None."""
    if engine.url.get_backend_name() != "sqlite":
        return None
    database = engine.url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    with contextlib.closing(sqlite3.connect(database)) as connection:
        (objects,) = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return database if objects == 0 else None


def copying_initializer(initialize: Callable[[Any], None]) -> Callable[[Any], None]:
    """`initialize` (MLflow's `_initialize_tables`), copying a template made by it into empty SQLite files."""

    def initialize_tables(engine: Any) -> None:
        database = _empty_sqlite_file(engine)
        if database is None:
            initialize(engine)
            return
        template = _migrated_template(initialize)
        with (
            contextlib.closing(sqlite3.connect(template)) as source,
            contextlib.closing(sqlite3.connect(database)) as target,
        ):
            source.backup(target)

    initialize_tables.migrates_with = initialize  # type: ignore[attr-defined]  # MLflow's own, for an opt-out
    return initialize_tables


def install(template_folder: Path | None = None) -> None:
    """Wrap MLflow's `_initialize_tables` in this process (once: installing again changes nothing). With
    `template_folder`, the template is made there now (a server whose forked children share it: made in each
    child, it would be made once per child), else at the first new store."""
    import mlflow.store.db.utils as db_utils

    if not hasattr(db_utils._initialize_tables, "migrates_with"):
        db_utils._initialize_tables = copying_initializer(db_utils._initialize_tables)
    if template_folder is not None:
        _migrated_template(db_utils._initialize_tables.migrates_with, template_folder)  # type: ignore[attr-defined]
