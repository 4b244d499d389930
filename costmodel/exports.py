"""Measurement exports into a tuning DB for `autofuse retrain --from-export`, and shipping the result.

An export is `benchmarks.collect`'s measurements.jsonl.gz, one of `costmodel/data/*.jsonl.gz` or
an `autofuse db export` file: one JSON object a line with kernel_key, device, features and stats
(a DB export's other rows, its header, graphs and plans, are skipped). They go into a fresh DB, so
the split into training and held-out graphs is over exactly these exports; the model in use (the
shipped one, when the DB has none) is scored on the same held-out graphs by `train.retrain`. With
--ship, a model retrain stored replaces the shipped one and its .json records the command.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, Sequence

from .predict import pretrained_path


def import_exports(db: Any, exports: Sequence[Path]) -> int:
    """Add every export's measurements to db; the number of new rows. ValueError names a bad line."""
    n = 0
    for path in exports:
        opener = gzip.open if str(path).endswith(".gz") else open
        try:
            with opener(path, "rt", encoding="utf-8") as f:
                for i, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        r = json.loads(line)
                        if r.get("kind", "measurement") != "measurement":
                            continue   # `autofuse db export` also writes its header, graphs and plans
                        n += bool(db.put_measurement(r["kernel_key"], r["device"], r["features"], r["stats"]))
                    except (json.JSONDecodeError, KeyError, TypeError) as e:
                        raise ValueError(f"{path}:{i}: not a measurement ({type(e).__name__}: {e})") from None
        except (OSError, EOFError) as e:
            raise ValueError(f"cannot read {path}: {e}") from None
    return n


def ship(db: Any, device: str, command: str) -> str:
    """Write the DB's newest model for device over the shipped one (model file and .json); its version."""
    row = db.latest_cost_model(device)
    if row is None:
        raise ValueError(f"no cost model for {device} in the DB to ship")
    path = pretrained_path(device)
    path.write_bytes(bytes(row["blob"]))
    meta = {"version": row["version"], "metrics": row["metrics"], "trained_on": row["trained_on"], "command": command}
    path.with_suffix(".json").write_text(json.dumps(meta, indent=1, sort_keys=False, default=str))
    return str(row["version"])
