"""TuningDB: graphs, their best fusion plans, kernel measurements and cost models, in one database.

Every write is one transaction (a reader never sees half a plan); measurements are insert-if-absent
because a kernel measured once is a fact that is never measured again.
"""
from __future__ import annotations

import contextlib
import os
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Iterator

import sqlalchemy as sa
import sqlalchemy.exc as sa_exc

from . import connect, jsonl, schema
from .errors import DBError, one_line, translated
from .migrations import ensure_schema
from .records import PlanRecord
from .rows import ensure_graph, insert_if_absent, measured_clause, plan_from_row, preference_order

_ABBREV = 12


def short(graph_hash: str) -> str:
    """A graph hash as messages show it."""
    return graph_hash if len(graph_hash) <= _ABBREV else graph_hash[:_ABBREV] + "…"


class TuningDB:
    """The tuning database behind one SQLAlchemy engine (SQLite file or PostgreSQL server)."""

    def __init__(self, engine: sa.Engine, target: connect.Target, schema_version: int):
        self._engine = engine
        self._writer = engine.execution_options(**{connect.WRITE: True})
        # a read of several statements (lookup, export) sees one snapshot; SQLite's BEGIN already does
        self._reader = engine.execution_options(isolation_level="REPEATABLE READ") \
            if engine.dialect.name == "postgresql" else engine
        self._target = target
        self.schema_version = schema_version

    @classmethod
    def open(cls, url_or_path: str | os.PathLike[str] | None = None) -> "TuningDB":
        """Open (creating or migrating the schema as needed) the DB at a path or SQLAlchemy URL.

        None means `default_db_url()`. Raises DBError, leaving the file untouched, for anything that
        is not a usable autofuse tuning database.
        """
        target = connect.resolve(url_or_path)
        if target.sqlite_file is not None:
            connect.check_sqlite_file(target.sqlite_file, target.name)
            if target.sqlite_file == connect.cache_db_path():  # the default location: make the cache dir
                target.sqlite_file.parent.mkdir(parents=True, exist_ok=True)
        engine = connect.make_engine(target)
        try:
            writer = engine.execution_options(**{connect.WRITE: True})
            try:
                conn = writer.connect()
            except sa_exc.SQLAlchemyError as e:
                verb = "open" if target.sqlite_file is not None else "connect to"
                raise DBError(f"cannot {verb} {target.name}: {one_line(e)}") from None
            with conn, translated(f"cannot set up {target.name}"), conn.begin():
                version = ensure_schema(conn, target.name, exclusive=conn.dialect.name == "sqlite")
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, target, version)

    @property
    def url(self) -> str:
        """The database URL, password masked (for messages and logs)."""
        return self._target.url.render_as_string(hide_password=True)

    @property
    def sqlite_file(self) -> Path | None:
        """The SQLite file of the database (None for a server)."""
        return self._target.sqlite_file

    @property
    def storage_url(self) -> str:
        """The full database URL (password included) for another client of the same DB: Optuna's
        RDB storage keeps the search's studies next to the plans."""
        return self._target.url.render_as_string(hide_password=False)

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> "TuningDB":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TuningDB({self.url!r})"

    @contextlib.contextmanager
    def _read(self, what: str) -> Iterator[sa.Connection]:
        with translated(f"{what} in {self._target.name} failed"), self._reader.connect() as conn:
            yield conn

    @contextlib.contextmanager
    def _write(self, what: str) -> Iterator[sa.Connection]:
        with translated(f"{what} in {self._target.name} failed"), self._writer.begin() as conn:
            yield conn

    # graphs and plans

    def put_graph(self, graph_hash: str, description: str = "") -> None:
        """Record a graph (idempotent; a description fills in an empty one)."""
        with self._write("put_graph") as conn:
            ensure_graph(conn, graph_hash, description)

    def put_plan(self, rec: PlanRecord) -> int:
        """Store a plan (and its graph row if new) in one transaction; returns the plan id."""
        rec.check()
        with self._write("put_plan") as conn:
            ensure_graph(conn, rec.graph_hash)
            res = conn.execute(sa.insert(schema.plans).values(
                uid=uuid.uuid4().hex, graph_hash=rec.graph_hash, device=rec.device,
                torch_version=rec.torch_version, triton_version=rec.triton_version,
                plan_schema=rec.plan_schema, plan_json=rec.plan_json,
                time_us=None if rec.time_us is None else float(rec.time_us),
                baselines={str(k): float(v) for k, v in dict(rec.baselines).items()},
                source=rec.source, created=rec.created or schema.utcnow()))
            return int(res.inserted_primary_key[0])

    def lookup(self, graph_hash: str, device: str, torch_version: str, triton_version: str,
               plan_schema: int) -> tuple[PlanRecord | None, str]:
        """The best plan for exactly this graph and stack, or None and a one-line reason why not.

        Best: measured before predicted, then lowest time_us, then newest. The reason names the
        first of device, torch, triton, plan schema that no stored plan of the graph matches.
        """
        p = schema.plans.c
        want = {"device": device, "torch_version": torch_version, "triton_version": triton_version,
                "plan_schema": plan_schema}
        with self._read("lookup") as conn:
            keys = conn.execute(sa.select(p.device, p.torch_version, p.triton_version, p.plan_schema)
                                .where(p.graph_hash == graph_hash).distinct()).all()
            reason = _mismatch(graph_hash, want, keys)
            if reason:
                return None, reason
            row = conn.execute(sa.select(schema.plans).where(
                p.graph_hash == graph_hash, *(p[k] == v for k, v in want.items()))
                .order_by(*preference_order()).limit(1)).one()
        return plan_from_row(row), ""

    def plans(self, graph_hash: str) -> list[PlanRecord]:
        """All plans of a graph, oldest first."""
        p = schema.plans.c
        with self._read("plans") as conn:
            rows = conn.execute(sa.select(schema.plans).where(p.graph_hash == graph_hash).order_by(p.id)).all()
        return [plan_from_row(r) for r in rows]

    def list_graphs(self) -> list[dict[str, Any]]:
        """Every graph with its plan count and best measured time (None if no measured plan)."""
        g, p = schema.graphs.c, schema.plans.c
        best = sa.func.min(sa.case((measured_clause(), p.time_us), else_=None))
        q = (sa.select(g.hash, g.description, g.created, sa.func.count(p.id), best)
             .select_from(schema.graphs.outerjoin(schema.plans, p.graph_hash == g.hash))
             .group_by(g.hash, g.description, g.created).order_by(g.created, g.hash))
        with self._read("list_graphs") as conn:
            rows = conn.execute(q).all()
        return [{"hash": h, "description": d, "plans": n, "best_time_us": t, "created": c}
                for h, d, c, n, t in rows]

    def show(self, graph_hash_prefix: str) -> dict[str, Any]:
        """A graph (a unique prefix of its hash works) and its plans; DBError if unknown or ambiguous."""
        prefix = graph_hash_prefix.strip()
        if not prefix:
            raise DBError("no graph hash given")
        g = schema.graphs.c
        with self._read("show") as conn:
            rows = conn.execute(sa.select(schema.graphs).where(g.hash.startswith(prefix, autoescape=True))
                                .order_by(g.hash).limit(6)).all()
        exact = [r for r in rows if r.hash == prefix]
        if exact:
            rows = exact
        if not rows:
            raise DBError(f"no graph {prefix!r} in {self._target.name}")
        if len(rows) > 1:
            shown = ", ".join(short(r.hash) for r in rows[:5]) + (", …" if len(rows) > 5 else "")
            raise DBError(f"graph prefix {prefix!r} is ambiguous in {self._target.name}: it matches {shown}")
        r = rows[0]
        return {"hash": r.hash, "description": r.description, "created": r.created, "plans": self.plans(r.hash)}

    # kernel measurements

    def put_measurement(self, kernel_key: str, device: str, features: dict, stats: dict) -> bool:
        """Store a kernel's measurement unless (kernel_key, device) is already stored; True if stored.

        The first measurement stands: a kernel is never measured twice.
        """
        with self._write("put_measurement") as conn:
            return insert_if_absent(conn, schema.kernel_measurements, {
                "kernel_key": kernel_key, "device": device, "features": features, "stats": stats,
                "created": schema.utcnow()}, ["kernel_key", "device"])

    def get_measurement(self, kernel_key: str, device: str) -> dict[str, Any] | None:
        """{"features", "stats", "created"} of a measured kernel, or None."""
        m = schema.kernel_measurements.c
        with self._read("get_measurement") as conn:
            row = conn.execute(sa.select(m.features, m.stats, m.created)
                               .where(m.kernel_key == kernel_key, m.device == device)).first()
        return None if row is None else {"features": row.features, "stats": row.stats, "created": row.created}

    def measurements(self, device: str | None = None) -> list[dict[str, Any]]:
        """All measurements (of one device if given), oldest first: the cost model's training set."""
        m = schema.kernel_measurements.c
        q = sa.select(m.kernel_key, m.device, m.features, m.stats, m.created).order_by(m.id)
        if device is not None:
            q = q.where(m.device == device)
        with self._read("measurements") as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    # cost models

    def put_cost_model(self, device: str, version: str, blob: bytes, metrics: dict, trained_on: dict) -> int:
        """Store a trained cost model (serialized as `blob`); returns its id."""
        with self._write("put_cost_model") as conn:
            res = conn.execute(sa.insert(schema.cost_models).values(
                uid=uuid.uuid4().hex, device=device, version=version, blob=bytes(blob), metrics=metrics,
                trained_on=trained_on, created=schema.utcnow()))
            return int(res.inserted_primary_key[0])

    def latest_cost_model(self, device: str) -> dict[str, Any] | None:
        """The newest cost model for a device: {"id", "device", "version", "blob", "metrics", "trained_on", "created"}."""
        c = schema.cost_models.c
        with self._read("latest_cost_model") as conn:
            row = conn.execute(sa.select(c.id, c.device, c.version, c.blob, c.metrics, c.trained_on, c.created)
                               .where(c.device == device).order_by(c.created.desc(), c.id.desc()).limit(1)).first()
        return None if row is None else dict(row._mapping)

    # moving and trimming

    def export_jsonl(self, path: str | Path) -> int:
        """Write every row as JSON lines (one consistent snapshot); returns the rows written."""
        with self._read("export") as conn:
            return jsonl.export_rows(conn, Path(path), self.schema_version)

    def import_jsonl(self, path: str | Path) -> int:
        """Add the rows of an export that are not here yet, in one transaction; returns rows added."""
        rows = jsonl.read_rows(Path(path), self.schema_version)
        with self._write("import") as conn:
            return jsonl.import_rows(conn, rows)

    def prune(self, older_than: timedelta) -> int:
        """Delete plans and measurements created more than `older_than` ago; returns rows removed."""
        if older_than < timedelta(0):
            raise DBError(f"prune: older_than must not be negative, not {older_than}")
        try:
            cutoff: datetime = schema.utcnow() - older_than
        except OverflowError:
            raise DBError(f"prune: an age of {older_than.days} days reaches before the year 1") from None
        with self._write("prune") as conn:
            return sum(conn.execute(sa.delete(t).where(t.c.created < cutoff)).rowcount
                       for t in (schema.plans, schema.kernel_measurements))


def _mismatch(graph_hash: str, want: dict[str, Any], keys: list[sa.Row]) -> str:
    """Why no stored plan matches: the first field, in lookup order, that narrows the plans to none."""
    if not keys:
        return f"no plan for graph {short(graph_hash)}"
    labels = {"device": "devices", "torch_version": "torch", "triton_version": "triton", "plan_schema": "plan schema"}
    where = f"plans for graph {short(graph_hash)}"
    for field, label in labels.items():
        have = sorted({str(k._mapping[field]) for k in keys})
        keys = [k for k in keys if k._mapping[field] == want[field]]
        if not keys:
            return f"{where} exist for {label} {', '.join(have)} but not {want[field]}"
        if field == "device":
            where += f" on {want[field]}"
    return ""
