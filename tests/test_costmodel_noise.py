"""benchmarks/costmodel_noise.py on tiny synthetic groups: without noise the perfect model scores 1.0;
under huge noise its peak@1 falls to about 1/group size and its pairwise accuracy to about 0.5; the
vectorized group metrics agree with costmodel.evaluate.metrics; repeats and ties are counted."""
from __future__ import annotations

import numpy as np

from benchmarks import costmodel_noise as cn


def synthetic_rows(groups: int = 40, size: int = 8, graphs: int = 8, step: float = 0.05, spread: float = 0.0):
    """`groups` kernels of `size` configs, times 10 µs * (1 + step)^k in a shuffled order."""
    rng = np.random.default_rng(1)
    rows = []
    for g in range(groups):
        for k in rng.permutation(size):
            t = 10.0 * (1 + step) ** k
            rows.append({"kernel_key": f"k{g}-{k}", "device": "cuda:fake",
                         "features": {"group": f"g{g}", "graph": f"graph{g % graphs}", "config": {"XBLOCK": int(k)}},
                         "stats": {"median_us": t, "p10_us": t * (1 - spread), "p90_us": t * (1 + spread), "reps": 50,
                                   "error": None}})
    return rows


def test_zero_noise_scores_one():
    res = cn.run(synthetic_rows(), sims=5, rel=(0.0,))
    for label in ("within-run", "rel 0%"):       # p10 == p90: the within-run sigma is 0 too
        for name in ("all", "heldout"):
            c = res["ceiling"][label][name]
            assert c["pairwise"]["mean"] == c["pairwise"]["p5"] == 1.0
            assert c["peak1"]["mean"] == c["peak5"]["mean"] == c["peak1_tol"]["mean"] == 1.0
            assert c["regret"]["mean"] == 0.0
    assert res["groups"]["all"] == {"groups": 40, "pairs": 40 * 28}
    assert 0 < res["groups"]["heldout"]["groups"] < 40
    assert res["repeats"]["measured_more_than_once"] == 0
    assert res["ties"]["all"]["second_within_0.02"] == 0.0 and res["ties"]["all"]["configs_within_0.02"] == 1.0


def test_huge_noise_peak1_falls_to_chance():
    size = 8
    res = cn.run(synthetic_rows(groups=200, size=size), sims=50, rel=(5.0, 0.02))
    c = res["ceiling"]["rel 500%"]["all"]
    assert abs(c["peak1"]["mean"] - 1 / size) < 0.03
    assert abs(c["pairwise"]["mean"] - 0.5) < 0.03
    assert abs(c["peak5"]["mean"] - 5 / size) < 0.05
    mild = res["ceiling"]["rel 2%"]["all"]     # 5% steps: a 2% noise flips neighbours now and then
    assert c["peak1"]["mean"] < mild["peak1"]["mean"] < 1.0 and mild["pairwise"]["mean"] > 0.9


def test_group_metrics_match_evaluate_metrics():
    rng = np.random.default_rng(3)
    sizes = [1, 2, 3, 5, 7, 9, 9, 4]
    groups = [f"g{i}" for i, s in enumerate(sizes) for _ in range(s)]
    order = rng.permutation(len(groups))                      # groups interleaved, as rows of a DB
    groups = [groups[i] for i in order]
    g = cn.Groups.of(groups)
    for trial in range(20):
        t = np.round(10 * np.exp(rng.normal(0, 0.05, len(groups))), 1)   # rounding makes exact and near ties
        p = np.round(t * np.exp(rng.normal(0, 0.03, len(groups))), 0)    # and predicted ties
        cn.check(t, p, groups, g)                                        # raises on any disagreement


def test_repeats_and_ties():
    rows = synthetic_rows(groups=2, size=3, step=0.008)       # 10, 10.08, 10.16 µs: all within 2%
    dup = dict(rows[0], stats=dict(rows[0]["stats"], median_us=rows[0]["stats"]["median_us"] * 1.02))
    rep = cn.repeats(rows + [dup])
    assert rep["measured_more_than_once"] == 1 and abs(rep["abs_log_diff_median"] - np.log(1.02)) < 1e-12
    g = cn.Groups.of([r["features"]["group"] for r in rows])
    ties = cn.tie_structure(np.array([r["stats"]["median_us"] for r in rows]), g)
    assert ties["second_within_0.005"] == 0.0 and ties["second_within_0.01"] == 1.0
    assert ties["configs_within_0.01"] == 2.0 and ties["configs_within_0.02"] == 3.0


def test_repeats_give_the_run_to_run_sigma():
    from benchmarks.costmodel_noise import repeats
    rows = [{"kernel_key": k, "device": "d", "stats": {"median_us": us}}
            for k, us in [("a", 100.0), ("a", 102.0), ("b", 50.0), ("b", 49.0), ("c", 7.0)]]
    rp = repeats(rows)
    assert rp["keys"] == 3 and rp["measured_more_than_once"] == 2
    assert 0.01 < rp["sigma_rel_from_repeats"] < 0.02
