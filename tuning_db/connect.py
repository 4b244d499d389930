"""Where the tuning DB lives and how to connect to it: paths and URLs, drivers, SQLite settings.

Note: an SQLite file is inspected read-only (its header, then its tables through a `mode=ro`
connection) before the real engine touches it, because the real engine switches the file to WAL
journal mode on connect — a write. A file that is not ours therefore stays byte-for-byte intact.
"""
from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
import sqlalchemy.exc as sa_exc
from sqlalchemy.pool import NullPool

from .errors import DBError, one_line
from .migrations import stored_version

SQLITE_BUSY_TIMEOUT_MS = 30_000
WRITE = "autofuse_write"  # execution option: this transaction writes (SQLite: BEGIN IMMEDIATE)
_SQLITE_HEADER = b"SQLite format 3\x00"
_URL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_DRIVER_HINTS = {"postgresql": "pip install 'psycopg[binary]'"}


def default_db_url() -> str:
    """$AUTOFUSE_DB (a path or an SQLAlchemy URL), else an SQLite file in the user's cache dir."""
    env = os.environ.get("AUTOFUSE_DB", "").strip()
    if env:
        return env if _URL_RE.match(env) else _sqlite_url(Path(env)).render_as_string(hide_password=False)
    return _sqlite_url(cache_db_path()).render_as_string(hide_password=False)


def cache_root() -> Path:
    """autofuse's one cache root (the default DB file, kernel modules, compile stats): $AUTOFUSE_CACHE_DIR,
    else $XDG_CACHE_HOME/autofuse (an absolute XDG path only, as the XDG spec asks), else
    ~/.cache/autofuse. Not created, not checked."""
    env = os.environ.get("AUTOFUSE_CACHE_DIR", "").strip()
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "autofuse"


def cache_db_path() -> Path:
    """The default tuning DB file: tuning.db under the cache root."""
    return (cache_root() / "tuning.db").expanduser().absolute()


def _sqlite_url(path: Path) -> sa.URL:
    return sa.URL.create("sqlite", database=str(path.expanduser().absolute()))


@dataclass(frozen=True)
class Target:
    """A resolved database: its URL, the name messages use, and the SQLite file if it is one."""

    url: sa.URL
    name: str
    sqlite_file: Path | None


def resolve(url_or_path: str | os.PathLike[str] | None) -> Target:
    """A path becomes sqlite:///path; `postgresql://` means psycopg 3 (SQLAlchemy's default is psycopg2)."""
    text = default_db_url() if url_or_path is None else os.fspath(url_or_path)
    if not _URL_RE.match(text):
        url = _sqlite_url(Path(text))
    else:
        try:
            url = sa.make_url(text)
        except (sa_exc.ArgumentError, ValueError):
            raise DBError(f"cannot parse database URL {text!r}") from None
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    path = None
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:") \
            and not url.query.get("uri") and not url.database.startswith("file:"):
        path = Path(url.database)
    name = str(path) if path is not None else url.render_as_string(hide_password=True)
    return Target(url, name, path)


def check_sqlite_file(path: Path, name: str) -> None:
    """Refuse (without writing) a file that is not SQLite or not ours, or has a newer schema."""
    if path.is_dir():
        raise DBError(f"{name} is a directory, not an SQLite database")
    try:
        if not path.exists() or path.stat().st_size == 0:
            return  # a new database
        with open(path, "rb") as f:
            header = f.read(len(_SQLITE_HEADER))
    except OSError as e:
        raise DBError(f"cannot read {name}: {e.strerror}") from None
    if header != _SQLITE_HEADER:
        raise DBError(f"{name} is not an SQLite database")
    # immutable: no -shm/-wal files appear beside the user's file; only sound when there is no -wal
    wal = path.with_name(path.name + "-wal").exists()
    uri = path.absolute().as_uri() + ("?mode=ro" if wal else "?mode=ro&immutable=1")
    probe = sa.create_engine("sqlite://", creator=lambda: sqlite3.connect(uri, uri=True), poolclass=NullPool)
    try:
        with probe.connect() as conn:
            stored_version(conn, name, exclusive=True)
    except sa_exc.SQLAlchemyError as e:
        raise DBError(f"{name} is a damaged or unreadable SQLite database ({one_line(e)})") from None
    finally:
        probe.dispose()


def make_engine(target: Target) -> sa.Engine:
    """An engine for the target; for SQLite with WAL, a busy timeout and real transactions."""
    url, kwargs = target.url, {}
    if url.get_backend_name() == "postgresql" and url.get_driver_name() == "psycopg" \
            and "connect_timeout" not in url.query:
        kwargs["connect_args"] = {"connect_timeout": 10}
    try:
        engine = sa.create_engine(url, **kwargs)
    except sa_exc.NoSuchModuleError:
        raise DBError(f"unknown database kind {url.drivername!r} in {target.name}") from None
    except ImportError as e:
        hint = _DRIVER_HINTS.get(url.get_backend_name(), f"install the Python module {e.name}")
        raise DBError(f"no driver for {url.drivername} ({e.name} is not installed): {hint}") from None
    if url.get_backend_name() == "sqlite":
        sa.event.listen(engine, "connect", _sqlite_on_connect)
        sa.event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def _sqlite_on_connect(dbapi_conn: sqlite3.Connection, record: object) -> None:
    """Every connection: wait (not fail) on a locked file, WAL so readers never block writers."""
    dbapi_conn.isolation_level = None  # we emit BEGIN ourselves: sqlite3's implicit one skips DDL
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA journal_mode = WAL")
    cur.execute("PRAGMA synchronous = NORMAL")  # durable across crashes of the process in WAL mode
    cur.execute("PRAGMA foreign_keys = ON")
    cur.close()


def _sqlite_on_begin(conn: sa.Connection) -> None:
    """Writers take the write lock up front: a deferred read-then-write transaction can fail with
    SQLITE_BUSY without waiting for the busy timeout."""
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE) else "BEGIN")
