"""A real PostgreSQL server for the ledger tests, started by the test session itself.

initdb + pg_ctl on a fresh temporary folder, listening on 127.0.0.1 at a free port, trust auth,
no Unix socket outside that folder. As root, the server runs as the `postgres` user (postgres
refuses to run as root) via `runuser`. Where PostgreSQL is not installed the tests skip — except
in CI (`CI=true`), where a missing server is a failure (.ci/run installs it).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _missing(why: str):
    if os.environ.get("CI") == "true":
        pytest.fail(f"PostgreSQL is required in CI: {why}")
    pytest.skip(f"PostgreSQL not available here: {why}")


class PostgresServer:
    def __init__(self):
        self.initdb, self.pg_ctl = _binary("initdb"), _binary("pg_ctl")
        if not self.initdb or not self.pg_ctl:
            _missing("initdb / pg_ctl not found (PATH, /usr/lib/postgresql/*/bin)")
        self.user = None
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
                self.user = "postgres"
            except KeyError:
                _missing("running as root and there is no 'postgres' user to run the server as")
        self.folder = Path(tempfile.mkdtemp(prefix="ledger-pg-"))
        if self.user:
            shutil.chown(self.folder, self.user)
        self.port = _free_port()
        self.data = self.folder / "data"

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        command = list(args)
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)

    def start(self) -> None:
        made = self._run(self.initdb, "-D", str(self.data), "-U", "ledger", "--auth=trust", "--no-sync", "-E", "UTF8")
        if made.returncode != 0:
            _missing(f"initdb failed: {made.stderr.strip()[-300:]}")
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c max_connections=100 -c fsync=off"
        started = self._run(
            self.pg_ctl, "-D", str(self.data), "-o", options, "-l", str(self.folder / "log"), "-w", "-t", "60", "start"
        )
        if started.returncode != 0:
            log = (self.folder / "log").read_text(errors="replace")[-500:] if (self.folder / "log").exists() else ""
            _missing(f"pg_ctl start failed: {started.stderr.strip()[-300:]} {log}")

    def stop(self) -> None:
        self._run(self.pg_ctl, "-D", str(self.data), "-m", "immediate", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)

    def new_database(self) -> str:
        """A fresh, empty database on this server; its SQLAlchemy URI."""
        import psycopg

        name = f"ledger_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=ledger dbname=postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://ledger@127.0.0.1:{self.port}/{name}"


@pytest.fixture(scope="session")
def postgres_server():
    server = PostgresServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
