"""Who recorded a ledger row, when, with which command (redacted) and which commit; file digests.

Kept apart from the store (audit/ledger/store.py) so that a row's provenance is built in one place
and the store holds only the transactions.
"""

from __future__ import annotations

import getpass
import hashlib
import socket
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["Provenance", "file_sha256"]


@dataclass(frozen=True)
class Provenance:
    """Who, when and what: filled from the environment unless given (tests pin them)."""

    command: str = field(default_factory=lambda: " ".join(["privacy-audit", *_redacted_argv()])[:4000])
    by: str = field(default_factory=lambda: f"{_user()}@{socket.gethostname()}")
    git_commit: str | None = field(default_factory=lambda: _git_commit())
    at: datetime = field(default_factory=lambda: datetime.now(UTC))


def _redacted_argv() -> list[str]:
    from audit.machinery.secrets import redact_argv

    return redact_argv(sys.argv[1:])


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers): the uid is still an answer
        import os

        return f"uid {os.getuid()}"


def _git_commit() -> str | None:
    from audit.machinery.environment import git_sha

    return git_sha()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
