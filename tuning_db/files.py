"""Output files the commands write: never over a file the user did not ask to replace.

Why: a command's output path is a user's typo away from a file they care about (the tuning DB
itself, an earlier export, a source file). An existing file is replaced only with `--force`, the
tuning DB's own files never, and a path whose folder does not exist is refused before any work.
"""
from __future__ import annotations

import os
from pathlib import Path

from .errors import DBError


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def check_output(path: str | os.PathLike[str], *, force: bool = False, what: str = "output",
                 protected: tuple[Path, ...] = ()) -> Path:
    """The path, if writing `what` there is allowed; DBError saying why not otherwise."""
    p = Path(path)
    for db in protected:
        for f in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm"), db.with_name(db.name + "-journal")):
            if _same_file(p, f):
                raise DBError(f"refusing to write the {what} to {p}: it is the tuning database's own file")
    if p.is_dir():
        raise DBError(f"cannot write the {what} to {p}: it is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise DBError(f"cannot write the {what} to {p}: no directory {parent}")
    if not os.access(parent, os.W_OK):
        raise DBError(f"cannot write the {what} to {p}: directory {parent} is not writable")
    if p.exists() and not force:
        raise DBError(f"{p} exists: not overwriting it with the {what} (--force replaces it)")
    return p
