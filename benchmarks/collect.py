"""Collect kernel measurements for the cost model: tune random programs (and the suite) on one GPU.

    python3 -m benchmarks.collect --out DIR [--programs N] [--seed K] [--scale S] [--suite] [--min-row N]
        [--losses N] [--trials 6] [--top-k 12] [--explore 0.5] [--budget SECONDS] [--device cuda]
    python3 -m benchmarks.collect --out DIR --export-only

Each program (the suite's cases first with --suite, then `corpus(N, seed, scale)`, then
`losses(N, seed, scale)` with --losses: classification losses, whose gathers the corpus lacks) is tuned with
`autofuse.tune` into DIR/measurements.db, so every kernel variant it measures lands in the DB's
kernel_measurements table. A program that fails is logged and skipped; the overall budget is
checked before each program and what is left of it bounds the program's search. Programs already
listed in DIR/collect.json are skipped, so a second run with the same DIR continues the first.
At the end the measurements are exported to DIR/measurements.jsonl.gz (one JSON object per line:
kernel_key, device, features, stats) and DIR/collect.json records what was done.
"""
from __future__ import annotations

import argparse
import gc
import gzip
import json
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from .corpus import Program, corpus, suite
from .losses import losses

MIN_LEFT_S = 5.0   # a program started with less budget than this would only verify its baselines


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.collect", description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="output folder: measurements.db, measurements.jsonl.gz, collect.json")
    p.add_argument("--programs", type=int, default=100, help="random programs from the corpus")
    p.add_argument("--seed", type=int, default=0, help="corpus seed (and the search's seed)")
    p.add_argument("--scale", type=float, default=1.0, help="multiplies every program's leading dim")
    p.add_argument("--min-row", type=int, default=0, metavar="N",
                   help="only the corpus programs that reduce rows of at least N elements (data where the "
                        "long-row kernels, such as cross-entropy's, have few neighbours)")
    p.add_argument("--suite", action="store_true", help="tune the benchmark suite's cases first")
    p.add_argument("--losses", type=int, default=0, metavar="N",
                   help="then N seeded classification-loss programs (benchmarks/losses.py)")
    p.add_argument("--trials", type=int, default=6, help="search trials per graph")
    p.add_argument("--top-k", type=int, default=12, help="configs measured per kernel besides the default")
    p.add_argument("--explore", type=float, default=0.5, help="share of top-k drawn at random")
    p.add_argument("--budget", type=float, default=None, help="wall seconds for the whole collection")
    p.add_argument("--device", default="cuda")
    p.add_argument("--export-only", action="store_true", help="only export DIR/measurements.db")
    return p.parse_args(argv)


def settings(args: argparse.Namespace, db: Path, time_budget: float | None) -> Any:
    from autofuse.search.graph_tuner import TuneSettings
    from autofuse.search.settings import KernelTuneSettings
    return TuneSettings(trials=args.trials, time_budget=time_budget, db=str(db), seed=args.seed, progress=False,
                        compare_torch_compile=False,
                        kernel=KernelTuneSettings(top_k=args.top_k, explore=args.explore, seed=args.seed))


def run_program(prog: Program, args: argparse.Namespace, db: Path, time_budget: float | None) -> dict[str, Any]:
    """Tune one program; never raises (but for Ctrl-C): a failure is the row's error."""
    import autofuse
    t0 = time.monotonic()
    row: dict[str, Any] = {"name": prog.name, "status": "ok", "graphs": 0, "kernels": 0, "failures": 0}
    fn = inputs = res = None
    try:
        fn, inputs = prog.build(args.device)
        res = autofuse.tune(fn, inputs, settings=settings(args, db, time_budget))
        row["graphs"] = len(res.graphs)
        row["kernels"] = sum(g.new_measurements for g in res.graphs)
        row["failures"] = sum(len(g.failures) for g in res.graphs)
        row["interrupted"] = res.interrupted
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - one program's failure never stops the collection
        msg = str(e).strip().splitlines()
        row.update(status="failed", error=f"{type(e).__name__}: {msg[0][:300] if msg else ''}",
                   traceback=traceback.format_exc(limit=8)[-2000:])
    finally:
        del fn, inputs, res
        free_memory()
    row["seconds"] = round(time.monotonic() - t0, 2)
    return row


def free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def export(out: Path) -> dict[str, Any]:
    """DIR/measurements.db -> DIR/measurements.jsonl.gz; returns counts."""
    from tuning_db import TuningDB
    rows = []
    db_path = out / "measurements.db"
    if db_path.exists():
        db = TuningDB.open(db_path)
        try:
            rows = db.measurements()
        finally:
            db.close()
    by_device: dict[str, int] = {}
    timed = 0
    tmp = out / "measurements.jsonl.gz.tmp"
    with gzip.GzipFile(tmp, "wb", mtime=0) as raw:
        for r in rows:
            line = {"kernel_key": r["kernel_key"], "device": r["device"], "features": r["features"], "stats": r["stats"]}
            raw.write((json.dumps(line, sort_keys=True, default=str) + "\n").encode())
            by_device[r["device"]] = by_device.get(r["device"], 0) + 1
            timed += (r["stats"] or {}).get("median_us") is not None
    tmp.replace(out / "measurements.jsonl.gz")
    return {"measurements": len(rows), "timed": timed, "failed": len(rows) - timed, "by_device": by_device}


def versions() -> dict[str, Any]:
    import triton

    import autofuse
    v: dict[str, Any] = {"autofuse": autofuse.__version__, "torch": torch.__version__, "triton": triton.__version__,
                         "python": platform.python_version()}
    if torch.cuda.is_available():
        v["gpu"] = torch.cuda.get_device_name(0)
        v["cuda"] = torch.version.cuda
    return v


def write_record(out: Path, record: dict[str, Any]) -> None:
    tmp = out / "collect.json.tmp"
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True, default=str) + "\n")
    tmp.replace(out / "collect.json")


def load_record(out: Path) -> dict[str, Any]:
    path = out / "collect.json"
    return json.loads(path.read_text()) if path.exists() else {}


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    db = out / "measurements.db"
    record = load_record(out)
    record.setdefault("programs", [])
    record.setdefault("runs", [])
    command = ["python3", "-m", "benchmarks.collect", *(sys.argv[1:] if argv is None else argv)]
    if args.export_only:
        record["counts"] = export(out)
        write_record(out, record)
        print(f"exported {record['counts']['measurements']} measurements to {out / 'measurements.jsonl.gz'}")
        return 0

    start = time.monotonic()
    seen = {p["name"] for p in record["programs"]}
    programs = [p for p in corpus(args.programs, args.seed, args.scale) if not args.min_row or p.reduces_rows(args.min_row)]
    programs += losses(args.losses, args.seed, args.scale)
    todo = [p for p in (suite(args.scale) if args.suite else []) + programs if p.name not in seen]
    run: dict[str, Any] = {"command": command, "versions": versions(), "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
                           "done": 0, "failed": 0, "skipped": len(seen), "stopped": "all programs done"}
    record["runs"].append(run)
    print(f"collect: {len(todo)} programs to tune into {db} ({len(seen)} done before)", flush=True)
    try:
        for i, prog in enumerate(todo):
            left = None if args.budget is None else args.budget - (time.monotonic() - start)
            if left is not None and left < MIN_LEFT_S:
                run["stopped"] = f"budget spent after {i} of {len(todo)} programs"
                break
            row = run_program(prog, args, db, left)
            record["programs"].append(row)
            run["done" if row["status"] == "ok" else "failed"] += 1
            note = row.get("error", f"{row['failures']} failed variants" if row["failures"] else "")
            print(f"[{i + 1}/{len(todo)}] {prog.name}: {row['graphs']} graphs, {row['kernels']} kernels measured, "
                  f"{row['seconds']:.1f} s{'  ' + note if note else ''}", flush=True)
            write_record(out, record)   # a killed run still leaves what it did
            if row.get("interrupted"):
                run["stopped"] = "interrupted"
                break
    except KeyboardInterrupt:
        run["stopped"] = "interrupted"
    run["seconds"] = round(time.monotonic() - start, 1)
    record["counts"] = export(out)
    record["seconds"] = round(sum(r.get("seconds", 0) for r in record["runs"]), 1)
    record["programs_done"] = sum(p["status"] == "ok" for p in record["programs"])
    record["programs_failed"] = sum(p["status"] != "ok" for p in record["programs"])
    write_record(out, record)
    c = record["counts"]
    print(f"collect: {run['done']} programs tuned, {run['failed']} failed, {run['seconds']:.0f} s ({run['stopped']}); "
          f"{c['measurements']} measurements in the DB ({c['timed']} timed) -> {out / 'measurements.jsonl.gz'}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
