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


def two_runs(groups: int = 900, size: int = 4, sigmas=(0.03, 0.01, 0.002), shift: float = 0.1, seed: int = 5):
    """Two runs of the same kernels: run b = run a x a per-group common factor exp(U(-shift, shift)) x an
    independent factor exp(sigma_bin * sqrt(2) * z), so that sigma_bin is each run's own sigma. Kernel
    times sit well inside the bins < 8, 8-30, >= 30 µs, and each group mixes kernels of all bins."""
    rng = np.random.default_rng(seed)
    levels = [(2.0, 4.0, 6.0), (10.0, 15.0, 20.0), (40.0, 80.0, 160.0)]
    a, b = [], []
    for g in range(groups):
        s = rng.uniform(-shift, shift)
        for k in range(size):
            b_ix = int(rng.integers(0, 3))
            t = float(rng.choice(levels[b_ix]))
            noise = sigmas[b_ix] * np.sqrt(2) * rng.standard_normal()
            base = {"kernel_key": f"k{g}-{k}", "device": "cuda:fake",
                    "features": {"group": f"g{g}", "graph": f"graph{g % 8}", "config": {"XBLOCK": k}}}
            a.append({**base, "stats": {"median_us": t, "error": None}})
            b.append({**base, "stats": {"median_us": t * np.exp(s + noise), "error": None}})
    return a, b


def test_run_to_run_recovers_sigma_and_ignores_group_shift():
    sigmas = (0.03, 0.01, 0.002)
    a, b = two_runs(sigmas=sigmas)
    rr = cn.run_to_run([a, b], boot=20)
    assert rr["pairs"] == len(a) and rr["groups_multi"] == 900
    # raw: dominated by the shift (sd 0.1/sqrt(3) of the difference, / sqrt(2) per run, ~4%)
    assert rr["sigma_raw"] > 0.035
    for got, want in zip(rr["bins"], sigmas):
        assert abs(got["sigma_centred"] / want - 1) < 0.1, (got, want)
        assert got["sigma_raw"] > 0.03                    # the shift is in every raw bin
        lo, hi = got["sigma_centred_ci90"]
        assert lo < got["sigma_centred"] < hi
    pooled = np.sqrt(np.mean(np.square([sigmas[int(np.searchsorted((8, 30), r['stats']['median_us'], 'right'))]
                                        for r in a])))
    assert abs(rr["sigma_centred"] / pooled - 1) < 0.1


def test_centred_sigma_has_the_degrees_of_freedom_correction():
    a, b = two_runs(groups=3000, size=2, sigmas=(0.01, 0.01, 0.01))   # pairs: centring halves the variance
    rr = cn.run_to_run([a, b], boot=0)
    assert abs(rr["sigma_centred"] / 0.01 - 1) < 0.05
    assert abs(rr["sigma_centred_uncorrected"] / (0.01 / np.sqrt(2)) - 1) < 0.05
    assert all(abs(x["sigma_centred"] / 0.01 - 1) < 0.08 for x in rr["bins"])


def test_run_to_run_without_shared_kernels_and_singletons():
    a, b = two_runs(groups=3)
    assert cn.run_to_run([a, [dict(r, kernel_key="other" + r["kernel_key"]) for r in b]])["pairs"] == 0
    lone = cn.run_to_run([a[:1], b[:1]], boot=5)        # one kernel in its group: no centred information
    assert lone["pairs"] == 1 and lone["groups_multi"] == 0 and lone["sigma_centred"] is None


def test_measured_repeats_noise_model():
    sigmas = (0.03, 0.01, 0.002)
    a, b = two_runs(groups=200, sigmas=sigmas)
    res = cn.run(a, sims=20, rel=(0.01,), runs=[b])
    assert list(res["ceiling"]) == ["within-run", "measured repeats", "measured repeats, bins' upper 90% bound", "rel 1%"]
    rr = res["run_to_run"]
    assert sum(rr["rows_by_bin"]["all"]) == len(a)
    s = cn.sigma_by_time(np.array([3.0, 12.0, 100.0]), rr)
    assert np.allclose(s, [x["sigma_centred"] for x in rr["bins"]])
    assert res["repeats"]["measured_more_than_once"] == len(a)
    text = cn.report(res)
    assert "group-centred" in text and "| measured repeats |" in text
    assert "measured repeats" not in cn.run(a, sims=5, rel=(0.01,))["ceiling"]     # without runs: as before
