"""Run folders that appear complete or not at all.

Everything of a run is written under a hidden staging name (`.<stamp>-<name>.partial`) and renamed
to `<stamp>-<name>` only when the run succeeded, so a crash or a bad input never leaves a folder
that looks like a finished audit.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from audit.errors import AuditInputError

_MAX_SUFFIX = 1000


class StagedRunDirectory:
    def __init__(self, out_root: str | Path, name: str):
        self.out_root = Path(out_root)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        self.name = f"{stamp}-{name}"
        self.staging = self.out_root / f".{self.name}.partial"
        self.final = self.out_root / self.name

    def create(self) -> Path:
        """Create the staging folder exclusively (two runs started in the same second never share one).

        `mkdir` without `exist_ok` is atomic: the loser of a race gets FileExistsError and tries
        the next suffix (`<stamp>-<name>-2`, `-3`, …) instead of checking first and racing after.
        """
        from audit.machinery.result_integrity import signing_key

        signing_key()  # a malformed PRIVACY_AUDIT_SIGNING_KEY is exit 2 now, not after the audit's work
        try:
            # The folders this run creates above its own (--out and parents): removed again by
            # discard() when they are left empty, so a refused input leaves nothing behind.
            missing = [p for p in (self.out_root, *self.out_root.parents) if not p.exists()]
            self.out_root.mkdir(parents=True, exist_ok=True)
            self._created_parents = missing
            base = self.name
            for suffix in range(1, _MAX_SUFFIX + 1):
                name = base if suffix == 1 else f"{base}-{suffix}"
                final, staging = self.out_root / name, self.out_root / f".{name}.partial"
                if final.exists():
                    continue
                try:
                    staging.mkdir()
                except FileExistsError:
                    continue
                if final.exists():  # a run with this name committed between our check and our mkdir
                    staging.rmdir()
                    continue
                self.name, self.final, self.staging = name, final, staging
                break
            else:
                raise AuditInputError(
                    f"--out '{self.out_root}'",
                    f"already holds {_MAX_SUFFIX} runs named '{base}' started in this second",
                )
            probe = self.staging / ".write-test"
            probe.write_text("ok")
            probe.unlink()
        except OSError as exc:
            if self.staging.is_dir():
                shutil.rmtree(self.staging, ignore_errors=True)
            raise AuditInputError(f"--out '{self.out_root}'", f"is not a writable directory ({exc.strerror})") from None
        _name_library_log(self.staging)
        return self.staging

    @classmethod
    def resume(cls, out_root: str | Path, spec: str | Path, name: str) -> StagedRunDirectory:
        """The staging folder of an interrupted run: `latest` (newest of exactly this audit name) or a path."""
        out_root = Path(out_root)
        if str(spec) == "latest":
            # Exact name: `.*-smoke.partial` would also match the audit `my-smoke`.
            pattern = re.compile(rf"^\.(\d{{8}}T\d{{6}}Z)-{re.escape(name)}(?:-(\d+))?\.partial$")
            found = []
            if out_root.is_dir():
                for path in out_root.iterdir():
                    match = pattern.match(path.name)
                    if match and path.is_dir():
                        found.append((match[1], int(match[2] or 1), path))
            if not found:
                raise AuditInputError("--resume latest", f"no interrupted run named '{name}' under '{out_root}'")
            staging = max(found)[2]
        else:
            staging = Path(spec)
            if not staging.name.startswith(".") and (staging / "results.json").is_file():
                raise AuditInputError(f"--resume '{spec}'", "is a finished run; nothing to resume")
        if not (staging / "config.yaml").is_file():
            raise AuditInputError(
                f"--resume '{spec}'", "is not the folder of an interrupted run (no config.yaml inside)"
            )
        run = cls.__new__(cls)
        run.out_root = staging.parent
        run.staging = staging
        run.name = staging.name.removeprefix(".").removesuffix(".partial")
        run.final = staging.parent / run.name
        _name_library_log(staging)
        return run

    def commit(self) -> Path:
        os.replace(self.staging, self.final)
        _name_library_log(None)  # the run's work is done: a later command (same process) names its own
        return self.final

    def discard(self) -> None:
        _name_library_log(None)
        shutil.rmtree(self.staging, ignore_errors=True)
        for folder in getattr(self, "_created_parents", []):  # innermost first; only if still empty
            try:
                folder.rmdir()
            except OSError:
                break


def _name_library_log(folder: Path | None) -> None:
    # transformers' warnings, its loading report and the resource tracker's notes go to the run
    # folder's library.log (targets/library_output.py), never to the console; worker processes
    # started from now on inherit the name.
    from targets.library_output import LOG_NAME, set_library_log

    set_library_log(None if folder is None else folder / LOG_NAME)


def new_file_mode() -> int:
    """The mode `open()` gives a new file under the process umask (0o644 under umask 022).

    mkstemp creates 0600 files; renamed into place they would stay unreadable to the CI artifact
    host or a colleague, unlike every other file the audit writes.
    """
    mask = os.umask(0o022)  # reading the umask means setting it; 022 for the instant, not 0
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: Path, write: Callable[[str], object]) -> None:
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


def write_result_json_atomic(path: Path, payload: dict[str, Any]) -> dict[str, Any]:
    """A result file (results.json, `<kind>.json`): written with its `integrity` digest, signed where
    PRIVACY_AUDIT_SIGNING_KEY is set (audit.machinery.result_integrity). Returns what was written."""
    from audit.machinery.result_integrity import signing_key, with_integrity

    written = with_integrity(payload, signing_key())
    write_json_atomic(path, written)
    return written


def check_output_folder(out_root: str | Path, flag: str = "--out") -> None:
    """Without creating anything: would `out_root` (or the folder that would hold it) accept a run?"""
    path = Path(out_root)
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise AuditInputError(f"{flag} '{out_root}'", f"'{probe}' is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise AuditInputError(f"{flag} '{out_root}'", f"'{probe}' is not writable")


@contextmanager
def run_attempt(run_dir: StagedRunDirectory, resume: object, progress: Any) -> Iterator[dict[str, Any]]:
    """One attempt of a resumable run (the sweep's and the federated job's alike).

    Yields a dict whose "tracker" the body sets once it has one. Bad input: the attempt's MLflow
    runs end FAILED and a fresh staging folder is removed (nothing half-written). Anything else
    (Ctrl-C, SIGTERM, a crash): runs end KILLED / FAILED and the staging folder is kept to resume.
    """
    state: dict[str, Any] = {"tracker": None}
    try:
        yield state
    except AuditInputError:
        if state["tracker"] is not None:
            state["tracker"].fail_open_runs("FAILED")
        if resume is None:
            run_dir.discard()
        raise
    except BaseException as exc:
        from audit.machinery.interrupts import interrupt_received  # a Ctrl-C a library re-raised as its own error

        killed = isinstance(exc, KeyboardInterrupt) or interrupt_received()
        if state["tracker"] is not None:
            state["tracker"].fail_open_runs("KILLED" if killed else "FAILED")
        if killed:  # a crash is not an interruption: exit 3 says what it was
            progress.note(f"interrupted; finished pieces are kept: resume with --resume {run_dir.staging}")
        else:
            progress.note(f"stopped by an error; finished pieces are kept in {run_dir.staging}")
        raise
