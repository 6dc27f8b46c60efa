"""The privacy-budget ledger: every DP release on a named dataset recorded in a database
(SQLite or PostgreSQL, Alembic migrations), composed with dp_accounting, and checked against a budget.
"""
