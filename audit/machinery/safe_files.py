"""One reader for every file `report` and `gate` take from a run folder: no symlinks, regular files
only, bounded sizes, never blocking.

A run folder is input like any other — it may have been edited, or handed over by someone else.
`report` embeds figures from it into report.html and `gate` republishes what it reads; a
`figures/roc_all.png` that is a symlink to a system file would put that file's contents into the
report, and a FIFO named like a figure would make the command wait forever. So:

* files are opened with `O_NOFOLLOW | O_NONBLOCK` and checked with `fstat` on the open descriptor
  (no race between a check and the open): symlinks, FIFOs, sockets, devices and folders are
  refused without blocking;
* inside a run folder, no path component below the folder itself may be a symlink either
  (`figures/` pointing at `/etc` is refused);
* sizes are bounded (`MAX_RUN_FILE_BYTES` for a figure or results file) and read at most once.

The folder (or file) the user names on the command line may itself be a link: that is the user's
explicit choice, as for any other path argument. What is found *inside* it is not.
Every refusal is an `AuditInputError` naming the file (exit 2).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from audit.errors import AuditInputError

__all__ = ["MAX_RUN_FILE_BYTES", "read_regular_file", "read_run_file", "run_folder_files"]

MAX_RUN_FILE_BYTES = 64 * 2**20  # a figure is ~100 KB, a results.json a few MB

_KIND = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a folder",
    stat.S_IFLNK: "a symbolic link",
}


def _kind(mode: int) -> str:
    return _KIND.get(stat.S_IFMT(mode), "not a regular file")


def read_regular_file(path: str | Path, where: str, *, limit: int = MAX_RUN_FILE_BYTES, follow: bool = True) -> bytes:
    """The bytes of `path` if it is a regular file of at most `limit` bytes; never blocks.

    `follow=False` refuses a symlink at `path` itself (files found inside a run folder)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise AuditInputError(
                where, "is a symbolic link; files inside a run folder must be regular files"
            ) from None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise AuditInputError(where, "does not exist or is not a file") from None
        if exc.errno == errno.ENXIO:  # a socket, or a FIFO's other end
            raise AuditInputError(where, "is not a regular file (a socket or FIFO)") from None
        raise AuditInputError(where, f"cannot be read ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise AuditInputError(where, f"is {_kind(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise AuditInputError(where, f"is larger than {limit // 2**20} MiB")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # it grew while being read
                raise AuditInputError(where, f"is larger than {limit // 2**20} MiB")
        return b"".join(chunks)
    except OSError as exc:
        raise AuditInputError(where, f"cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)


def _check_inside(root: Path, path: Path, where: str) -> None:
    """No component of `path` below `root` is a symlink, and `path` stays under `root`."""
    try:
        relative = path.relative_to(root)
    except ValueError:
        raise AuditInputError(where, f"is outside the run folder '{root}'") from None
    if ".." in relative.parts:
        raise AuditInputError(where, f"is outside the run folder '{root}'")
    current = root
    for part in relative.parts[:-1]:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except OSError:
            raise AuditInputError(where, "does not exist or is not a file") from None
        if stat.S_ISLNK(mode):
            raise AuditInputError(
                f"'{current}'",
                "is a symbolic link inside the run folder; a run folder's sub-folders must be real folders",
            )
        if not stat.S_ISDIR(mode):
            raise AuditInputError(f"'{current}'", "is not a folder")


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def read_run_file(root: Path, path: Path, *, limit: int = MAX_RUN_FILE_BYTES, magic: bytes | None = None) -> bytes:
    """The bytes of `path`, a file inside the run folder `root`: no symlink anywhere below `root`,
    a regular file, at most `limit` bytes, starting with `magic` when given (PNG_MAGIC for figures)."""
    where = f"'{path}'"
    _check_inside(Path(root), Path(path), where)
    data = read_regular_file(path, where, limit=limit, follow=False)
    if magic is not None and not data.startswith(magic):
        raise AuditInputError(where, "is not the kind of file its name says (a figure must be a PNG image)")
    return data


def run_folder_files(root: Path, folder: Path, pattern: str) -> list[Path]:
    """Entries of `folder` (inside `root`) matching `pattern`, sorted. `folder` must be a real
    folder (not a symlink) when it exists; an entry that is not a regular file is refused by name
    (a symlink named like a figure is tampering, not a figure)."""
    folder = Path(folder)
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise AuditInputError(f"'{folder}'", f"cannot be read ({exc.strerror})") from None
    _check_inside(Path(root), folder / "_", f"'{folder}'")
    if stat.S_ISLNK(mode):
        raise AuditInputError(
            f"'{folder}'", "is a symbolic link inside the run folder; a run folder's sub-folders must be real folders"
        )
    if not stat.S_ISDIR(mode):
        return []
    found = []
    for entry in sorted(folder.glob(pattern)):
        entry_mode = os.lstat(entry).st_mode
        if not stat.S_ISREG(entry_mode):
            raise AuditInputError(
                f"'{entry}'", f"is {_kind(entry_mode)}, not a regular file; a run folder holds regular files only"
            )
        found.append(entry)
    return found
