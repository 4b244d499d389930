"""Retrain the shipped cost model from measurement exports, in one command: the exports
(`benchmarks.collect`'s measurements.jsonl.gz, the shipped `costmodel/data/*.jsonl.gz`) go into a
fresh tuning DB, the shipped model is stored there as the current one (so that `autofuse retrain`
scores both on the same held-out graphs and keeps the new one only if it is not worse), then
`autofuse retrain` runs on it. With --ship, a model it stored replaces the shipped one
(`costmodel/pretrained/<device>.pkl` and its .json: version, metrics, training data, command).

    python -m benchmarks.retrain_exports EXPORT.jsonl.gz ... [--db FILE] [--estimator gbr]
        [--no-compile] [--seed 0] [--force] [--ship]
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from costmodel.model import CostModel
from costmodel.predict import pretrained_path

DEVICE = "cuda:NVIDIA H200:sm90"


def build_db(db_path: Path, exports: Sequence[Path], device: str = DEVICE) -> int:
    """Import every export's measurements and the shipped model; the number of rows imported."""
    from tuning_db import TuningDB
    n = 0
    with TuningDB.open(str(db_path)) as db:
        for path in exports:
            with gzip.open(path, "rt", encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        r = json.loads(line)
                        n += bool(db.put_measurement(r["kernel_key"], r["device"], r["features"], r["stats"]))
        pkl = pretrained_path(DEVICE)
        meta = json.loads(pkl.with_suffix(".json").read_text())
        model = CostModel.from_bytes(pkl.read_bytes())
        db.put_cost_model(device, model.version, model.to_bytes(), meta.get("metrics", {}), meta.get("trained_on", {}))
    return n


def ship(db_path: Path, command: str, device: str = DEVICE) -> str:
    """Copy the DB's latest cost model over the shipped one; its version."""
    from tuning_db import TuningDB
    with TuningDB.open(str(db_path)) as db:
        row = db.latest_cost_model(device)
    pkl = pretrained_path(DEVICE)
    pkl.write_bytes(bytes(row["blob"]))
    meta = {"version": row["version"], "metrics": row["metrics"], "trained_on": row["trained_on"], "command": command}
    pkl.with_suffix(".json").write_text(json.dumps(meta, indent=1, sort_keys=False, default=str))
    return str(row["version"])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.retrain_exports", description=__doc__.split("\n\n")[0])
    p.add_argument("exports", nargs="+", type=Path)
    p.add_argument("--db", type=Path, default=None, help="the DB to build (default: a temporary file)")
    p.add_argument("--estimator", default="gbr")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ship", action="store_true", help="replace the shipped model with the one retrain stored")
    p.add_argument("--force", action="store_true", help="store the new model even if it scores worse (retrain --force)")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="autofuse-retrain-") as tmp:
        db = a.db or Path(tmp) / "retrain.db"
        if db.exists():
            print(f"{db} exists: give a new path, the exports are imported into a fresh DB", file=sys.stderr)
            return 2
        n = build_db(db, a.exports)
        print(f"imported {n} measurements from {len(a.exports)} export(s) into {db}", flush=True)
        from costmodel.cli import main as retrain
        argv2 = ["retrain", "--db", str(db), "--estimator", a.estimator, "--seed", str(a.seed)]
        argv2 += ["--no-compile"] if a.no_compile else []
        argv2 += ["--force"] if a.force else []
        rc = retrain(argv2)
        if a.ship and rc == 0:
            from tuning_db import TuningDB
            with TuningDB.open(str(db)) as d:
                stored = d.latest_cost_model(DEVICE)
            shipped = json.loads(pretrained_path(DEVICE).with_suffix(".json").read_text())["version"]
            if stored["version"] == shipped:
                print("nothing to ship: retrain stored no new model")
                return 1
            cmd = "python -m benchmarks.retrain_exports " + " ".join(map(str, a.exports)) + \
                f" --estimator {a.estimator} --seed {a.seed}" + (" --no-compile" if a.no_compile else "") + " --ship"
            print(f"shipped {ship(db, cmd)} to {pretrained_path(DEVICE)}")
        return rc


if __name__ == "__main__":
    raise SystemExit(main())
