"""The ledger database is an input: what may be opened, and every row checked as it is read.

A ledger file is the user's (or anyone's) file: it may be a FIFO, a directory, someone else's
SQLite database, a ledger written by a newer privacy-audit, or a ledger whose rows were edited by
hand. Each is refused with exit 2 and one sentence naming what is wrong — never a hang, never an
unrelated database gaining our tables, never a hand-edited row composed as if it were ours.

- `check_sqlite_path`: a path is opened only when it is a regular file that starts with the SQLite
  header (or is empty, or new). The type is taken from `os.stat` BEFORE anything opens it, and
  the header is read with O_NONBLOCK, so a FIFO is never opened for a blocking read.
- `check_schema`: the tables present before migrating. A SQLite file may hold only the ledger's
  tables (a file is one application's database); a PostgreSQL database may hold other tables
  (a shared server), but ledger tables without our revision table are refused on both. A schema
  revision this version does not know (a newer privacy-audit wrote it) is refused: migrating
  "up" from an unknown revision would be a guess.
- `check_*_rows`: every value of every row read, decoded with the column's own SQLAlchemy type
  (so a row that would crash the ORM is caught first and named) and checked against the ranges
  the tool writes. A failing row is named by table and id.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

from sqlalchemy import FromClause, inspect, text
from sqlalchemy.engine import Connection

from audit.errors import AuditInputError
from audit.ledger.mechanisms import validate_mechanism
from audit.ledger.models import BudgetChange, Dataset, Release, Removal

_DATASET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def check_dataset_name(name: Any, where: str = "--dataset") -> str:
    """A dataset name is a label, never a path: letters, digits, '.', '_', '-' (≤ 100, not starting with '.')."""
    if not isinstance(name, str) or not _DATASET_NAME.fullmatch(name) or ".." in name:
        shown = repr(name)[:60]
        raise AuditInputError(
            where,
            f"expected a name of letters, digits, '.', '_' or '-' (1–100 characters, "
            f"starting with a letter or digit, no '..'), got {shown}",
        )
    return name


__all__ = [
    "SQLITE_HEADER",
    "LEDGER_TABLES",
    "VERSION_TABLE",
    "check_sqlite_path",
    "check_schema",
    "RowChecker",
    "LedgerRowError",
    "MAX_BUDGET",
]

SQLITE_HEADER = b"SQLite format 3\x00"
VERSION_TABLE = "ledger_alembic_version"
LEDGER_TABLES = frozenset(t.__tablename__ for t in (Dataset, Release, Removal, BudgetChange))
MAX_BUDGET = 1e4  # the largest max_total_epsilon `set-budget` accepts
_RESTORE = (
    "restore the ledger from a backup (rows are never edited by privacy-audit; "
    "a release is removed with `ledger remove`)"
)


class LedgerRowError(AuditInputError):
    """A row of the ledger is not one the tool could have written (edited by hand, or corrupt)."""


def check_sqlite_path(path: Path, where: str) -> None:
    """Refuse (exit 2) a path that must not be opened as a SQLite ledger; a new path is fine."""
    try:
        info = os.stat(path)  # follows a symlink: what matters is what would be opened
    except FileNotFoundError:
        if path.is_symlink():  # a new database would be created wherever the dangling link points
            raise AuditInputError(
                f"{where} '{path}'", "is a symbolic link to nothing; give the ledger file itself"
            ) from None
        if not path.parent.resolve().is_dir():
            raise AuditInputError(f"{where} '{path}'", f"folder '{path.parent}' does not exist") from None
        return
    except OSError as exc:
        raise AuditInputError(f"{where} '{path}'", f"cannot be inspected ({exc.strerror})") from None
    if stat.S_ISDIR(info.st_mode):
        raise AuditInputError(f"{where} '{path}'", "is a directory; expected a ledger file (e.g. privacy-ledger.db)")
    if not stat.S_ISREG(info.st_mode):
        kind = (
            "a FIFO (named pipe)"
            if stat.S_ISFIFO(info.st_mode)
            else "a socket"
            if stat.S_ISSOCK(info.st_mode)
            else "a device"
            if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
            else "not a regular file"
        )
        raise AuditInputError(f"{where} '{path}'", f"is {kind}; a ledger is a regular SQLite file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise AuditInputError(f"{where} '{path}'", f"cannot be read ({exc.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between stat and open
            raise AuditInputError(f"{where} '{path}'", "is not a regular file; a ledger is a regular SQLite file")
        header = os.read(fd, len(SQLITE_HEADER))
    except OSError as exc:
        raise AuditInputError(f"{where} '{path}'", f"cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)
    if header and header != SQLITE_HEADER:  # an empty file is a new database to SQLite
        raise AuditInputError(f"{where} '{path}'", "is not a SQLite database (corrupt, or another kind of file)")


def check_schema(connection: Connection, known_revisions: set[str], where: str) -> None:
    """Refuse a database that is not (or not yet) a ledger this version wrote; see the module docstring."""
    inspector = inspect(connection)
    tables = set(inspector.get_table_names())
    sqlite = connection.dialect.name == "sqlite"
    if sqlite:
        others = sorted(
            (tables | set(inspector.get_view_names()))
            - LEDGER_TABLES
            - {VERSION_TABLE}
            - {"sqlite_sequence", "sqlite_stat1", "sqlite_stat4"}
        )
        if others:
            shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
            raise AuditInputError(
                where,
                f"is a SQLite database of something else (tables: {shown}); the ledger "
                "will not add its tables to another application's database: give a new file",
            )
    ours = tables & LEDGER_TABLES
    if ours and VERSION_TABLE not in tables:
        raise AuditInputError(
            where,
            f"holds ledger tables ({', '.join(sorted(ours))}) but no {VERSION_TABLE}: "
            "it was not created by privacy-audit, or was altered; give the ledger file itself",
        )
    if VERSION_TABLE in tables:
        try:
            rows = [row[0] for row in connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}"))]
        except Exception as exc:  # noqa: BLE001 - an altered version table is the user's to fix
            raise AuditInputError(
                where, f"its {VERSION_TABLE} table cannot be read ({type(exc).__name__}); it was altered"
            ) from None
        unknown = [str(r)[:40] for r in rows if r not in known_revisions]
        if unknown or len(rows) > 1:
            raise AuditInputError(
                where,
                f"has schema revision {', '.join(map(repr, unknown or rows))}, which this "
                f"privacy-audit does not know (it knows {', '.join(sorted(known_revisions))}): "
                "written by a newer version, or edited — use the version that wrote it",
            )
        if rows and not ours.issuperset(LEDGER_TABLES):
            missing = ", ".join(sorted(LEDGER_TABLES - ours))
            raise AuditInputError(
                where, f"has a schema revision but its table(s) {missing} are missing: it was altered; " + _RESTORE
            )


def _finite(value: Any, low: float, high: float, *, low_open: bool = False, high_open: bool = False) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    number = float(value)
    if not math.isfinite(number):
        return False
    return (number > low if low_open else number >= low) and (number < high if high_open else number <= high)


class RowChecker:
    """Decodes raw rows with each column's own type and checks them; names the first bad row."""

    def __init__(self, connection_dialect, where: str):
        self.dialect, self.where = connection_dialect, where

    def _decoded(self, table: FromClause, row: dict[str, Any], label: str) -> dict[str, Any]:
        out = {}
        for column in table.columns:
            if column.name not in row:
                continue
            value = row[column.name]
            # SQLite hands raw text back for a plain SELECT (JSON, dates): decode it as the ORM would.
            # psycopg returns typed values (floats, datetimes, parsed JSON) itself.
            processor: Callable | None = (
                column.type.dialect_impl(self.dialect).result_processor(self.dialect, None)
                if self.dialect.name == "sqlite"
                else None
            )
            try:
                out[column.name] = processor(value) if processor is not None and value is not None else value
            except (ValueError, TypeError, OverflowError, RecursionError, json.JSONDecodeError) as exc:
                self.fail(label, f"column {column.name} cannot be decoded ({type(exc).__name__})")
            if value is None and not column.nullable:
                self.fail(label, f"column {column.name} is empty")
        return out

    def fail(self, label: str, problem: str) -> NoReturn:
        raise LedgerRowError(self.where, f"{label} was edited by hand or is corrupt: {problem[:200]}; {_RESTORE}")

    def _when(self, value: Any, label: str, column: str) -> None:
        if not isinstance(value, datetime):
            self.fail(label, f"{column} is not a date and time")

    def _text(self, value: Any, label: str, column: str, limit: int) -> None:
        if not isinstance(value, str) or len(value) > limit:
            self.fail(label, f"{column} is not a text of at most {limit:,} characters")

    def dataset(self, raw: dict[str, Any]) -> dict[str, Any]:

        label = f"dataset row id {str(raw.get('id'))[:20]}"
        row = self._decoded(Dataset.__table__, raw, label)
        try:
            check_dataset_name(row.get("name"), "name")
        except AuditInputError:
            self.fail(label, f"name {str(row.get('name'))[:40]!r} is not a dataset name")
        label = f"dataset '{row['name']}'"
        if not _finite(row.get("delta"), 0, 1, high_open=True):
            self.fail(label, f"delta {str(row.get('delta'))[:30]!r} is not in [0, 1)")
        budget = row.get("max_total_epsilon")
        if budget is not None and not _finite(budget, 0, MAX_BUDGET, low_open=True):
            self.fail(label, f"max_total_epsilon {str(budget)[:30]!r} is not in (0, {MAX_BUDGET:g}]")
        self._when(row.get("created_at"), label, "created_at")
        return row

    def release(self, raw: dict[str, Any], dataset: str) -> dict[str, Any]:
        label = f"release #{str(raw.get('id'))[:20]} of dataset '{dataset}'"
        row = self._decoded(Release.__table__, raw, label)
        mechanisms = row.get("mechanisms")
        if not isinstance(mechanisms, list) or not mechanisms or len(mechanisms) > 10_000:
            self.fail(label, "mechanisms is not a list of 1–10,000 mechanisms")
        for i, spec in enumerate(mechanisms):
            try:
                checked = validate_mechanism(spec, f"mechanism {i + 1}")
            except AuditInputError as exc:
                self.fail(label, str(exc))
            if any(spec.get(k) != v for k, v in checked.items() if k in spec):
                self.fail(label, f"mechanism {i + 1} is not in the form the tool writes")
        self._text(row.get("label"), label, "label", 300)
        self._text(row.get("source"), label, "source", 40)
        self._text(row.get("by"), label, "by", 200)
        self._text(row.get("command"), label, "command", 100_000)
        for column in ("epsilon_after", "delta_after"):
            value = row.get(column)
            if value is not None and not _finite(value, 0, math.inf):
                self.fail(label, f"{column} {str(value)[:30]!r} is not a finite number ≥ 0")
        self._when(row.get("at"), label, "at")
        return row

    def removal(self, raw: dict[str, Any]) -> dict[str, Any]:
        label = f"removal row id {str(raw.get('id'))[:20]} (of release #{str(raw.get('release_id'))[:20]})"
        row = self._decoded(Removal.__table__, raw, label)
        if isinstance(row.get("release_id"), bool) or not isinstance(row.get("release_id"), int):
            self.fail(label, "release_id is not a release number")
        self._text(row.get("reason"), label, "reason", 100_000)
        self._text(row.get("by"), label, "by", 200)
        self._when(row.get("at"), label, "at")
        return row
