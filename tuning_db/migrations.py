"""Schema versions: recognising our database, refusing foreign or newer ones, migrating older ones.

Note: MIGRATIONS[k] takes a database at schema version k to k + 1; the current version is
len(MIGRATIONS). A new database is stamped with the marker at version 0 and then migrated like any
old one, so the upgrade path runs on every fresh database rather than only on users' old files.
All of it runs in the one transaction `ensure_schema` is given: a failing migration leaves the
database at the version it had. A migration must spell out its own version's tables: when the
schema in schema.py changes, freeze a copy of the version-1 tables here for `_v0_to_v1` and add
`_v1_to_v2` with the ALTERs.
"""
from __future__ import annotations

from typing import Callable

import sqlalchemy as sa

from . import schema
from .errors import DBError, one_line

Migration = Callable[[sa.Connection], None]

_PG_LOCK_KEY = 0x6175746F66  # "autof": serialises concurrent first opens of one PostgreSQL database


def _v0_to_v1(conn: sa.Connection) -> None:
    """Version 1: graphs, plans, kernel_measurements, cost_models."""
    schema.metadata.create_all(conn, tables=[schema.metadata.tables[t] for t in schema.DATA_TABLES])


MIGRATIONS: list[Migration] = [_v0_to_v1]


def current_version() -> int:
    """The schema version this code writes (read at call time, so tests can extend MIGRATIONS)."""
    return len(MIGRATIONS)


def stored_version(conn: sa.Connection, name: str, *, exclusive: bool) -> int | None:
    """The schema version stored in the database, or None when it holds none of our tables.

    `exclusive` (an SQLite file: the user named one file for us) refuses any foreign table; a
    server database may hold other applications' tables, but not ones named like ours.
    """
    tables = set(sa.inspect(conn).get_table_names())
    if schema.META_TABLE not in tables:
        foreign = (tables - schema.OPTUNA_TABLES) if exclusive else tables & set(schema.DATA_TABLES)
        if foreign:
            shown = ", ".join(sorted(foreign)[:4]) + (", …" if len(foreign) > 4 else "")
            raise DBError(f"{name} is not an autofuse tuning database (it has tables {shown})")
        return None
    m = schema.meta
    values = {k: v for k, v in conn.execute(sa.select(m.c.key, m.c.value))}
    if values.get("marker") != schema.MARKER:
        raise DBError(f"{name} is not an autofuse tuning database (no '{schema.MARKER}' marker)")
    try:
        version = int(values.get("schema_version", ""))
    except ValueError:
        raise DBError(f"{name} is damaged: bad schema version {values.get('schema_version')!r}") from None
    if version > current_version():
        raise DBError(f"{name} has schema version {version}, newer than this autofuse ({current_version()}); upgrade autofuse")
    return version


def _set_version(conn: sa.Connection, version: int) -> None:
    conn.execute(sa.update(schema.meta).where(schema.meta.c.key == "schema_version").values(value=str(version)))


def ensure_schema(conn: sa.Connection, name: str, *, exclusive: bool) -> int:
    """Check, stamp (when new) and migrate the database inside the caller's transaction."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_LOCK_KEY)))
    found = stored_version(conn, name, exclusive=exclusive)
    if found is None:
        schema.meta.create(conn)
        conn.execute(sa.insert(schema.meta), [{"key": "marker", "value": schema.MARKER},
                                              {"key": "schema_version", "value": "0"}])
        found = 0
    for k in range(found, current_version()):
        try:
            MIGRATIONS[k](conn)
        except Exception as e:  # noqa: BLE001 - any failure of a migration is reported the same way
            raise DBError(f"migrating {name} from schema version {k} to {k + 1} failed: {one_line(e)}") from None
        _set_version(conn, k + 1)
    return current_version()
