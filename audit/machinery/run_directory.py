"""Run folders that appear complete or not at all.

Everything of a run is written under a hidden staging name (`.<stamp>-<name>.partial`) and renamed
to `<stamp>-<name>` only when the run succeeded, so a crash or a bad input never leaves a folder
that looks like a finished audit.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from datetime import datetime, timezone
from collections.abc import Callable
from pathlib import Path
from typing import Any

from audit.errors import AuditInputError


class StagedRunDirectory:
    def __init__(self, out_root: str | Path, name: str):
        self.out_root = Path(out_root)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        self.name = f"{stamp}-{name}"
        self.staging = self.out_root / f".{self.name}.partial"
        self.final = self.out_root / self.name

    def create(self) -> Path:
        try:
            self.out_root.mkdir(parents=True, exist_ok=True)
            suffix = 1
            while self.final.exists() or self.staging.exists():  # two runs in the same second
                suffix += 1
                self.final = self.out_root / f"{self.name}-{suffix}"
                self.staging = self.out_root / f".{self.name}-{suffix}.partial"
            self.staging.mkdir()
            probe = self.staging / ".write-test"
            probe.write_text("ok")
            probe.unlink()
        except OSError as exc:
            raise AuditInputError(f"--out '{self.out_root}'", f"is not a writable directory ({exc.strerror})") from None
        return self.staging

    @classmethod
    def resume(cls, out_root: str | Path, spec: str | Path, name: str) -> "StagedRunDirectory":
        """The staging folder of an interrupted run: `latest` (newest for this audit name) or a path."""
        out_root = Path(out_root)
        if str(spec) == "latest":
            found = sorted(out_root.glob(f".*-{name}.partial")) if out_root.is_dir() else []
            if not found:
                raise AuditInputError("--resume latest", f"no interrupted run named '{name}' under '{out_root}'")
            staging = found[-1]
        else:
            staging = Path(spec)
            if not staging.name.startswith(".") and (staging / "results.json").is_file():
                raise AuditInputError(f"--resume '{spec}'", "is a finished run; nothing to resume")
        if not (staging / "config.yaml").is_file():
            raise AuditInputError(f"--resume '{spec}'", "is not the folder of an interrupted run (no config.yaml inside)")
        run = cls.__new__(cls)
        run.out_root = staging.parent
        run.staging = staging
        run.name = staging.name.removeprefix(".").removesuffix(".partial")
        run.final = staging.parent / run.name
        return run

    def commit(self) -> Path:
        os.replace(self.staging, self.final)
        return self.final

    def discard(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


def new_file_mode() -> int:
    """The mode `open()` gives a new file under the process umask (0o644 under umask 022).

    mkstemp creates 0600 files; renamed into place they would stay unreadable to the CI artifact
    host or a colleague, unlike every other file the audit writes.
    """
    mask = os.umask(0o022)  # reading the umask means setting it; 022 for the instant, not 0
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: Path, write: Callable[[str], None]) -> None:
    """`write(temporary_name)` in the same folder, then chmod to the umask's mode and rename into place:
    readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(temp)
        os.chmod(temp, new_file_mode())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write UTF-8 text atomically, with the mode the umask gives (see `write_atomic`)."""
    write_atomic(path, lambda temp: Path(temp).write_text(text, encoding="utf-8"))


def write_json_atomic(path: Path, payload: Any) -> None:
    # allow_nan=False: JSON has no infinity; a stray inf must fail loudly, not write invalid JSON.
    write_text_atomic(path, json.dumps(payload, indent=2, allow_nan=False) + "\n")
