"""The ledger's tables (SQLAlchemy 2 ORM). Their schema is created and changed only by the Alembic
migrations in audit/ledger/migrations/, run when a ledger is opened.

Append-only by design: a release is never deleted or edited; removing one adds a `Removal` row, and
a budget change adds a `BudgetChange` row next to the dataset's current figure. Every row says who
(user@host), when (UTC) and what (the command line, the SHA-256 of the file it came from, the git
commit of the working directory when there is one).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, DateTime, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

__all__ = ["Base", "Dataset", "Release", "Removal", "BudgetChange"]


class Base(DeclarativeBase):
    pass


class _Provenance:
    """Who / when / what, on every row that records an action."""

    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    by: Mapped[str] = mapped_column(String(200))
    command: Mapped[str] = mapped_column(Text)
    git_commit: Mapped[str | None] = mapped_column(String(64), nullable=True)


class Dataset(Base):
    __tablename__ = "ledger_datasets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    delta: Mapped[float] = mapped_column(Float)
    max_total_epsilon: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    releases: Mapped[list[Release]] = relationship(back_populates="dataset", order_by="Release.id")


class Release(_Provenance, Base):
    __tablename__ = "ledger_releases"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("ledger_datasets.id"), index=True)
    label: Mapped[str] = mapped_column(String(300))
    source: Mapped[str] = mapped_column(String(40))  # hand | run | canary-audit | whitebox-audit | synth-check
    mechanisms: Mapped[list] = mapped_column(JSON)  # audit.ledger.mechanisms dicts
    source_file: Mapped[str | None] = mapped_column(Text, nullable=True)
    source_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    mlflow_run_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # The dataset's composed ε (and at which δ, by which accountant) right after this release.
    epsilon_after: Mapped[float | None] = mapped_column(Float, nullable=True)
    delta_after: Mapped[float | None] = mapped_column(Float, nullable=True)
    method_after: Mapped[str | None] = mapped_column(String(60), nullable=True)

    dataset: Mapped[Dataset] = relationship(back_populates="releases")
    removal: Mapped[Removal | None] = relationship(back_populates="release")


class Removal(_Provenance, Base):
    __tablename__ = "ledger_removals"
    __table_args__ = (UniqueConstraint("release_id", name="uq_ledger_removals_release"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    release_id: Mapped[int] = mapped_column(ForeignKey("ledger_releases.id"))
    reason: Mapped[str] = mapped_column(Text)

    release: Mapped[Release] = relationship(back_populates="removal")


class BudgetChange(_Provenance, Base):
    __tablename__ = "ledger_budget_changes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("ledger_datasets.id"), index=True)
    max_total_epsilon: Mapped[float | None] = mapped_column(Float, nullable=True)
    delta: Mapped[float] = mapped_column(Float)
