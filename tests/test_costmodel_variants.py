"""benchmarks/costmodel_variants.py: exports merged by geometric mean, the pair selections and weights
of the variants, and one small end-to-end run on a slice of the shipped H200 data."""
from __future__ import annotations

import math

import numpy as np

from benchmarks import costmodel_variants as cv
from benchmarks.costmodel_noise import DEFAULT_DATA, load, run_to_run


def _row(key: str, us: float | None, group: str = "g") -> dict:
    return {"kernel_key": key, "device": "d", "features": {"group": group, "graph": "x"},
            "stats": {"median_us": us, "error": None if us else "failed"}}


def test_merge_exports_geometric_mean_and_failed_rows():
    merged = cv.merge_exports([[_row("a", 10.0), _row("b", 5.0)], [_row("a", 40.0), _row("c", None)]])
    by = {r["kernel_key"]: r["stats"]["median_us"] for r in merged}
    assert set(by) == {"a", "b"} and math.isclose(by["a"], 20.0) and math.isclose(by["b"], 5.0)


def test_variant_pairs_and_weights():
    # one group of 4 configs at 10 µs (sigma 1%) and one of 3 at 4 µs (sigma 3%)
    log_us = np.log([10.0, 10.05, 10.3, 11.0, 4.0, 4.1, 5.0])
    sigma = np.array([0.01] * 4 + [0.03] * 3)
    groups = ["g1"] * 4 + ["g2"] * 3
    gmed = np.array([10.0] * 4 + [4.0] * 3)
    a, b, y, w = cv.baseline(log_us, sigma, gmed, groups)
    assert w is None and len(a) == len(b) == len(y) and np.all(np.abs(log_us[a] - log_us[b]) > math.log1p(0.01))
    a2, b2, _, w2 = cv.noise_prob(log_us, sigma, gmed, groups)
    assert np.array_equal(a, a2) and np.all((w2 > 0) & (w2 < 1))
    z = cv._z(log_us, sigma, a2, b2)
    assert np.all(np.diff(w2[np.argsort(z)]) >= 0)                     # more separated, more weight
    a6, b6, y6, w6 = cv.soft_labels(log_us, sigma, gmed, groups)
    n = len(a)
    assert np.array_equal(a6[:n], a6[n:]) and np.array_equal(y6[:n], 1 - y6[n:])
    assert np.allclose(w6[:n] + w6[n:], 1.0) and np.all(w6[:n] > 0.5)    # the measured order is the likelier
    a3, b3, _, _ = cv.noise_hard(2.0)(log_us, sigma, gmed, groups)
    assert len(a3) < len(a) and np.all(cv._z(log_us, sigma, a3, b3) > 2)
    a4, _, _, w4 = cv.tiny_weight(0.0)(log_us, sigma, gmed, groups)
    assert w4 is None and np.all(gmed[a4] >= cv.TINY_US)
    _, _, _, w5 = cv.tiny_weight(0.3)(log_us, sigma, gmed, groups)
    assert set(np.round(w5, 6)) == {0.3, 1.0}


def test_small_run_end_to_end():
    rows = load(DEFAULT_DATA)
    graphs = sorted({r["features"]["graph"] for r in rows})[:6]
    rows = [r for r in rows if r["features"]["graph"] in graphs]
    extra = [dict(r, kernel_key="x" + str(r["kernel_key"]), features=dict(r["features"], graph="new"))
             for r in rows[:40]]
    rr = run_to_run([rows, [dict(r, stats=dict(r["stats"], median_us=r["stats"]["median_us"] * 1.01))
                            for r in rows if r["stats"].get("median_us")]], boot=0)
    res = cv.run(rows, extra, rr, seeds=[0], only=["baseline", "2Phi(z)-1, z", "new exports (training"])
    # extra rows of a held-out graph never train the model
    from costmodel.evaluate import split_by_graph
    _, test = split_by_graph([r for r in rows if r["stats"].get("median_us")], 0.25, 0)
    held = {r["features"]["graph"] for r in test}
    same_graph = [dict(r, kernel_key="y" + str(r["kernel_key"])) for r in rows]
    kept = cv.extra_for(same_graph, test)
    assert 0 < len(kept) < len(same_graph) and all(same_graph[i]["features"]["graph"] not in held for i in kept)
    assert len(cv.extra_for(same_graph, test, leaky=True)) == len(same_graph)
    assert set(res["variants"]) == {"baseline (shipped recipe)", "pair weight 2Phi(z)-1, z = gap / measured pair sigma",
                                    "+ two new exports (training only)"}
    for by_seed in res["variants"].values():
        m = by_seed[0]
        assert 0.0 <= m["pairwise"] <= 1.0 and 0.0 <= m["peak5"] <= 1.0
    assert "| baseline (shipped recipe) |" in cv.table(res)
