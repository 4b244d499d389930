"""`autofuse db ...`: look into, move and trim the tuning database from the command line."""
from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Sequence

from .errors import DBError
from .files import check_output
from .store import TuningDB

_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_age(text: str) -> timedelta:
    """'30d', '12h', '90m', '2w', '45s' -> timedelta (argparse type)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not an age like 30d, 12h, 90m, 2w or 45s")
    try:
        age = timedelta(**{_UNITS[m.group(2)]: float(m.group(1))})
        datetime.now() - age - timedelta(days=366)  # a cutoff before the year 1 cannot be stored or compared
    except OverflowError:
        raise argparse.ArgumentTypeError(f"{text!r} is too long an age (the cutoff would be before the year 1)") from None
    return age


def format_age(age: timedelta) -> str:
    """The inverse of parse_age, in the largest unit that divides the age."""
    seconds = age.total_seconds()
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def register(subparsers: Any) -> None:
    """Add the `db` command (and its subcommands) to an argparse subparsers object."""
    db = subparsers.add_parser("db", help="inspect, export, import and prune the tuning database")
    url_help = "tuning DB path or SQLAlchemy URL (default: $AUTOFUSE_DB, else ~/.cache/autofuse/tuning.db)"
    db.add_argument("--db", metavar="URL", default=None, help=url_help)
    sub = db.add_subparsers(dest="db_command", required=True, metavar="{list,show,export,import,prune}")

    def add(name: str, func: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument("--db", metavar="URL", default=argparse.SUPPRESS, help=url_help)
        p.set_defaults(func=func)
        return p

    json_help = "print JSON (the table's fields, full hashes, ISO 8601 UTC times) instead of a table"
    add("list", cmd_list, "list graphs with their plan counts and best times").add_argument(
        "--json", action="store_true", help=json_help)
    show = add("show", cmd_show, "show a graph and its plans")
    show.add_argument("hash", help="graph hash or a unique prefix of it")
    show.add_argument("--json", action="store_true", help=json_help)
    export = add("export", cmd_export, "write the whole DB as JSON lines")
    export.add_argument("file")
    export.add_argument("--force", action="store_true", help="replace the file if it exists")
    add("import", cmd_import, "add the rows of a JSON-lines export (idempotent)").add_argument("file")
    add("prune", cmd_prune, "delete plans and measurements older than an age").add_argument(
        "--older-than", metavar="AGE", type=parse_age, required=True, help="e.g. 30d, 12h")


def _handler(body: Callable[[TuningDB, argparse.Namespace], None]) -> Callable[[argparse.Namespace], int]:
    """Open the DB, run the command, close it; a DBError becomes `autofuse: <message>` and exit 2."""
    def run(args: argparse.Namespace) -> int:
        try:
            with TuningDB.open(args.db) as db:
                body(db, args)
        except DBError as e:
            print(f"autofuse: {e}", file=sys.stderr)
            raise SystemExit(2) from None
        return 0
    run.__name__ = run.__qualname__ = body.__name__
    run.__doc__ = body.__doc__
    return run


def _when(t: datetime | None) -> str:
    return "-" if t is None else t.astimezone().strftime("%Y-%m-%d %H:%M")


def _us(t: float | None) -> str:
    return "-" if t is None else f"{t:.2f}"


def _iso(t: datetime | None) -> str | None:
    """A stored time (naive means UTC) as ISO 8601 with its offset, for JSON."""
    if t is None:
        return None
    return (t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)).isoformat()


def _plan_json(text: str) -> Any:
    """A stored plan as a JSON value; a row whose text is not JSON is shown as the text."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def _picked(plans: Sequence[Any]) -> set[int | None]:
    """Ids of the plans lookup picks: the preferred plan of each (device, versions, schema) stack."""
    best: dict[tuple, Any] = {}
    for p in plans:
        stack = (p.device, p.torch_version, p.triton_version, p.plan_schema)
        if stack not in best or p.preference() < best[stack].preference():
            best[stack] = p
    return {p.id for p in best.values()}


def _table(header: Sequence[str], rows: list[Sequence[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    return "\n".join("  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip() for r in [header, *rows])


@_handler
def cmd_list(db: TuningDB, args: argparse.Namespace) -> None:
    """Graphs, plan counts, best measured times."""
    graphs = db.list_graphs()
    if getattr(args, "json", False):
        print(json.dumps({"db": db.url, "graphs": [
            {"hash": g["hash"], "plans": g["plans"], "best_time_us": g["best_time_us"], "created": _iso(g["created"]),
             "description": g["description"]} for g in graphs]}, indent=2))
        return
    if not graphs:
        print(f"no graphs in {db.url}")
        return
    print(_table(("GRAPH", "PLANS", "BEST_US", "CREATED", "DESCRIPTION"),
                 [(g["hash"][:16], str(g["plans"]), _us(g["best_time_us"]), _when(g["created"]), g["description"])
                  for g in graphs]))
    print(f"{len(graphs)} graph(s) in {db.url}")


@_handler
def cmd_show(db: TuningDB, args: argparse.Namespace) -> None:
    """One graph and its plans, oldest first; * marks the plan lookup picks for its device and versions."""
    g = db.show(args.hash)
    picked = _picked(g["plans"])
    if getattr(args, "json", False):
        print(json.dumps({"db": db.url, "hash": g["hash"], "created": _iso(g["created"]), "description": g["description"],
                          "plans": [{"id": p.id, "picked": p.id in picked, "device": p.device,
                                     "torch_version": p.torch_version, "triton_version": p.triton_version,
                                     "plan_schema": p.plan_schema, "source": p.source, "time_us": p.time_us,
                                     "measured": p.measured, "baselines": dict(sorted(p.baselines.items())),
                                     "created": _iso(p.created), "plan": _plan_json(p.plan_json)}
                                    for p in g["plans"]]}, indent=2))
        return
    print(f"graph    {g['hash']}")
    print(f"created  {_when(g['created'])}")
    if g["description"]:
        print(f"about    {g['description']}")
    plans = g["plans"]
    if not plans:
        print("no plans")
        return
    print(_table(("", "ID", "DEVICE", "TORCH", "TRITON", "SCHEMA", "SOURCE", "TIME_US", "BASELINES", "CREATED"),
                 [("*" if p.id in picked else "", str(p.id), p.device, p.torch_version, p.triton_version,
                   str(p.plan_schema), p.source,
                   _us(p.time_us) + ("" if p.measured or p.time_us is None else " (pred)"),
                   ", ".join(f"{k}={_us(v)}" for k, v in sorted(p.baselines.items())) or "-", _when(p.created))
                  for p in plans]))


@_handler
def cmd_export(db: TuningDB, args: argparse.Namespace) -> None:
    """The whole DB as JSON lines."""
    own = (db.sqlite_file,) if db.sqlite_file is not None else ()
    check_output(args.file, force=args.force, what="export", protected=own)
    n = db.export_jsonl(args.file)
    print(f"exported {n} rows from {db.url} to {args.file}")


@_handler
def cmd_import(db: TuningDB, args: argparse.Namespace) -> None:
    """The rows of an export that are new here."""
    n = db.import_jsonl(args.file)
    print(f"imported {n} new rows from {args.file} into {db.url}")


@_handler
def cmd_prune(db: TuningDB, args: argparse.Namespace) -> None:
    """Old plans and measurements."""
    n = db.prune(args.older_than)
    print(f"removed {n} plans and measurements older than {format_age(args.older_than)} from {db.url}")
