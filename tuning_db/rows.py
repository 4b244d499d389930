"""Rows to Python values and back, and idempotent inserts, shared by the store and JSONL import."""
from __future__ import annotations

from typing import Any, Mapping

import sqlalchemy as sa
import sqlalchemy.exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite

from . import schema
from .records import PlanRecord

_UPSERT = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}


def insert_if_absent(conn: sa.Connection, table: sa.Table, values: Mapping[str, Any], key: list[str]) -> bool:
    """Insert unless a row with the same `key` columns exists; True when inserted.

    ON CONFLICT DO NOTHING, so concurrent writers of the same key never fail: one of them wins.
    """
    make = _UPSERT.get(conn.dialect.name)
    if make is not None:
        stmt = make(table).values(**values).on_conflict_do_nothing(index_elements=key)
        return conn.execute(stmt.returning(*(table.c[k] for k in key))).first() is not None
    try:
        with conn.begin_nested():
            conn.execute(sa.insert(table).values(**values))
        return True
    except sa_exc.IntegrityError:
        return False


def plan_from_row(row: sa.Row) -> PlanRecord:
    return PlanRecord(
        graph_hash=row.graph_hash, device=row.device, torch_version=row.torch_version,
        triton_version=row.triton_version, plan_schema=row.plan_schema, plan_json=row.plan_json,
        time_us=row.time_us, baselines=dict(row.baselines or {}), source=row.source,
        created=row.created, id=row.id)


def measured_clause() -> sa.ColumnElement[bool]:
    """SQL for PlanRecord.measured."""
    p = schema.plans.c
    return sa.and_(p.time_us.is_not(None), p.source != "predicted")


def preference_order() -> list[sa.ColumnElement[Any]]:
    """Best plan first: measured before predicted, then lowest time (none last), then newest."""
    p = schema.plans.c
    return [sa.case((measured_clause(), 0), else_=1), sa.case((p.time_us.is_(None), 1), else_=0),
            p.time_us, p.created.desc(), p.id.desc()]


def ensure_graph(conn: sa.Connection, graph_hash: str, description: str = "", created: Any = None) -> bool:
    """Add the graph row if absent (True when added); fill in a description it lacks."""
    g = schema.graphs
    added = insert_if_absent(conn, g, {"hash": graph_hash, "description": description,
                                       "created": created or schema.utcnow()}, ["hash"])
    if not added and description:
        conn.execute(sa.update(g).where(g.c.hash == graph_hash, g.c.description == "").values(description=description))
    return added
