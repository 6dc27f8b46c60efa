"""Alembic environment of the ledger: run programmatically by audit.ledger.store on an open connection.

There is no alembic.ini: `store.upgrade_schema` builds the Config, points `script_location` here and
hands over its connection (`config.attributes["connection"]`), so the migration runs inside the
store's own locked transaction.
"""

from __future__ import annotations

from alembic import context

from audit.ledger.models import Base

connection = context.config.attributes["connection"]
context.configure(
    connection=connection, target_metadata=Base.metadata, render_as_batch=True, version_table="ledger_alembic_version"
)
context.run_migrations()
