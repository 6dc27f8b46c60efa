"""The ledger database: open (and migrate), record releases under the budget, list, remove, set a budget.

One `Ledger` per URI: a SQLite file by default (a path or `sqlite:///path`: zero set-up) or a
PostgreSQL server (`postgresql+psycopg://user@host/db`; `postgresql://` means the same). The schema
comes from the Alembic migrations shipped in this package, run when the ledger is opened.

Concurrency (why each choice): recording reads the dataset's releases, composes them with the new
ones, checks the budget and inserts — all in ONE transaction that holds the dataset's write lock,
so two writers can neither both pass a budget that only one fits in, nor lose or double a row.
SQLite: every transaction starts with BEGIN IMMEDIATE (the database write lock, taken before the
first read) and waits up to `BUSY_TIMEOUT_S` for it. PostgreSQL: the dataset's row is locked
with SELECT … FOR UPDATE; the migration runs under a transaction-scoped advisory lock so that
writers opening a fresh database at once do not race to create the tables.
Where a ledger lives (URI checks, engines) is audit/ledger/database.py; who recorded a row is
audit/ledger/provenance.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import DatabaseError, DBAPIError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session

from audit.errors import AuditInputError
from audit.ledger.composition import Composition, compose_mechanisms
from audit.ledger.database import (
    BUSY_TIMEOUT_S,
    check_ledger_uri,
    describe_url,
    engine_for,
    known_revisions,
    sqlite_file,
)
from audit.ledger.integrity import check_dataset_name  # noqa: F401  (re-exported: the CLI and sources call it here)
from audit.ledger.mechanisms import describe_mechanism, validate_mechanism
from audit.ledger.models import BudgetChange, Dataset, Release, Removal
from audit.ledger.provenance import Provenance, file_sha256

__all__ = [
    "DEFAULT_LEDGER",
    "DEFAULT_DELTA",
    "BUSY_TIMEOUT_S",
    "Ledger",
    "ReleaseInput",
    "Provenance",
    "BudgetExceeded",
    "BudgetBelowSpent",
    "RecordOutcome",
    "check_dataset_name",
    "check_ledger_uri",
    "preflight_ledger",
    "file_sha256",
]

DEFAULT_LEDGER = "privacy-ledger.db"
DEFAULT_DELTA = 1e-5  # a new dataset's δ until `set-budget --delta` says otherwise
_MIGRATION_LOCK_KEY = 0x5052_4956_4C45_4447 & 0x7FFF_FFFF_FFFF_FFFF  # "PRIVLEDG": any fixed bigint


class BudgetExceeded(Exception):
    """Recording would take the dataset past its budget: nothing was recorded (exit 1)."""

    def __init__(self, dataset: str, limit: float, limit_source: str, composition: Composition):
        self.dataset, self.limit, self.limit_source, self.composition = dataset, limit, limit_source, composition
        spent = "∞" if math.isinf(composition.epsilon) else f"{composition.epsilon:.4g}"
        super().__init__(
            f"dataset '{dataset}': recording this release would spend ε = {spent} at δ = "
            f"{composition.delta:g} ({composition.method}) > max_total_epsilon {limit:g} "
            f"({limit_source}); nothing was recorded"
        )


class BudgetBelowSpent(Exception):
    """`set-budget` below what the dataset has already spent: refused, nothing saved (exit 1)."""

    def __init__(self, dataset: str, limit: float, composition: Composition):
        self.dataset, self.limit, self.composition = dataset, limit, composition
        spent = "∞" if math.isinf(composition.epsilon) else f"{composition.epsilon:.4g}"
        super().__init__(
            f"'{dataset}' has already spent ε = {spent} at δ = {composition.delta:g} "
            f"({composition.method}) > the proposed budget {limit:g}: nothing was saved "
            "(remove releases with `ledger remove`, or set a budget at or above the spent ε)"
        )


@dataclass(frozen=True)
class ReleaseInput:
    """One release to record: what it was (label, source) and its mechanisms (validated on record)."""

    label: str
    source: str
    mechanisms: list[dict[str, Any]]
    source_file: str | None = None
    source_sha256: str | None = None
    mlflow_run_id: str | None = None


@dataclass(frozen=True)
class RecordOutcome:
    release_ids: list[int]
    composition: Composition | None  # None when recorded with compute_spent=False and no limit
    limit: float | None
    limit_source: str | None
    # Ctrl-C / SIGTERM arrived while the commit was held (the release is kept: exit 0, never 130),
    # and the holder itself when the caller asked to keep holding until it has said what was recorded.
    interrupted_after_commit: bool = False
    held: Any = None


def preflight_ledger(uri: Any, where: str = "--ledger") -> URL:
    """Everything about a ledger that can be refused, checked BEFORE an audit runs, writing nothing.

    The URI's form; for an existing SQLite file, its schema read-only (a foreign database or an
    unknown revision is refused now, not after an hour of training); for PostgreSQL, that the
    server answers and its schema is ours. A new SQLite path stays new until a release is recorded.
    """
    from audit.ledger.integrity import check_schema

    url = check_ledger_uri(uri, where)
    if url.get_backend_name() == "sqlite":
        path = sqlite_file(url, where)
        if not path.is_file() or path.stat().st_size == 0:
            return url
        from urllib.parse import quote

        engine = create_engine(
            URL.create("sqlite+pysqlite", database=f"file:{quote(str(path))}?mode=ro", query={"uri": "true"}),
            connect_args={"timeout": BUSY_TIMEOUT_S},
        )
    else:
        try:
            engine = engine_for(url)
        except (NoSuchModuleError, ImportError):
            raise AuditInputError(
                where, "PostgreSQL needs the [postgres] extra (pip install 'privacy-audit[postgres]')"
            ) from None
    ledger = Ledger(url, engine, where)
    try:
        with ledger._errors(), engine.connect() as connection:
            check_schema(connection, known_revisions(), f"{where} '{ledger.description}'")
    finally:
        engine.dispose()
    return url


class Ledger:
    """An open ledger. `Ledger.open(uri)` validates, connects and migrates; use as a context manager."""

    def __init__(self, url: URL, engine: Engine, where: str):
        self.url, self.engine, self.where = url, engine, where

    @classmethod
    def open(cls, uri: str, where: str = "--ledger", *, create: bool = True) -> Ledger:
        """`create=False` (commands that only read or amend): a SQLite file that does not exist is an error."""
        url = check_ledger_uri(uri, where)
        if not create and url.get_backend_name() == "sqlite" and not sqlite_file(url, where).is_file():
            raise AuditInputError(
                f"{where} '{url.database}'", "no ledger there yet (record a release or set a budget first)"
            )
        try:
            engine = engine_for(url)
        except NoSuchModuleError:
            raise AuditInputError(
                where, "PostgreSQL needs the [postgres] extra (pip install 'privacy-audit[postgres]')"
            ) from None
        except ImportError as exc:
            raise AuditInputError(
                where, f"the database driver is not installed ({exc}); pip install 'privacy-audit[postgres]'"
            ) from None
        ledger = cls(url, engine, where)
        with ledger._errors():
            ledger._upgrade_schema()
        return ledger

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def description(self) -> str:
        return describe_url(self.url)

    # -----------------------------------------------------------------------------------------
    def _errors(self):
        """Database errors that are the user's to fix (not a database, server unreachable) → exit 2."""
        ledger = self

        class _Translate:
            def __enter__(self):
                return None

            def __exit__(self, kind, exc, tb):
                if isinstance(exc, DBAPIError) and any(
                    word in str(exc.orig).lower()
                    for word in (
                        "connection option",
                        "invalid dsn",
                        "invalid uri",
                        "invalid sslmode",
                        "invalid integer value",
                    )
                ):
                    # psycopg refusing the URI's own parameters (`?PASSWORD=`, a bad sslmode): the user's to fix.
                    reason = " ".join(str(exc.orig).split())[:200]
                    raise AuditInputError(
                        f"{ledger.where} '{ledger.description}'",
                        f"the URI's parameters are not valid for the server's driver: {reason}",
                    ) from None
                if isinstance(exc, DatabaseError) and not isinstance(exc, OperationalError):
                    if "not a database" in str(exc.orig) or "malformed" in str(exc.orig):
                        raise AuditInputError(
                            f"{ledger.where} '{ledger.description}'",
                            "is not a SQLite database (corrupt, or another kind of file)",
                        ) from None
                if isinstance(exc, OperationalError):
                    reason = " ".join(str(exc.orig).split())[:200]
                    if "not a database" in reason or "malformed" in reason:
                        reason = "is not a SQLite database (corrupt, or another kind of file)"
                    raise AuditInputError(f"{ledger.where} '{ledger.description}'", reason) from None
                return False

        return _Translate()

    def _upgrade_schema(self) -> None:
        from alembic import command
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(Path(__file__).resolve().parent / "migrations"))
        with self.engine.begin() as connection:  # SQLite: BEGIN IMMEDIATE serialises concurrent upgrades
            if self.url.get_backend_name() == "postgresql":
                connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK_KEY})")
            config.attributes["connection"] = connection
            from audit.ledger.integrity import check_schema

            check_schema(connection, known_revisions(), f"{self.where} '{self.description}'")
            command.upgrade(config, "head")

    def _dataset(self, session: Session, name: str, *, create: bool, lock: bool) -> Dataset | None:
        if create:
            values = {
                "name": name,
                "delta": DEFAULT_DELTA,
                "max_total_epsilon": None,
                "created_at": datetime.now(UTC),
            }
            statement: Any  # the two dialects' Insert classes share no declared base with on_conflict_do_nothing
            if self.url.get_backend_name() == "postgresql":
                from sqlalchemy.dialects.postgresql import insert as postgresql_insert

                statement = postgresql_insert(Dataset).values(**values).on_conflict_do_nothing(index_elements=["name"])
            else:
                from sqlalchemy.dialects.sqlite import insert as sqlite_insert

                statement = sqlite_insert(Dataset).values(**values).on_conflict_do_nothing(index_elements=["name"])
            session.execute(statement)
        raw = session.execute(text("SELECT * FROM ledger_datasets WHERE name = :name"), {"name": name}).mappings().all()
        for found in raw:
            self._checker(session).dataset(dict(found))
        query = select(Dataset).where(Dataset.name == name)
        if lock:
            query = query.with_for_update()  # PostgreSQL row lock; SQLite already holds the database lock
        return session.scalars(query).one_or_none()

    def _created_dataset(self, session: Session, name: str) -> Dataset:
        """The dataset's row, inserted first where it is new, locked for this transaction."""
        row = self._dataset(session, name, create=True, lock=True)
        if row is None:  # inserted (or already there) in this same transaction: never missing
            raise RuntimeError(f"ledger dataset {name!r} missing right after its insert")
        return row

    def _checker(self, session: Session):
        from audit.ledger.integrity import RowChecker

        return RowChecker(session.get_bind().dialect, f"{self.where} '{self.description}'")

    def _checked_releases(self, session: Session, dataset: Dataset) -> list[tuple[dict[str, Any], bool]]:
        """The dataset's release rows, each checked (a hand-edited row is named), with whether it was removed."""
        checker = self._checker(session)
        releases = [
            checker.release(dict(r), dataset.name)
            for r in session.execute(
                text("SELECT * FROM ledger_releases WHERE dataset_id = :d ORDER BY id"), {"d": dataset.id}
            ).mappings()
        ]
        removed = set()
        for r in session.execute(
            text(
                "SELECT r.* FROM ledger_removals r JOIN ledger_releases l ON l.id = r.release_id "
                "WHERE l.dataset_id = :d ORDER BY r.id"
            ),
            {"d": dataset.id},
        ).mappings():
            removed.add(checker.removal(dict(r))["release_id"])
        return [(release, release["id"] in removed) for release in releases]

    def _active_mechanisms(self, session: Session, dataset: Dataset) -> list[dict[str, Any]]:
        # Validated again as they are composed: the stored dict is never trusted to be in range.
        return [
            validate_mechanism(spec, f"release #{release['id']}")
            for release, removed in self._checked_releases(session, dataset)
            if not removed
            for spec in release["mechanisms"]
        ]

    # -----------------------------------------------------------------------------------------
    def record(
        self,
        dataset: str,
        releases: list[ReleaseInput],
        provenance: Provenance | None = None,
        *,
        policy_limit: float | None = None,
        policy_name: str | None = None,
        compute_spent: bool = True,
        keep_held: bool = False,
    ) -> RecordOutcome:
        """Record `releases` on `dataset` in one transaction, or nothing when the budget would be exceeded.

        The limit is the smaller of the dataset's `max_total_epsilon` (set-budget) and `policy_limit`
        (a policy's max_total_epsilon); BudgetExceeded names it. The composition (every active
        release plus these) runs inside the transaction whenever a limit applies; without a limit,
        `compute_spent=False` skips it (bulk loads) and the rows carry no `epsilon_after`.
        """
        check_dataset_name(dataset)
        if not releases:
            raise AuditInputError("release", "nothing to record")
        checked = [
            ReleaseInput(
                r.label[:300],
                r.source,
                [validate_mechanism(m, f"{r.label[:60]}: mechanism {i + 1}") for i, m in enumerate(r.mechanisms)],
                r.source_file,
                r.source_sha256,
                r.mlflow_run_id,
            )
            for r in releases
        ]
        provenance = provenance or Provenance()
        from audit.machinery.interrupts import held_interrupts

        held = held_interrupts()
        try:
            ids, composition, limit, source = self._record(
                session_args=(dataset, checked, provenance, policy_limit, policy_name, compute_spent), held=held
            )
        except BaseException:
            held.stop()
            if held.fired:  # the transaction rolled back: nothing was kept, the interrupt stands (130)
                raise KeyboardInterrupt from None
            raise
        if not keep_held:
            held.stop()
        return RecordOutcome(ids, composition, limit, source, held.fired, held if keep_held else None)

    def _record(self, session_args, held):
        dataset, checked, provenance, policy_limit, policy_name, compute_spent = session_args
        with self._errors(), Session(self.engine) as session, session.begin():
            row = self._created_dataset(session, dataset)
            limits = [(row.max_total_epsilon, "the ledger's budget for this dataset")]
            if policy_limit is not None:
                limits.append((policy_limit, f"policy {policy_name or ''}".strip()))
            limits = [(value, source) for value, source in limits if value is not None]
            limit, source = min(limits, key=lambda item: item[0]) if limits else (None, None)
            composition = None
            if limit is not None or compute_spent:
                mechanisms = self._active_mechanisms(session, row) + [m for r in checked for m in r.mechanisms]
                composition = compose_mechanisms(mechanisms, row.delta)
            if limit is not None and not composition.epsilon <= limit:
                raise BudgetExceeded(dataset, limit, source, composition)  # rolls back: the dataset row too
            ids = []
            for release in checked:
                entry = Release(
                    dataset_id=row.id,
                    label=release.label,
                    source=release.source,
                    mechanisms=release.mechanisms,
                    source_file=release.source_file,
                    source_sha256=release.source_sha256,
                    mlflow_run_id=release.mlflow_run_id,
                    epsilon_after=None
                    if composition is None or math.isinf(composition.epsilon)
                    else composition.epsilon,
                    delta_after=None if composition is None else row.delta,
                    method_after=None if composition is None else composition.method[:60],
                    at=provenance.at,
                    by=provenance.by,
                    command=provenance.command,
                    git_commit=provenance.git_commit,
                )
                session.add(entry)
                session.flush()
                ids.append(entry.id)
            held.start()  # the COMMIT runs as this block ends: an interrupt from here on finds the release kept
        return ids, composition, limit, source

    def set_budget(
        self, dataset: str, max_total_epsilon: float | None, delta: float | None, provenance: Provenance | None = None
    ) -> Composition:
        """Set the dataset's budget (None: no ε limit) and/or δ; creates the dataset. Returns the spent figure.

        A budget below what is already spent (at the new δ) raises BudgetBelowSpent and saves nothing:
        the check and the change are one transaction, so a release recorded meanwhile is counted.
        """
        check_dataset_name(dataset)
        provenance = provenance or Provenance()
        with self._errors(), Session(self.engine) as session, session.begin():
            row = self._created_dataset(session, dataset)
            spent = compose_mechanisms(self._active_mechanisms(session, row), row.delta if delta is None else delta)
            if max_total_epsilon is not None and not spent.epsilon <= max_total_epsilon:
                raise BudgetBelowSpent(dataset, max_total_epsilon, spent)  # rolls back: the new dataset row too
            if delta is not None:
                row.delta = delta
            row.max_total_epsilon = max_total_epsilon
            session.add(
                BudgetChange(
                    dataset_id=row.id,
                    max_total_epsilon=max_total_epsilon,
                    delta=row.delta,
                    at=provenance.at,
                    by=provenance.by,
                    command=provenance.command,
                    git_commit=provenance.git_commit,
                )
            )
            return spent

    def remove(self, dataset: str, release_id: int, reason: str, provenance: Provenance | None = None) -> Composition:
        """Mark a release removed (a Removal row; the release stays). Returns the spent figure without it."""
        check_dataset_name(dataset)
        provenance = provenance or Provenance()
        with self._errors(), Session(self.engine) as session, session.begin():
            row = self._dataset(session, dataset, create=False, lock=True)
            if row is None:
                raise AuditInputError("--dataset", f"no dataset '{dataset}' in this ledger")
            release = session.get(Release, release_id)
            if release is None or release.dataset_id != row.id:
                raise AuditInputError("--release", f"no release {release_id} on dataset '{dataset}'")
            if release.removal is not None:
                raise AuditInputError(
                    "--release",
                    f"release {release_id} was already removed "
                    f"({release.removal.at:%Y-%m-%d %H:%M} UTC by {release.removal.by})",
                )
            session.add(
                Removal(
                    release_id=release_id,
                    reason=reason,
                    at=provenance.at,
                    by=provenance.by,
                    command=provenance.command,
                    git_commit=provenance.git_commit,
                )
            )
            session.flush()
            return compose_mechanisms(self._active_mechanisms(session, row), row.delta)

    # -----------------------------------------------------------------------------------------
    def datasets(self) -> list[str]:
        with self._errors(), Session(self.engine) as session:
            checker = self._checker(session)
            rows = [checker.dataset(dict(r)) for r in session.execute(text("SELECT * FROM ledger_datasets")).mappings()]
            return sorted(row["name"] for row in rows)

    def dataset_state(self, dataset: str) -> dict[str, Any]:
        """The dataset's budget, δ, releases (removed ones marked) and spent composition."""
        check_dataset_name(dataset)
        with self._errors(), Session(self.engine) as session:
            row = self._dataset(session, dataset, create=False, lock=False)
            if row is None:
                raise AuditInputError(
                    "--dataset",
                    f"no dataset '{dataset}' in this ledger (known: {', '.join(self._names(session)) or 'none'})",
                )
            self._checked_releases(session, row)  # every row checked before the ORM decodes it
            releases = [
                _release_dict(r)
                for r in session.scalars(select(Release).where(Release.dataset_id == row.id).order_by(Release.id))
            ]
            composition = compose_mechanisms(self._active_mechanisms(session, row), row.delta)
            return {
                "dataset": row.name,
                "delta": row.delta,
                "max_total_epsilon": row.max_total_epsilon,
                "releases": releases,
                "composition": composition,
            }

    @staticmethod
    def _names(session: Session) -> list[str]:
        return list(session.scalars(select(Dataset.name).order_by(Dataset.name).limit(20)))

    def count_releases(self, dataset: str | None = None) -> int:
        with self._errors(), Session(self.engine) as session:
            query = select(func.count(Release.id))
            if dataset is not None:
                query = query.join(Dataset).where(Dataset.name == dataset)
            return int(session.scalar(query) or 0)  # COUNT always returns a row; `or 0` for the type


def _release_dict(release: Release) -> dict[str, Any]:
    removal = release.removal
    return {
        "id": release.id,
        "label": release.label,
        "source": release.source,
        "mechanisms": release.mechanisms,
        "description": "; ".join(describe_mechanism(m) for m in release.mechanisms),
        "at": _utc(release.at),
        "by": release.by,
        "command": release.command,
        "git_commit": release.git_commit,
        "source_file": release.source_file,
        "source_sha256": release.source_sha256,
        "mlflow_run_id": release.mlflow_run_id,
        "epsilon_after": release.epsilon_after,
        "delta_after": release.delta_after,
        "method_after": release.method_after,
        "removed": None
        if removal is None
        else {"at": _utc(removal.at), "by": removal.by, "reason": removal.reason, "command": removal.command},
    }


def _utc(moment: datetime) -> str:
    # SQLite hands datetimes back without their zone; every one was written in UTC.
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).isoformat(timespec="seconds")
