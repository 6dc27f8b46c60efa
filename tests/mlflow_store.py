"""An empty MLflow SQLite store per test, without paying its schema migration each time.

Opening a new SQLite store makes MLflow create and migrate its schema: ~2 s of CPU (measured in-process,
MLflow 3.17, idle), more than most in-process commands cost. `fresh_store` migrates one empty store per
test process and copies that file (~0.1 s) into the test's own folder: every test still gets its own
store, written by the real MLflow, only its creation is shared. The template holds nothing but MLflow's
schema and its `Default` experiment (which no command uses: each creates its own `privacy-audit/...`
experiment with its artifact folder beside the database, audit/machinery/tracking.py).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

_template: Path | None = None


def _migrated_template() -> Path:
    global _template
    if _template is None:
        from mlflow.tracking import MlflowClient

        folder = Path(tempfile.mkdtemp(prefix="privacy-audit-mlflow-template-"))
        atexit.register(shutil.rmtree, folder, True)
        path = folder / "m.db"
        MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()  # creates and migrates the schema
        assert not (folder / "m.db-wal").exists()  # nothing left outside the file we copy
        _template = path
    return _template


def fresh_store(folder: Path, name: str = "m.db") -> str:
    """The `sqlite:///` tracking URI of `folder/name`, copied from a migrated, empty store unless it is there
    already (so a test whose commands share one store may call this before each of them)."""
    target = Path(folder) / name
    if not target.exists():
        shutil.copyfile(_migrated_template(), target)
    return f"sqlite:///{target}"
