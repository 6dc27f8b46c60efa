"""The one exception type for user mistakes.

Everything the user can get wrong (config fields, data files, columns, CLI flags) is raised as an
`AuditInputError` naming *where* the problem is; the CLI turns it into one line and exit code 2.
Anything else is a bug and keeps its traceback.
"""
from __future__ import annotations


class AuditInputError(ValueError):
    """Bad user input. `where` names the field, file or column; the message says what was expected."""

    def __init__(self, where: str, message: str):
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}")
