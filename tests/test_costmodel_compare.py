"""benchmarks/costmodel_compare.py: models scored per export on the held-out graphs of one pooled split."""
from __future__ import annotations

import math

from benchmarks import costmodel_compare as cc
from benchmarks.costmodel_noise import DEFAULT_DATA, load
from costmodel.evaluate import split_by_graph
from costmodel.model import fit


class Reversed:
    """Predicts each kernel's measured time upside down: every ordered pair wrong."""

    def predict_us(self, records):
        return [1e6 / r["_us"] for r in records]


def test_compare_splits_the_pool_and_scores_each_export():
    rows = load(DEFAULT_DATA)
    graphs = sorted({r["features"]["graph"] for r in rows})[:8]
    rows = [dict(r, features=dict(r["features"], _us=(r["stats"] or {}).get("median_us")))
            for r in rows if r["features"]["graph"] in graphs]
    a = [r for r in rows if r["features"]["graph"] in graphs[:4]]
    b = [r for r in rows if r["features"]["graph"] in graphs[4:]]
    model = fit([r for r in rows if r["stats"].get("median_us")], estimator="hgb", compile=False)
    out = cc.compare({"a": a, "b": b}, {"fit": model, "reversed": Reversed()})
    _, held = split_by_graph([r for r in rows if r["stats"].get("median_us")], 0.25, 0)
    held_graphs = {r["features"]["graph"] for r in held}
    parts = {r["held_out"] for r in out}
    assert "all" in parts and parts <= {"a", "b", "all"}
    for r in out:
        if r["held_out"] == "all":
            assert r["graphs"] == len(held_graphs)
        if r["model"] == "reversed" and r["pairs"]:
            assert r["pairwise"] == 0.0 and r["peak1"] < 1.0
    assert sum(r["graphs"] for r in out if r["held_out"] != "all" and r["model"] == "fit") == len(held_graphs)
    text = cc.table(out)
    assert text.count("\n") == len(out) + 1 and "reversed" in text
    assert all(math.isfinite(r["pairwise"]) for r in out if r["model"] == "fit" and r["pairs"])
