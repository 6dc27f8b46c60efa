"""Where a ledger lives: its URI checked without connecting, and the SQLAlchemy engine that opens it.

A path or `sqlite:///path` names a SQLite file (a FIFO, directory, device or non-SQLite file is
refused unopened: audit/ledger/integrity.py); `postgresql[+psycopg]://` names a server. Every URI
shown to the user goes through the one redaction (audit/machinery/secrets.py). SQLite engines begin
every transaction IMMEDIATE (why: audit/ledger/store.py's docstring, "Concurrency").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError

from audit.errors import AuditInputError

__all__ = ["BUSY_TIMEOUT_S", "check_ledger_uri", "describe_url", "engine_for", "known_revisions", "sqlite_file"]

BUSY_TIMEOUT_S = 120


def check_ledger_uri(uri: Any, where: str = "--ledger") -> URL:
    """The database URL of a ledger URI or path, checked without creating or connecting to anything.

    A path (or sqlite:///path) must name a SQLite database file or a new file in an existing folder;
    an existing file that is not a SQLite database is refused (corrupt, or some other file).
    """
    if not isinstance(uri, str) or not uri.strip():
        raise AuditInputError(where, "expected a path or a database URI (sqlite:///file.db, postgresql+psycopg://…)")
    text = uri.strip()
    if "://" not in text:
        return _sqlite_url(Path(text), where)
    from audit.machinery.secrets import redact

    try:
        url = make_url(text)
        port = url.port  # SQLAlchemy parses it lazily in some versions: a bad one must fail here
    except (ArgumentError, ValueError):
        raise AuditInputError(
            where,
            f"{redact(text[:200])!r} is not a database URI (expected "
            "postgresql+psycopg://user@host:port/db with a numeric port)",
        ) from None
    if port is not None and not 0 < port < 65536:
        raise AuditInputError(where, f"port {port} of {redact(text[:200])!r} is not in 1–65535")
    backend, _, driver = url.drivername.partition("+")
    if backend == "sqlite" and driver in ("", "pysqlite"):
        if not url.database or url.database == ":memory:":
            raise AuditInputError(
                where,
                "a SQLite ledger needs a file (sqlite:///path/to/ledger.db); an in-memory ledger would record nothing",
            )
        return _sqlite_url(Path(url.database), where)
    if backend in ("postgresql", "postgres") and driver in ("", "psycopg"):
        if not url.database:
            raise AuditInputError(where, "a PostgreSQL URI must name the database (postgresql+psycopg://user@host/db)")
        return url.set(drivername="postgresql+psycopg")
    raise AuditInputError(
        where,
        f"{url.drivername!r} is not a supported ledger database: use a file path, "
        "sqlite:///path or postgresql+psycopg://user@host/db",
    )


def _sqlite_url(path: Path, where: str) -> URL:
    from audit.ledger.integrity import check_sqlite_path

    path = path.expanduser()
    check_sqlite_path(path, where)  # a FIFO, directory, device or non-SQLite file is refused unopened
    return URL.create("sqlite+pysqlite", database=str(path.resolve()))


def known_revisions() -> set[str]:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(Path(__file__).resolve().parent / "migrations"))
    return {script.revision for script in ScriptDirectory.from_config(config).walk_revisions()}


def engine_for(url: URL) -> Engine:
    if url.get_backend_name() == "sqlite":
        engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S}, poolclass=None)

        @event.listens_for(engine, "connect")
        def _connect(dbapi_connection, _record):
            # pysqlite's own BEGIN is deferred (takes the write lock at the first write, after our
            # reads): switch it off and begin every transaction IMMEDIATE ourselves (below).
            dbapi_connection.isolation_level = None
            dbapi_connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
            dbapi_connection.execute("PRAGMA foreign_keys = ON")

        @event.listens_for(engine, "begin")
        def _begin(connection):
            connection.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    return create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": 15})


def sqlite_file(url: URL, where: str) -> Path:
    """The file of a SQLite ledger URL (`check_ledger_uri` refuses one that names none)."""
    if not url.database:
        raise AuditInputError(where, "a SQLite ledger must name a file")
    return Path(url.database)


def describe_url(url: URL) -> str:
    from audit.machinery.secrets import redact

    # render_as_string hides the user-info password only; a `?password=` query parameter needs redact.
    return str(url.database) if url.get_backend_name() == "sqlite" else redact(url.render_as_string(hide_password=True))
