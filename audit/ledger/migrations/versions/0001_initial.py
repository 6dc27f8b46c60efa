"""The ledger's first schema: datasets, releases, removals, budget changes.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None


def _provenance() -> list[sa.Column]:
    return [
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("by", sa.String(200), nullable=False),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("git_commit", sa.String(64), nullable=True),
    ]


def upgrade() -> None:
    op.create_table(
        "ledger_datasets",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(100), nullable=False, unique=True),
        sa.Column("delta", sa.Float(), nullable=False),
        sa.Column("max_total_epsilon", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "ledger_releases",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("dataset_id", sa.Integer(), sa.ForeignKey("ledger_datasets.id"), nullable=False, index=True),
        sa.Column("label", sa.String(300), nullable=False),
        sa.Column("source", sa.String(40), nullable=False),
        sa.Column("mechanisms", sa.JSON(), nullable=False),
        sa.Column("source_file", sa.Text(), nullable=True),
        sa.Column("source_sha256", sa.String(64), nullable=True),
        sa.Column("mlflow_run_id", sa.String(64), nullable=True),
        sa.Column("epsilon_after", sa.Float(), nullable=True),
        sa.Column("delta_after", sa.Float(), nullable=True),
        sa.Column("method_after", sa.String(60), nullable=True),
        *_provenance(),
    )
    op.create_table(
        "ledger_removals",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("release_id", sa.Integer(), sa.ForeignKey("ledger_releases.id"), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        *_provenance(),
        sa.UniqueConstraint("release_id", name="uq_ledger_removals_release"),
    )
    op.create_table(
        "ledger_budget_changes",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("dataset_id", sa.Integer(), sa.ForeignKey("ledger_datasets.id"), nullable=False, index=True),
        sa.Column("max_total_epsilon", sa.Float(), nullable=True),
        sa.Column("delta", sa.Float(), nullable=False),
        *_provenance(),
    )


def downgrade() -> None:
    for table in ("ledger_budget_changes", "ledger_removals", "ledger_releases", "ledger_datasets"):
        op.drop_table(table)
