"""Cost models side by side on the held-out graphs of each measurement export (issue 7).

    python -m benchmarks.costmodel_compare EXPORT.jsonl.gz ... --model NAME=PKL ... [--split-seed 0]
        [--test-fraction 0.25] [--out FILE]

The exports are pooled and split by graph exactly as `autofuse retrain` splits its DB
(`split_by_graph`, seed 0, a quarter held out), so a model retrained on these exports never saw the
held-out graphs. Each model is then scored (`costmodel.evaluate.metrics`) on the held-out rows of
each export alone and of all of them. Why: retrain reports one number over every held-out graph, and
exports measured on older codegen (session 14 made loop bounds literal) can hide how a model ranks
the kernels the search generates now.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from benchmarks.costmodel_noise import load
from costmodel.evaluate import evaluate, split_by_graph
from costmodel.model import CostModel, usable

COLS = ("pairwise", "pairwise_sig", "peak1", "peak1_tol", "peak5", "regret", "mae_log")
HEADS = ("pairwise", "pw >2%", "peak@1", "peak@1 (2%)", "peak@5", "regret", "log MAE")


def compare(exports: Mapping[str, Sequence[Mapping[str, Any]]], models: Mapping[str, Any], split_seed: int = 0,
            test_fraction: float = 0.25) -> list[dict[str, Any]]:
    """One row per (held-out part, model): the part's name, graphs, groups and the model's metrics."""
    tagged = [(name, r) for name, rows in exports.items() for r in usable(rows)]
    _, held = split_by_graph([r for _, r in tagged], test_fraction, split_seed)
    held_ids = {id(r) for r in held}
    parts = {name: [r for n, r in tagged if n == name and id(r) in held_ids] for name in exports}
    parts["all"] = held
    out = []
    for part, rows in parts.items():
        if not rows:
            continue
        for label, model in models.items():
            m = evaluate(model, rows)
            out.append({"held_out": part, "graphs": len({str(r["features"].get("graph")) for r in rows}),
                        "groups": m.groups, "model": label, **m.to_json()})
    return out


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    lines = ["| held out | graphs | groups | model | " + " | ".join(HEADS) + " |",
             "|---|---|---|---|" + "---|" * len(HEADS)]
    for r in rows:
        vals = [f"{r[c]:.3f}" if isinstance(r.get(c), float) else "—" for c in COLS]
        lines.append(f"| {r['held_out']} | {r['graphs']} | {r['groups']} | {r['model']} | " + " | ".join(vals) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.costmodel_compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("exports", nargs="+")
    ap.add_argument("--model", action="append", required=True, metavar="NAME=PKL",
                    help="a pickled cost model (CostModel.to_bytes, as shipped) under a name; repeatable")
    ap.add_argument("--split-seed", type=int, default=0)
    ap.add_argument("--test-fraction", type=float, default=0.25)
    ap.add_argument("--out", default=None, help="also write the rows as JSON here")
    a = ap.parse_args(argv)
    models = {}
    for spec in a.model:
        name, sep, path = spec.partition("=")
        if not sep:
            ap.error(f"--model wants NAME=PKL, got {spec!r}")
        models[name] = CostModel.from_bytes(Path(path).read_bytes())
    rows = compare({Path(p).name: load(p) for p in a.exports}, models, a.split_seed, a.test_fraction)
    print(table(rows))
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
