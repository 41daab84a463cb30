"""Folders written atomically (a save interrupted half-way leaves the earlier folder intact), the
checks that an output folder can be written and holds no one else's files before work starts, what
made a write fail mid-run (a full disk, a read-only folder), and a folder held by one process at a
time (a run folder while it trains)."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

from segrl.errors import ConfigError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None


@contextlib.contextmanager
def atomic_folder(path: str | Path) -> Iterator[Path]:
    """Write the folder ``path`` atomically: fill the temporary folder this yields (beside ``path``);
    when the block ends normally it replaces ``path``, and if it raises, ``path`` is left as it was
    (a write that fails inside names ``path``: ``naming``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        with naming(path):
            yield tmp
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            path.rename(old)
            tmp.rename(path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_writable_folder(path: str | Path, option: str) -> Path:
    """Raise ``ConfigError`` unless ``path`` is a writable folder or can be created as one (its
    nearest existing parent is a writable folder); checked before any work starts."""
    problem = folder_problem(path)
    if problem is not None:
        raise ConfigError(f"{option} {path}: {problem}; give a folder you can write")
    return Path(path)


def check_own_folder(path: str | Path, option: str, own: Collection[str], ours: str) -> Path:
    """Raise ``ConfigError`` unless ``path`` can be written (``check_writable_folder``) and is new,
    empty, or one an earlier run of the same command wrote (it holds a file named in ``own``), which
    the command may resume or replace; checked before anything is written. A folder of other files
    is refused: what a command writes into its output folder (a model folder replaced whole) would
    overwrite them. ``ours`` ends the message: which folder to give instead."""
    check_writable_folder(path, option)
    others = foreign_files(path, own)
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise ConfigError(
            f"{option} {path}: a folder of other files ({shown}), which this command could "
            f"overwrite; give a new or empty folder, or {ours}"
        )
    return Path(path)


def foreign_files(path: str | Path, own: Collection[str]) -> list[str]:
    """The names in the folder ``path`` that a command whose output folders hold a file named in
    ``own`` must not write among (sorted); none where ``path`` is new, empty (a ``LOCK_FILE`` left
    by a process that died aside) or holds one of ``own``."""
    folder = Path(path)
    if not folder.is_dir():
        return []
    names = sorted(entry.name for entry in folder.iterdir() if entry.name != LOCK_FILE)
    return [] if any(name in own for name in names) else names


def length_problem(path: str | Path) -> str | None:
    """Why the system refuses ``path`` for its length (``ENAMETOOLONG``), or None: a name in it is
    longer than the file system allows, or the whole path is longer than the system takes."""
    name_max = os.pathconf("/", "PC_NAME_MAX")
    if any(len(os.fsencode(part)) > name_max for part in Path(path).parts):
        return f"a name in it is longer than the file system allows ({name_max} bytes)"
    path_max = os.pathconf("/", "PC_PATH_MAX")  # counting the terminating NUL
    if len(os.fsencode(os.fspath(path))) >= path_max:
        return f"the path is longer than the system allows ({path_max - 1} bytes)"
    return None


def folder_problem(path: str | Path) -> str | None:
    """Why ``path`` can be neither written as a folder nor created as one (None: it can): it is
    too long (``length_problem``), its nearest existing parent is a file, or not writable."""
    too_long = length_problem(path)
    if too_long is not None:
        return too_long
    existing = Path(path)
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        return f"{existing} is a file, not a folder"
    try:  # a real file, not os.access: root passes os.access where writing still fails (/proc)
        handle, probe = tempfile.mkstemp(dir=existing, prefix=".segrl-write-check-")
        os.close(handle)
        os.unlink(probe)
    except OSError as e:
        return f"{existing} is not writable ({e.strerror})"
    return None


FULL_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
UNWRITABLE_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def write_failure(error: BaseException | None) -> OSError | None:
    """The OS error behind a failed write, if a full disk or an unwritable folder made it fail:
    ``error`` itself, or an error it was raised from or while handling (torch reports a failed
    write as a ``RuntimeError`` raised while the file's ``OSError`` was handled)."""
    while error is not None:
        if isinstance(error, OSError) and error.errno in FULL_DISK_ERRNOS | UNWRITABLE_ERRNOS:
            return error
        suppressed = error.__suppress_context__ and error.__cause__ is None
        error = None if suppressed else error.__cause__ or error.__context__
    return None


@contextlib.contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """A write that fails inside (see ``write_failure``) raises an ``OSError`` naming ``path``:
    the OS names no file when a disk fills up mid-write, and a temporary one at times."""
    try:
        yield
    except (OSError, RuntimeError) as e:
        failure = write_failure(e)
        if failure is None:
            raise
        raise OSError(failure.errno, failure.strerror, str(path)) from e


STANDARD_OUTPUT = "<stdout>"
"""The name a failed write to standard output gets (``naming``), in place of a file's."""


def write_remedy(error: OSError, folder: str | Path) -> str:
    """What to do about ``error`` (see ``write_failure``) before writing into ``folder`` (or to
    ``STANDARD_OUTPUT``) again."""
    if str(folder) == STANDARD_OUTPUT:
        return "send standard output to a disk with room, or to a writable file"
    if error.errno in FULL_DISK_ERRNOS:
        return f"free space on the disk of {folder}"
    return f"make {folder} writable"


LOCK_FILE = ".lock"
"""The file in a folder that ``lock_folder`` locks; it holds the holder's process id."""
_held: dict[Path, Any] = {}


def lock_folder(path: str | Path) -> int | None:
    """Hold the folder ``path`` (created if need be) for this process, until ``unlock_folder`` or
    the process ends however it ends (an exclusive ``flock`` of its ``LOCK_FILE``). None once this
    process holds it (again: holding is re-entrant), else the id of the process that holds it
    (0 when it has not written its id yet). Where ``fcntl`` is missing (Windows), nothing is held."""
    if fcntl is None:
        return None
    folder = Path(path).resolve()
    if folder in _held:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / LOCK_FILE
    while True:
        handle = open(lock, "a+", encoding="utf-8")  # noqa: SIM115 - kept open while held
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            return int(holder) if holder.isdigit() else 0
        try:  # the lock of a file its last holder removed (unlocking) holds nothing: lock anew
            if os.stat(lock).st_ino == os.fstat(handle.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        handle.close()
    handle.truncate(0)
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    _held[folder] = handle
    return None


def unlock_folder(path: str | Path) -> None:
    """Let go of a folder this process holds (``lock_folder``); nothing if it holds none."""
    handle = _held.pop(Path(path).resolve(), None)
    if handle is not None:
        with contextlib.suppress(OSError):  # a folder now read-only keeps it: it holds nothing
            Path(handle.name).unlink()  # while still locked: see lock_folder
        handle.close()
