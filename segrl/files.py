"""Folders written atomically (a save interrupted half-way leaves the earlier folder intact), and the
check that an output folder can be written before work starts."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from segrl.errors import ConfigError


@contextlib.contextmanager
def atomic_folder(path: str | Path) -> Iterator[Path]:
    """Write the folder ``path`` atomically: fill the temporary folder this yields (beside ``path``);
    when the block ends normally it replaces ``path``, and if it raises, ``path`` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
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


def folder_problem(path: str | Path) -> str | None:
    """Why ``path`` can be neither written as a folder nor created as one (None: it can): its nearest
    existing parent is a file, or not writable."""
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
