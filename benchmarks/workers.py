"""Several `autofuse tune` workers on one tuning DB against one: the wall time of a whole-model tune,
the trials each study holds, and what was measured.

    python3 -m benchmarks.workers --out DIR --model bert [--trials N] [--workers 1,2] [--pg URL]

For each worker count, a fresh tuning DB (a new database on the PostgreSQL server of --pg, else an
SQLite file in DIR) and that many `autofuse.tune(..., resume=True)` processes on the model of
`benchmarks/models.py` (bf16 forward), worker i on GPU i modulo the GPUs visible, all started at
once. The trial budget is each study's, so the workers split it. Written: DIR/results.json and
DIR/results.md (the table), each worker's log in DIR/<workers>w-<i>.log.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python3 -m benchmarks.workers", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--model", default="bert", help="a model of benchmarks/models.py (default bert)")
    p.add_argument("--trials", type=int, default=12, help="trials per graph's study, split by the workers")
    p.add_argument("--workers", default="1,2", help="worker counts to run, in this order (default 1,2)")
    p.add_argument("--pg", default=None, help="PostgreSQL server URL; each run gets a new database on it")
    p.add_argument("--time-budget", type=float, default=None, help="each tune's time budget in seconds")
    p.add_argument("--tiny", action="store_true", help="the model's tiny config (CPU tests)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    p.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)   # internal: run one worker
    p.add_argument("--db", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ---- one worker ---------------------------------------------------------------------------------

def run_worker(opts: argparse.Namespace) -> dict[str, Any]:
    """Tune the model into opts.db as worker opts.worker; what it did, as one JSON-able record."""
    import torch

    import autofuse
    from autofuse.search.settings import TuneSettings
    from autofuse.search.study import worker_id
    from benchmarks.models import Job
    device = opts.device or ("cuda" if torch.cuda.is_available() else "cpu")
    job = Job(opts.model, "forward", opts.tiny, device)
    settings = TuneSettings(db=opts.db, trials=opts.trials, resume=True, seed=opts.worker, progress=False,
                            compare_torch_compile=False, time_budget=opts.time_budget)
    start = time.time()
    res = autofuse.tune(job.model, (), example_kwargs=job.call_inputs, settings=settings)
    end = time.time()
    return {"worker": worker_id(), "index": opts.worker, "tune_start": start, "tune_end": end,
            "errors": [str(e)[:300] for e in res.errors[:3]], "interrupted": res.interrupted,
            "graphs": [{"hash": g.graph_hash, "trials_seen": g.trials, "measured": g.new_measurements,
                        "reused": g.reused_measurements, "search_s": g.search_s, "stored": g.stored_id,
                        "failures": len(g.failures)} for g in res.graphs]}


# ---- the runs -----------------------------------------------------------------------------------

def fresh_db(opts: argparse.Namespace, out: Path, name: str) -> str:
    """A new, empty tuning DB for one run."""
    if not opts.pg:
        path = out / f"{name}.db"
        if path.exists():
            path.unlink()
        return f"sqlite:///{path}"
    import sqlalchemy as sa
    url = sa.engine.make_url(opts.pg)
    db = f"autofuse_{name}_{os.getpid()}"
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as c:
        c.execute(sa.text(f'CREATE DATABASE "{db}"'))
    engine.dispose()
    return url.set(database=db).render_as_string(hide_password=False)


def gpu_count() -> int:
    import torch
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def launch(opts: argparse.Namespace, out: Path, workers: int, db: str) -> tuple[float, list[dict[str, Any]]]:
    """Start the workers at once; the wall seconds until the last one ended, and their records."""
    gpus = gpu_count()
    procs = []
    t0 = time.perf_counter()
    for i in range(workers):
        env = dict(os.environ)
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = str(i % gpus)
        argv = [sys.executable, "-m", "benchmarks.workers", "--out", str(out), "--model", opts.model,
                "--trials", str(opts.trials), "--worker", str(i), "--db", db]
        argv += ["--tiny"] if opts.tiny else []
        argv += ["--device", opts.device] if opts.device else []
        argv += ["--time-budget", str(opts.time_budget)] if opts.time_budget else []
        log = open(out / f"{workers}w-{i}.log", "w")
        procs.append((subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True, env=env), log))
    records = []
    for p, log in procs:
        stdout, _ = p.communicate()
        log.close()
        lines = [line for line in stdout.splitlines() if line.startswith("{")]
        if p.returncode != 0 or not lines:
            raise RuntimeError(f"a worker failed (exit {p.returncode}); see {log.name}")
        records.append(json.loads(lines[-1]))
    return time.perf_counter() - t0, records


def inspect_db(db: str) -> dict[str, Any]:
    """What the run left in the DB: each study's trials by state and by worker, measurements, plans."""
    import optuna

    from tuning_db import TuningDB
    storage = optuna.storages.RDBStorage(db)
    studies = []
    try:
        for s in optuna.get_all_study_summaries(storage):
            trials = optuna.load_study(study_name=s.study_name, storage=storage).get_trials(deepcopy=False)
            states: dict[str, int] = {}
            by_worker: dict[str, int] = {}
            for t in trials:
                states[t.state.name] = states.get(t.state.name, 0) + 1
                if t.state.name == "COMPLETE":
                    w = str(t.user_attrs.get("worker", "?"))
                    by_worker[w] = by_worker.get(w, 0) + 1
            values = [t.value for t in trials if t.state.name == "COMPLETE" and t.value is not None and t.value < 1e30]
            studies.append({"study": s.study_name, "states": states, "complete_by_worker": by_worker,
                            "best_est_us": min(values) if values else None})
    finally:
        storage.remove_session()
        storage.engine.dispose()
    with TuningDB.open(db) as tdb:
        keys = [m["kernel_key"] for m in tdb.measurements()]
        plans = sum(len(tdb.plans(h)) for h in {s["study"].split(":")[1] for s in studies})
    return {"studies": studies, "measurements": len(keys), "distinct_measurements": len(set(keys)), "plans": plans}


def summary(workers: int, wall: float, records: list[dict[str, Any]], db: dict[str, Any]) -> dict[str, Any]:
    tune_s = max(r["tune_end"] for r in records) - min(r["tune_start"] for r in records)
    states: dict[str, int] = {}
    for s in db["studies"]:
        for k, v in s["states"].items():
            states[k] = states.get(k, 0) + v
    return {"workers": workers, "wall_s": wall, "tune_s": tune_s, "graphs": len(db["studies"]),
            "trials": states, "measurements": db["measurements"],
            "variants_per_s": db["measurements"] / tune_s if tune_s > 0 else None,
            "complete_by_worker": [s["complete_by_worker"] for s in db["studies"]],
            "best_est_us": [s["best_est_us"] for s in db["studies"]], "plans": db["plans"],
            "errors": [e for r in records for e in r["errors"]], "worker_records": records, "db": db}


def markdown(results: dict[str, Any]) -> str:
    runs = results["runs"]
    lines = [f"Device: {results['device']}; torch {results['torch']}; model {results['model']} "
             f"(bf16 forward), {results['trials']} trials per graph's study.",
             f"Command: `{results['command']}`.", "",
             "| workers | tune s | wall s | trials complete / failed / running | measured variants | variants/s | "
             "trials per worker | plans stored | best estimate µs |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        t = r["trials"]
        per = "; ".join(", ".join(str(v) for v in sorted(w.values(), reverse=True)) for w in r["complete_by_worker"])
        best = ", ".join(f"{b:.1f}" for b in r["best_est_us"] if b is not None)
        lines.append(f"| {r['workers']} | {r['tune_s']:.1f} | {r['wall_s']:.1f} | {t.get('COMPLETE', 0)} / "
                     f"{t.get('FAIL', 0)} / {t.get('RUNNING', 0)} | {r['measurements']} | "
                     f"{r['variants_per_s']:.2f} | {per} | {r['plans']} | {best} |")
    one = next((r for r in runs if r["workers"] == 1), None)
    for r in runs:
        if one is not None and r is not one:
            lines.append(f"\n{r['workers']} workers: tune time {one['tune_s'] / r['tune_s']:.2f}× faster than one "
                         f"(wall {one['wall_s'] / r['wall_s']:.2f}×).")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse(argv)
    if opts.worker is not None:
        print(json.dumps(run_worker(opts)))
        return 0
    import torch
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    counts = [int(w) for w in opts.workers.split(",")]
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "gpus": gpu_count(), "torch": torch.__version__, "model": opts.model, "trials": opts.trials,
        "command": "python3 -m benchmarks.workers " + " ".join(sys.argv[1:] if argv is None else argv),
        "backend": "postgresql" if opts.pg else "sqlite", "runs": []}
    for w in counts:
        db = fresh_db(opts, out, f"{w}w")
        wall, records = launch(opts, out, w, db)
        results["runs"].append(summary(w, wall, records, inspect_db(db)))
        (out / "results.json").write_text(json.dumps(results, indent=1))
        print(f"{w} worker(s): tune {results['runs'][-1]['tune_s']:.1f} s, wall {wall:.1f} s", flush=True)
    (out / "results.md").write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
