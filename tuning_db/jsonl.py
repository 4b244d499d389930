"""Export and import of a whole tuning DB as JSON lines: moving tuned plans between machines.

The first line is a header naming the format and schema version; then one object per row, with a
"kind" of graph, plan, measurement or cost_model (blobs base64, times ISO 8601 UTC). Import is
idempotent: graphs are keyed by hash, measurements by (kernel_key, device), plans and cost models
by the uid they were given when first stored.
"""
from __future__ import annotations

import base64
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import sqlalchemy as sa

from . import schema
from .errors import DBError
from .rows import ensure_graph, insert_if_absent

FORMAT = "autofuse-tuning-db"

# kind -> (table, the columns a line must carry, the columns that identify a row)
_KINDS: dict[str, tuple[sa.Table, tuple[str, ...], list[str]]] = {
    "graph": (schema.graphs, ("hash", "description", "created"), ["hash"]),
    "plan": (schema.plans, ("uid", "graph_hash", "device", "torch_version", "triton_version", "plan_schema",
                            "plan_json", "time_us", "baselines", "source", "created"), ["uid"]),
    "measurement": (schema.kernel_measurements, ("kernel_key", "device", "features", "stats", "created"),
                    ["kernel_key", "device"]),
    "cost_model": (schema.cost_models, ("uid", "device", "version", "blob", "metrics", "trained_on", "created"),
                   ["uid"]),
}


def _to_json(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).isoformat()
    if isinstance(value, (bytes, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


def export_rows(conn: sa.Connection, path: Path, schema_version: int) -> int:
    """Write the header and every row; the file appears whole or not at all."""
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps({"kind": FORMAT, "schema_version": schema_version}) + "\n")
            for kind, (table, columns, _) in _KINDS.items():
                order = table.c.id if "id" in table.c else table.c[columns[0]]
                for row in conn.execute(sa.select(*(table.c[c] for c in columns)).order_by(order)):
                    line = {"kind": kind, **{c: _to_json(v) for c, v in row._mapping.items()}}
                    f.write(json.dumps(line, sort_keys=True) + "\n")
                    n += 1
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise DBError(f"cannot write {path}: {e.strerror}") from None
    return n


_PARSE: dict[str, Callable[[Any], Any]] = {
    "created": datetime.fromisoformat,
    "blob": lambda v: base64.b64decode(v, validate=True),
    "plan_schema": int,
    "time_us": lambda v: None if v is None else float(v),
}


def read_rows(path: Path, schema_version: int) -> list[tuple[str, dict[str, Any]]]:
    """Parse and check a whole export before anything is written: (kind, column values) per row."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise DBError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    header: dict[str, Any] | None = None
    rows: list[tuple[str, dict[str, Any]]] = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DBError(f"{where}: not JSON ({e.msg})") from None
        if header is None:
            if not isinstance(obj, dict) or obj.get("kind") != FORMAT:
                raise DBError(f"{path} is not an autofuse tuning-DB export (no {FORMAT} header line)")
            version = obj.get("schema_version")
            if not isinstance(version, int):
                raise DBError(f"{path}: the header has no schema version")
            if version > schema_version:
                raise DBError(f"{path} has schema version {version}, newer than this autofuse ({schema_version}); "
                              "upgrade autofuse")
            header = obj
            continue
        kind = obj.get("kind") if isinstance(obj, dict) else None
        if kind not in _KINDS:
            raise DBError(f"{where}: not a graph, plan, measurement or cost_model row")
        columns = _KINDS[kind][1]
        missing = [c for c in columns if c not in obj]
        if missing:
            raise DBError(f"{where}: {kind} row lacks {', '.join(missing)}")
        try:
            rows.append((kind, {c: _PARSE.get(c, _same)(obj[c]) for c in columns}))
        except (TypeError, ValueError) as e:
            raise DBError(f"{where}: bad {kind} row ({e})") from None
    if header is None:
        raise DBError(f"{path} is empty, not an autofuse tuning-DB export")
    return rows


def _same(value: Any) -> Any:
    return value


def import_rows(conn: sa.Connection, rows: list[tuple[str, dict[str, Any]]]) -> int:
    """Insert the rows not present yet (plans bring their graph row); returns rows added."""
    added = 0
    for kind, values in rows:
        table, _, key = _KINDS[kind]
        if kind == "plan":
            added += ensure_graph(conn, values["graph_hash"], created=values["created"])
        if kind == "graph":
            added += ensure_graph(conn, values["hash"], values["description"], values["created"])
        else:
            added += insert_if_absent(conn, table, values, key)
    return added
