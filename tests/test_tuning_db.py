"""Tuning DB: storage conformance on SQLite and PostgreSQL, migrations, bad input, concurrency, CLI.

The PostgreSQL cases use $AUTOFUSE_TEST_PG_URL (a database on a server where the user may create
databases; .ci/run starts one), else a throwaway server this file starts with initdb + pg_ctl;
they are skipped, with the reason, only when neither is possible. Each test gets a fresh database.
"""
from __future__ import annotations

import argparse
import glob
import json
import multiprocessing
import os
import pwd
import shlex
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

import tuning_db.migrations as migrations
from tuning_db import schema
from tuning_db import DBError, PlanRecord, TuningDB, default_db_url
from tuning_db.cli import register

ROOT = Path(__file__).resolve().parents[1]
PG_ENV = "AUTOFUSE_TEST_PG_URL"
G1 = "a1" * 32  # graph hashes look like sha256 hex
G2 = "b2" * 32
NOW = datetime.now(timezone.utc)


# --- backends -------------------------------------------------------------------------------------

def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    return versions[-1] if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_pg() -> tuple[str, Callable[[], None]]:
    """A throwaway PostgreSQL cluster on a free loopback port: (admin URL, stop)."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        raise RuntimeError("initdb/pg_ctl not found (install PostgreSQL, e.g. apt-get install postgresql)")
    tmp = tempfile.mkdtemp(prefix="autofuse-pg-")
    prefix: list[str] | None = []  # None: through su
    if os.geteuid() == 0:  # postgres refuses to run as root
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            raise RuntimeError("running as root and there is no 'postgres' user to run the server") from None
        os.chown(tmp, pw.pw_uid, pw.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"] if shutil.which("runuser") else None
    port, data, log = _free_port(), os.path.join(tmp, "data"), os.path.join(tmp, "log")

    def run(*cmd: str) -> None:
        argv = prefix + list(cmd) if prefix is not None else ["su", "postgres", "-s", "/bin/sh", "-c", shlex.join(cmd)]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            tail = (open(log).read() if os.path.exists(log) else r.stderr)[-600:]
            raise RuntimeError(f"{os.path.basename(cmd[0])} failed: {tail.strip()}")

    try:
        run(initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
        opts = (f"-c listen_addresses=127.0.0.1 -p {port} -k {tmp} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off")
        run(pg_ctl, "-D", data, "-l", log, "-w", "-t", "60", "-o", opts, "start")
    except Exception:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

    def stop() -> None:
        try:
            run(pg_ctl, "-D", data, "-m", "immediate", "stop")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres", stop


@pytest.fixture(scope="session")
def pg_admin_url():
    """A URL on a PostgreSQL server where we may CREATE DATABASE."""
    if os.environ.get(PG_ENV):
        yield os.environ[PG_ENV]
        return
    try:
        url, stop = _start_pg()
    except Exception as e:  # noqa: BLE001 - any failure here means: no server for these tests
        pytest.skip(f"no PostgreSQL: {PG_ENV} is not set and starting a throwaway server failed: {e}")
    yield url
    stop()


def _fresh_pg_database(admin_url: str):
    url = sa.make_url(admin_url)
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    name = f"af_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with admin.connect() as c:
            c.exec_driver_sql(f'CREATE DATABASE "{name}"')
    except sa.exc.OperationalError as e:
        admin.dispose()
        pytest.fail(f"{PG_ENV}={admin_url}: cannot create a test database: {e}")
    except sa.exc.ProgrammingError as e:
        admin.dispose()
        pytest.skip(f"{PG_ENV}: the user may not create databases: {e}")
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as c:
            c.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    """The URL of a fresh, empty database on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tuning.db'}"
    else:
        yield from _fresh_pg_database(request.getfixturevalue("pg_admin_url"))


@pytest.fixture
def db(db_url):
    with TuningDB.open(db_url) as d:
        yield d


def plan(graph=G1, device="cuda:NVIDIA H200", torch="2.11", triton="3.6", schema=1, time_us=10.0,
         source="tuned", created=None, **kw) -> PlanRecord:
    return PlanRecord(graph, device, torch, triton, schema, json.dumps({"groups": [[0, 1]], **kw}),
                      time_us=time_us, baselines={"inductor": 12.5, "none": 30.0}, source=source, created=created)


def same_plan(a: PlanRecord, b: PlanRecord) -> bool:
    fields = ("graph_hash", "device", "torch_version", "triton_version", "plan_schema", "plan_json",
              "time_us", "baselines", "source")
    return all(getattr(a, f) == getattr(b, f) for f in fields)


def populate(db: TuningDB) -> None:
    db.put_graph(G1, "layernorm bf16 4096x4096")
    db.put_plan(plan())
    db.put_plan(plan(source="predicted", time_us=3.0, created=NOW - timedelta(days=1)))
    db.put_plan(plan(graph=G2, device="cpu:interpreter", torch="2.13", triton="3.9", source="strategy:inductor"))
    db.put_measurement("kern-1", "cuda:NVIDIA H200", {"bytes": 1 << 20, "n_regs": 32}, {"median_us": 4.25, "n": 20})
    db.put_measurement("kern-1", "cpu:interpreter", {"bytes": 1 << 20}, {"median_us": 900.0})
    db.put_cost_model("cuda:NVIDIA H200", "gbdt-v1", b"\x00\x01model\xff", {"mape": 0.12}, {"rows": 2})


# --- locations and opening ------------------------------------------------------------------------

def test_default_db_url(monkeypatch, tmp_path):
    monkeypatch.delenv("AUTOFUSE_DB", raising=False)
    monkeypatch.delenv("AUTOFUSE_CACHE_DIR", raising=False)   # the cache root, which holds the default DB
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_db_url() == f"sqlite:///{tmp_path}/xdg/autofuse/tuning.db"
    with TuningDB.open() as d:  # the default location is created on first use
        assert d.schema_version == 1
    assert (tmp_path / "xdg" / "autofuse" / "tuning.db").is_file()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg2"))
    TuningDB.open(default_db_url()).close()  # however it is named
    assert (tmp_path / "xdg2" / "autofuse" / "tuning.db").is_file()
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_db_url() == f"sqlite:///{tmp_path}/home/.cache/autofuse/tuning.db"
    monkeypatch.setenv("AUTOFUSE_DB", str(tmp_path / "mine.db"))
    assert default_db_url() == f"sqlite:///{tmp_path}/mine.db"
    monkeypatch.setenv("AUTOFUSE_DB", "postgresql+psycopg://u@db.example/tuning")
    assert default_db_url() == "postgresql+psycopg://u@db.example/tuning"


def test_open_creates_schema_once(db_url):
    with TuningDB.open(db_url) as d:
        assert d.schema_version == 1 and d.url.split("://")[0] in ("sqlite", "postgresql+psycopg")
    with TuningDB.open(db_url) as d:  # reopening finds it, adds nothing
        assert d.schema_version == 1
    engine = sa.create_engine(db_url, poolclass=NullPool)
    with engine.connect() as c:
        tables = set(sa.inspect(c).get_table_names())
        meta = {k: v for k, v in c.execute(sa.text("SELECT key, value FROM autofuse_meta"))}
    engine.dispose()
    assert {"autofuse_meta", "graphs", "plans", "kernel_measurements", "cost_models"} <= tables
    assert meta == {"marker": "autofuse tuning database", "schema_version": "1"}


def test_path_means_sqlite_file(tmp_path):
    with TuningDB.open(str(tmp_path / "t.db")) as d:
        assert d.url == f"sqlite:///{tmp_path}/t.db"
        with sqlite3.connect(tmp_path / "t.db") as c:
            assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# --- round trips ----------------------------------------------------------------------------------

def test_plan_round_trip(db):
    when = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc)
    rec = plan(created=when, note="ünïcode ✓")
    pid = db.put_plan(rec)
    [back] = db.plans(G1)
    assert back.id == pid and back.created == when and same_plan(back, rec)
    assert db.list_graphs()[0]["hash"] == G1  # put_plan made the graph row
    assert db.plans(G2) == []
    with pytest.raises(DBError, match="source must be"):
        db.put_plan(plan(graph=G2, source="guessed"))
    with pytest.raises(DBError, match="plan_schema must be an int"):
        db.put_plan(plan(graph=G2, schema="1"))
    assert [g["hash"] for g in db.list_graphs()] == [G1]  # a refused plan leaves nothing behind


def test_put_graph_is_idempotent(db):
    db.put_graph(G1)
    db.put_graph(G1, "softmax f32")  # fills in the missing description
    db.put_graph(G1, "something else")  # keeps the first one
    [g] = db.list_graphs()
    assert (g["hash"], g["description"], g["plans"], g["best_time_us"]) == (G1, "softmax f32", 0, None)


def test_measurements_are_insert_if_absent(db):
    assert db.put_measurement("k1", "cuda:0", {"bytes": 4096, "kind": "pointwise"}, {"median_us": 1.5})
    assert not db.put_measurement("k1", "cuda:0", {"bytes": 1}, {"median_us": 99.0})
    assert db.put_measurement("k1", "cpu", {"bytes": 4096}, {"median_us": 700.0})  # another device
    got = db.get_measurement("k1", "cuda:0")
    assert got["features"] == {"bytes": 4096, "kind": "pointwise"} and got["stats"] == {"median_us": 1.5}
    assert abs(got["created"] - datetime.now(timezone.utc)) < timedelta(minutes=5)
    assert db.get_measurement("k1", "rocm") is None and db.get_measurement("k2", "cuda:0") is None
    assert [m["device"] for m in db.measurements()] == ["cuda:0", "cpu"]
    assert [(m["kernel_key"], m["stats"]) for m in db.measurements("cpu")] == [("k1", {"median_us": 700.0})]


def test_cost_models(db):
    assert db.latest_cost_model("cuda:0") is None
    first = db.put_cost_model("cuda:0", "v1", b"\x00old", {"mape": 0.3}, {"measurements": 10})
    second = db.put_cost_model("cuda:0", "v1", bytes(range(256)) * 64, {"mape": 0.1}, {"measurements": 99})
    db.put_cost_model("cpu", "v1", b"cpu", {}, {})
    latest = db.latest_cost_model("cuda:0")
    assert second > first and latest["id"] == second
    assert latest["blob"] == bytes(range(256)) * 64 and latest["metrics"] == {"mape": 0.1}
    assert (latest["device"], latest["version"], latest["trained_on"]) == ("cuda:0", "v1", {"measurements": 99})


def test_list_graphs_and_show(db):
    populate(db)
    graphs = {g["hash"]: g for g in db.list_graphs()}
    assert graphs[G1]["plans"] == 2 and graphs[G1]["best_time_us"] == 10.0  # the prediction is no time
    assert graphs[G1]["description"] == "layernorm bf16 4096x4096" and graphs[G2]["plans"] == 1
    shown = db.show("a1a1")
    assert shown["hash"] == G1 and len(shown["plans"]) == 2 and shown["created"] is not None
    db.put_graph("a1" * 31 + "ff")
    with pytest.raises(DBError, match="ambiguous"):
        db.show("a1a1")
    assert db.show(G1)["hash"] == G1  # a whole hash is never ambiguous
    with pytest.raises(DBError, match="no graph 'ccc'"):
        db.show("ccc")
    with pytest.raises(DBError, match="no graph '%'"):  # LIKE wildcards are literal
        db.show("%")


# --- lookup ---------------------------------------------------------------------------------------

def test_lookup_prefers_measured_then_fastest_then_newest(db):
    key = (G1, "cuda:NVIDIA H200", "2.11", "3.6", 1)
    db.put_plan(plan(source="predicted", time_us=1.0))
    best, reason = db.lookup(*key)
    assert best.source == "predicted" and reason == ""  # a prediction is better than nothing
    db.put_plan(plan(source="strategy:inductor", time_us=12.0))
    assert db.lookup(*key)[0].source == "strategy:inductor"  # measured beats predicted, however fast
    db.put_plan(plan(source="tuned", time_us=9.0, created=NOW - timedelta(days=2), tag="old"))
    db.put_plan(plan(source="imported", time_us=9.0, created=NOW - timedelta(days=1), tag="new"))
    db.put_plan(plan(source="tuned", time_us=None))
    best, _ = db.lookup(*key)
    assert best.time_us == 9.0 and json.loads(best.plan_json)["tag"] == "new"  # a tie goes to the newest
    assert min(db.plans(G1), key=PlanRecord.preference).id == best.id  # `db show` marks the same one
    # a different stack sees none of these
    assert db.lookup(G1, "cuda:NVIDIA H200", "2.11", "3.6", 2)[0] is None


def test_lookup_says_what_did_not_match(db):
    assert db.lookup(G1, "cpu:interpreter", "2.13", "3.9", 1) == (None, f"no plan for graph {G1[:12]}…")
    db.put_plan(plan(device="cuda:NVIDIA H100", torch="2.11", triton="3.6", schema=2))
    db.put_plan(plan(device="cuda:NVIDIA H200", torch="2.11", triton="3.6", schema=2))
    db.put_plan(plan(device="cpu:interpreter", torch="2.11", triton="3.9", schema=2))
    db.put_plan(plan(device="cpu:interpreter", torch="2.13", triton="3.6", schema=2))
    db.put_plan(plan(device="cpu:interpreter", torch="2.13", triton="3.9", schema=2))
    g = f"plans for graph {G1[:12]}…"
    assert db.lookup(G1, "rocm:MI300", "2.13", "3.9", 1) == (
        None, f"{g} exist for devices cpu:interpreter, cuda:NVIDIA H100, cuda:NVIDIA H200 but not rocm:MI300")
    assert db.lookup(G1, "cuda:NVIDIA H100", "2.13", "3.9", 1) == (
        None, f"{g} on cuda:NVIDIA H100 exist for torch 2.11 but not 2.13")
    assert db.lookup(G1, "cuda:NVIDIA H200", "2.11", "3.9", 1) == (
        None, f"{g} on cuda:NVIDIA H200 exist for triton 3.6 but not 3.9")
    assert db.lookup(G1, "cpu:interpreter", "2.13", "3.9", 1) == (
        None, f"{g} on cpu:interpreter exist for plan schema 2 but not 1")
    assert db.lookup(G1, "cpu:interpreter", "2.13", "3.9", 2)[0] is not None


# --- export / import / prune ----------------------------------------------------------------------

def _contents(d: TuningDB) -> dict:
    plans = sorted((p.graph_hash, p.device, p.plan_json, p.source, p.time_us, p.created, tuple(sorted(p.baselines.items())))
                   for g in d.list_graphs() for p in d.plans(g["hash"]))
    graphs = sorted((g["hash"], g["description"], g["created"]) for g in d.list_graphs())
    meas = sorted((m["kernel_key"], m["device"], json.dumps(m["features"]), json.dumps(m["stats"]), m["created"])
                  for m in d.measurements())
    models = d.latest_cost_model("cuda:NVIDIA H200")
    return {"plans": plans, "graphs": graphs, "measurements": meas,
            "model": models and {k: v for k, v in models.items() if k != "id"}}


def test_export_import_round_trip_is_idempotent(db, tmp_path):
    populate(db)
    out = tmp_path / "dump.jsonl"
    n = db.export_jsonl(out)
    assert n == 2 + 3 + 2 + 1
    assert json.loads(out.read_text().splitlines()[0])["kind"] == "autofuse-tuning-db"
    with TuningDB.open(str(tmp_path / "copy.db")) as copy:
        assert copy.import_jsonl(out) == n
        assert _contents(copy) == _contents(db)
        assert copy.import_jsonl(out) == 0  # importing twice adds nothing
        assert _contents(copy) == _contents(db)
        copy.put_measurement("kern-2", "cpu", {}, {})
        back = tmp_path / "back.jsonl"
        assert copy.export_jsonl(back) == n + 1
    assert db.import_jsonl(out) == 0  # nor does importing into the origin
    assert db.import_jsonl(back) == 1
    assert db.get_measurement("kern-2", "cpu") is not None


def test_import_refuses_bad_files_whole(db, tmp_path):
    populate(db)
    good = tmp_path / "dump.jsonl"
    db.export_jsonl(good)
    lines = good.read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("hello\n")
    with pytest.raises(DBError, match="bad.jsonl:1: not JSON"):
        db.import_jsonl(bad)
    bad.write_text('{"kind": "graph"}\n')
    with pytest.raises(DBError, match="is not an autofuse tuning-DB export"):
        db.import_jsonl(bad)
    with TuningDB.open(str(tmp_path / "empty.db")) as empty:
        bad.write_text("\n".join(lines[:-1] + ['{"kind": "plan", "uid": "x"}']) + "\n")
        with pytest.raises(DBError, match=rf"bad.jsonl:{len(lines)}: plan row lacks graph_hash"):
            empty.import_jsonl(bad)
        assert empty.list_graphs() == [] and empty.measurements() == []  # nothing half-imported
        bad.write_text(json.dumps({"kind": "autofuse-tuning-db", "schema_version": 7}) + "\n")
        with pytest.raises(DBError, match="schema version 7, newer than this autofuse"):
            empty.import_jsonl(bad)
        with pytest.raises(DBError, match="cannot read"):
            empty.import_jsonl(tmp_path / "missing.jsonl")


def test_prune_removes_old_plans_and_measurements(db, db_url):
    db.put_plan(plan(created=NOW - timedelta(days=40), tag="old"))
    db.put_plan(plan(created=NOW - timedelta(days=1), tag="new"))
    db.put_measurement("old", "cpu", {}, {})
    db.put_measurement("new", "cpu", {}, {})
    engine = sa.create_engine(db_url, poolclass=NullPool)
    m = schema.kernel_measurements
    with engine.begin() as c:  # measurements carry no created argument: age one by hand
        c.execute(sa.update(m).where(m.c.kernel_key == "old").values(created=NOW - timedelta(days=31)))
    engine.dispose()
    assert db.prune(timedelta(days=30)) == 2
    assert [json.loads(p.plan_json)["tag"] for p in db.plans(G1)] == ["new"]
    assert [m["kernel_key"] for m in db.measurements()] == ["new"]
    assert db.prune(timedelta(days=30)) == 0
    assert db.prune(timedelta(0)) == 2
    with pytest.raises(DBError, match="negative"):
        db.prune(timedelta(days=-1))


# --- migrations -----------------------------------------------------------------------------------

def test_a_version_0_database_is_migrated(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE autofuse_meta (key VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL)")
        c.executemany("INSERT INTO autofuse_meta VALUES (?, ?)",
                      [("marker", "autofuse tuning database"), ("schema_version", "0")])
    c.close()
    with TuningDB.open(str(path)) as d:
        assert d.schema_version == 1
        d.put_plan(plan())
        assert len(d.plans(G1)) == 1
    with sqlite3.connect(path) as c:
        assert c.execute("SELECT value FROM autofuse_meta WHERE key = 'schema_version'").fetchone() == ("1",)
    c.close()


def _schema_version(url: str) -> int:
    engine = sa.create_engine(url, poolclass=NullPool)
    with engine.connect() as c:
        v = c.execute(sa.text("SELECT value FROM autofuse_meta WHERE key = 'schema_version'")).scalar_one()
        tables = set(sa.inspect(c).get_table_names())
    engine.dispose()
    return int(v), tables


def test_migrations_run_in_order_in_one_transaction(db_url, monkeypatch):
    TuningDB.open(db_url).close()
    ran = []

    def broken(conn):
        ran.append("broken")
        conn.execute(sa.text("CREATE TABLE half_done (x INTEGER)"))
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, broken])
    with pytest.raises(DBError, match="from schema version 1 to 2 failed: disk on fire"):
        TuningDB.open(db_url)
    assert _schema_version(db_url)[0] == 1 and "half_done" not in _schema_version(db_url)[1]  # rolled back

    def add_notes(conn):
        ran.append("v1->v2")
        conn.execute(sa.text("CREATE TABLE notes (x INTEGER)"))

    def add_more(conn):
        ran.append("v2->v3")
        conn.execute(sa.text("ALTER TABLE notes ADD COLUMN y INTEGER"))

    monkeypatch.setattr(migrations, "MIGRATIONS", [migrations._v0_to_v1, add_notes, add_more])
    with TuningDB.open(db_url) as d:
        assert d.schema_version == 3
    assert ran == ["broken", "v1->v2", "v2->v3"]
    assert _schema_version(db_url)[0] == 3 and "notes" in _schema_version(db_url)[1]
    TuningDB.open(db_url).close()
    assert ran == ["broken", "v1->v2", "v2->v3"]  # nothing runs twice
    monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:1])
    with pytest.raises(DBError, match="has schema version 3, newer than this autofuse \\(1\\); upgrade autofuse"):
        TuningDB.open(db_url)


# --- bad input: one clear error, nothing touched ---------------------------------------------------

def _one_error(target) -> str:
    with pytest.raises(DBError) as info:
        TuningDB.open(target)
    e = info.value
    assert "\n" not in str(e) and e.__cause__ is None and (e.__context__ is None or e.__suppress_context__)
    return str(e)


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_not_sqlite_file_is_refused_intact(tmp_path):
    path = tmp_path / "notes.db"
    path.write_bytes(os.urandom(8192))
    before = _files(tmp_path)
    assert _one_error(str(path)) == f"{path} is not an SQLite database"
    path.write_text("just some text the user keeps here\n")
    before = _files(tmp_path)
    assert _one_error(f"sqlite:///{path}") == f"{path} is not an SQLite database"
    assert _files(tmp_path) == before


def test_damaged_sqlite_file_is_refused_intact(tmp_path):
    path = tmp_path / "t.db"
    TuningDB.open(str(path)).close()
    data = bytearray(path.read_bytes())
    data[100:] = b"\xee" * (len(data) - 100)
    path.write_bytes(bytes(data))
    before = _files(tmp_path)
    assert "is a damaged or unreadable SQLite database" in _one_error(str(path))
    assert _files(tmp_path) == before


def test_foreign_sqlite_file_is_refused_intact(tmp_path):
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        c.execute("INSERT INTO users VALUES (1, 'ada')")
    c.close()
    before = _files(tmp_path)
    assert _one_error(str(path)) == f"{path} is not an autofuse tuning database (it has tables users)"
    assert _files(tmp_path) == before  # not even switched to WAL
    with sqlite3.connect(path) as c:  # our marker table name, someone else's content
        c.execute("CREATE TABLE autofuse_meta (key TEXT, value TEXT)")
    c.close()
    before = _files(tmp_path)
    assert "is not an autofuse tuning database (no 'autofuse tuning database' marker)" in _one_error(str(path))
    assert _files(tmp_path) == before


def test_newer_schema_is_refused_intact(db_url, tmp_path):
    TuningDB.open(db_url).close()
    engine = sa.create_engine(db_url, poolclass=NullPool)
    with engine.begin() as c:
        c.execute(sa.text("UPDATE autofuse_meta SET value = '99' WHERE key = 'schema_version'"))
    engine.dispose()
    before = _files(tmp_path)
    msg = _one_error(db_url)
    assert msg.endswith("has schema version 99, newer than this autofuse (1); upgrade autofuse")
    assert _files(tmp_path) == before and _schema_version(db_url)[0] == 99


def test_foreign_tables_on_a_server_are_refused(db_url):
    engine = sa.create_engine(db_url, poolclass=NullPool)
    with engine.begin() as c:
        c.execute(sa.text("CREATE TABLE plans (id INTEGER, what TEXT)"))
    engine.dispose()
    assert "is not an autofuse tuning database (it has tables plans)" in _one_error(db_url)


def test_unreachable_server_and_missing_driver(tmp_path):
    pytest.importorskip("psycopg", reason="the PostgreSQL driver is not installed here")
    port = _free_port()
    assert _one_error(f"postgresql://someone@127.0.0.1:{port}/tuning").startswith(
        f"cannot connect to postgresql+psycopg://someone@127.0.0.1:{port}/tuning: ")
    msg = _one_error(f"postgresql://someone:s3cret@127.0.0.1:{port}/tuning")
    assert "s3cret" not in msg and "***" in msg
    assert _one_error("mysql+nosuchdriver://u@localhost/db").startswith("unknown database kind")
    assert "psycopg2 is not installed" in _one_error("postgresql+psycopg2://u@localhost/db")
    assert _one_error("postgresql://u@localhost:port/db").startswith("cannot parse database URL")
    assert _one_error(str(tmp_path)) == f"{tmp_path} is a directory, not an SQLite database"
    assert _one_error(str(tmp_path / "no" / "such" / "dir" / "t.db")).startswith(f"cannot open {tmp_path}/no/such/dir/t.db: ")
    assert not (tmp_path / "no").exists()


# --- many writers at once ------------------------------------------------------------------------

N_WRITES = 40


def _writer(url: str, worker: int) -> int:
    """One process's share of the concurrent-writers test; returns how many shared keys it won."""
    won = 0
    with TuningDB.open(url) as d:
        for i in range(N_WRITES):
            d.put_plan(plan(graph=f"{i % 5:02d}" * 32, time_us=float(i), worker=worker, i=i))
            assert d.put_measurement(f"w{worker}-k{i}", "cpu", {"i": i}, {"worker": worker})
            won += d.put_measurement(f"shared-{i}", "cpu", {"i": i}, {"worker": worker})
    return won


def test_concurrent_writers_lose_nothing(db_url):
    TuningDB.open(db_url).close()
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        won = pool.starmap(_writer, [(db_url, w) for w in range(4)])
    assert sum(won) == N_WRITES  # each shared kernel measured once, by exactly one worker
    with TuningDB.open(db_url) as d:
        stored = {(json.loads(p.plan_json)["worker"], json.loads(p.plan_json)["i"])
                  for g in d.list_graphs() for p in d.plans(g["hash"])}
        assert stored == {(w, i) for w in range(4) for i in range(N_WRITES)}
        keys = {m["kernel_key"] for m in d.measurements()}
        assert keys == {f"w{w}-k{i}" for w in range(4) for i in range(N_WRITES)} | {f"shared-{i}" for i in range(N_WRITES)}
        assert len(d.list_graphs()) == 5


# --- CLI ------------------------------------------------------------------------------------------

def _cli(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="autofuse")
    register(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    return args.func(args)


def test_cli_commands(db, db_url, tmp_path, capsys):
    populate(db)
    assert _cli(["db", "--db", db_url, "list"]) == 0
    out = capsys.readouterr().out
    assert G1[:16] in out and G2[:16] in out and "layernorm bf16" in out and "2 graph(s)" in out
    assert _cli(["db", "show", "b2b2", "--db", db_url]) == 0  # --db after the subcommand works too
    out = capsys.readouterr().out
    assert G2 in out and "strategy:inductor" in out and "inductor=12.50" in out
    assert _cli(["db", "--db", db_url, "show", G1]) == 0
    marked = [line for line in capsys.readouterr().out.splitlines() if line.startswith("*")]
    assert len(marked) == 1 and "tuned" in marked[0]  # measured beats the faster prediction
    dump = tmp_path / "d.jsonl"
    assert _cli(["db", "--db", db_url, "export", str(dump)]) == 0
    assert "exported 8 rows" in capsys.readouterr().out
    assert _cli(["db", "--db", str(tmp_path / "other.db"), "import", str(dump)]) == 0
    assert "imported 8 new rows" in capsys.readouterr().out
    assert _cli(["db", "--db", db_url, "prune", "--older-than", "12h"]) == 0
    assert "removed 1 plans and measurements older than 12h" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        _cli(["db", "--db", db_url, "show", "nope"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("autofuse: no graph 'nope' in ") and err.count("\n") == 1
    with pytest.raises(SystemExit) as exit_:
        _cli(["db", "prune", "--older-than", "soon"])
    assert exit_.value.code == 2 and "not an age like 30d" in capsys.readouterr().err


def test_autofuse_db_command_line(tmp_path):
    """The real entry point, `python3 -m autofuse db ...` (the handlers' other commands are tested above;
    each process here pays for importing torch, so the few run at once)."""
    url = f"sqlite:///{tmp_path / 'tuning.db'}"
    with TuningDB.open(url) as d:
        populate(d)
    foreign = tmp_path / "notes.db"
    foreign.write_text("not a database\n")
    commands = {
        "list": ["--db", url, "list"],
        "export": ["--db", url, "export", str(tmp_path / "out.jsonl")],
        "error": ["--db", str(foreign), "list"],
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    procs = {k: subprocess.Popen([sys.executable, "-m", "autofuse", "db", *argv], cwd=tmp_path, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k, argv in commands.items()}
    res = {k: (p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for k, p in procs.items()}
    for k in ("list", "export"):
        assert res[k][0] == 0, (k, res[k][2])
    assert G1[:16] in res["list"][1] and "2 graph(s)" in res["list"][1]
    assert "exported 8 rows" in res["export"][1] and len((tmp_path / "out.jsonl").read_text().splitlines()) == 9
    assert res["error"] == (2, "", f"autofuse: {foreign} is not an SQLite database\n")
    assert foreign.read_text() == "not a database\n"
