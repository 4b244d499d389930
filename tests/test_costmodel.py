"""Cost model (CPU): features of known kernels, metrics, training and retrain on the shipped synthetic
dataset, predictors and their fallbacks.

tests/data/costmodel_small.jsonl.gz is written by `python -m costmodel.synth --out ...` (real kernel
sources, a synthetic clock); `test_dataset_is_the_generators_output` checks it still matches.
"""
from __future__ import annotations

import argparse
import math
import pickle
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from costmodel import cli
from costmodel.compiled import compiled_stats, ptxas_candidates
from costmodel.evaluate import Metrics, metrics, predict_plan_us, split_by_graph
from costmodel.features import FEATURE_NAMES, feature_matrix, kernel_features
from costmodel.model import REGRESSOR_NAMES, CostModel, fit, model_version, usable
from costmodel.rank import order_within_groups, training_pairs
from costmodel.occupancy import blocks_per_sm
from costmodel.predict import ByteCountPredictor, LazyPredictor, LearnedPredictor, Predictor, load_predictor
from costmodel.select import choose, compare_estimators, format_comparison
from costmodel.synth import H200, read_jsonl_gz, synthetic_time_us
from costmodel.train import RetrainOptions, retrain
from tuning_db import TuningDB

DATA = Path(__file__).parent / "data" / "costmodel_small.jsonl.gz"
FAST = RetrainOptions(estimator="et", compile=False)  # extra trees fit in a fraction of a second


# --- real kernels ------------------------------------------------------------------------------

def _record(fn, args, config=None) -> dict:
    """The feature record of the first kernel autofuse generates for fn(*args) on the CPU."""
    from autofuse import CompileOptions
    from autofuse.capture.trace import trace_aten
    from autofuse.compiler import compile_graph
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = [k for k in compile_graph(trace_aten(fn, args), args, CompileOptions(use_db=False, strict=True)).kernels
             if k.kind != "fallback"][0]
    src = k.anonymous_source()
    n_in = src.split("def KERNEL(", 1)[1].split(")")[0]
    names = [p.split(":")[0].strip() for p in n_in.split(",") if "constexpr" not in p]
    return {"schema": 1, "graph": "g", "group": "k", "kind": k.kind, "numel": k.numel, "rnumel": k.rnumel,
            "config": config or k.config.to_json(), "bytes_read": k.bytes_read, "bytes_written": k.bytes_written,
            "signature": {p: ("*fp32" if "ptr" in p else "i32") for p in names}, "kernel_fn": "KERNEL",
            "source": src, "device": H200}


@pytest.fixture(scope="module")
def add_record() -> dict:
    a = torch.randn(1024, 256)
    return _record(lambda x, y: x + y, [a, a.clone()],
                   {"XBLOCK": 256, "RBLOCK": 1, "num_warps": 4, "num_stages": 1, "persistent": True})


@pytest.fixture(scope="module")
def softmax_record() -> dict:
    return _record(lambda x: torch.softmax(x, -1), [torch.randn(512, 1024)],
                   {"XBLOCK": 4, "RBLOCK": 1024, "num_warps": 4, "num_stages": 1, "persistent": True})


def test_op_mix_of_pointwise_add(add_record):
    f = kernel_features(add_record, compile=False)
    assert (f["loads"], f["stores"], f["transcendental"], f["reductions"]) == (2, 1, 0, 0)
    assert f["is_reduction"] == 0 and f["grid"] == math.ceil(1024 * 256 / 256)
    assert f["bytes_read"] == 2 * 1024 * 256 * 4 and f["elems_per_thread"] == 256 / 128
    assert math.isnan(f["registers"])  # not compiled
    assert list(f) == list(FEATURE_NAMES)


def test_a_gathered_buffer_counts_one_sector_per_element_not_the_whole_buffer():
    """Cross-entropy's target gather reads 64 of 64x3000 logits: one 32-byte sector each, not the
    768 kB buffer (counted whole, the model took such kernels for hundreds of µs)."""
    from autofuse.compiler import SECTOR_BYTES
    logits, target = torch.randn(64, 3000), torch.randint(0, 3000, (64,))
    gathered = _record(lambda l, t: l.gather(1, t[:, None]).sum(), [logits, target])
    assert gathered["bytes_read"] == 64 * SECTOR_BYTES + 64 * 8          # the gathers + the int64 targets
    both = _record(lambda l, t: l.gather(1, t[:, None]) * l.sum(1, keepdim=True), [logits, target])
    assert both["bytes_read"] >= logits.numel() * 4                      # streamed as well: the whole buffer
    small = torch.randn(4, 3)                                            # fewer bytes than the sectors
    capped = _record(lambda l, t: l.gather(1, t[:, None]).sum(), [small, torch.tensor([0, 2, 1, 0])])
    assert capped["bytes_read"] == small.numel() * 4 + 4 * 8


def test_op_mix_of_softmax(softmax_record):
    f = kernel_features(softmax_record, compile=False)
    assert f["transcendental"] >= 1 and f["division"] >= 1  # exp, and the normalizing division
    assert f["red_sum"] >= 1 and f["red_max"] >= 1 and f["is_reduction"] == 1 and f["persistent"] == 1
    assert f["loads"] == 1 and f["stores"] == 1


ONLINE_LSE = """
@triton.jit
def KERNEL(in_ptr0, out_ptr0, xnumel, rnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK, 1], True, tl.int1)
    acc_buf0 = tl.full([XBLOCK, RBLOCK // 8], float("-inf"), tl.float32)
    acc_buf1 = tl.full([XBLOCK, RBLOCK // 8], 0.0, tl.float32)
    for roffset in range(0, 32000, RBLOCK):
        rindex = roffset + tl.arange(0, RBLOCK)[None, :]
        rmask = rindex < rnumel
        xrmask = xmask & rmask
        tmp0 = tl.load(in_ptr0 + ((rindex + (32000 * xindex))), xrmask, other=0).to(tl.float32)
        tmp1 = tl.where(xrmask, tl.broadcast_to(tmp0, [XBLOCK, RBLOCK]), float("-inf"))
        tmp2 = tl.reshape(tmp1, [XBLOCK, RBLOCK // 8, 8])
        tmp3 = tl.maximum(acc_buf0, tl.reduce(tmp2, 2, _max_nan), propagate_nan=tl.PropagateNan.ALL)
        tmp6 = _exp2_ftz(_log2e_mul(acc_buf0) - _log2e_mul(tmp3))
        tmp7 = tl.reduce(_exp2_ftz(tl.fma(tmp2, 1.4426950408889634, -tmp3[:, :, None])), 2, _fast_sum)
        acc_buf1 = (acc_buf1 * tmp6 + tmp7)
        acc_buf0 = tmp3
    tmp8 = tl.reduce(acc_buf0, 1, _fast_max)[:, None]
    tmp13 = acc_buf1 * tl.exp2(_log2e_mul(acc_buf0) - tmp8)
    tmp14 = tl.reduce(tmp13, 1, _fast_sum)[:, None]
    tmp15 = tl.log(tmp14) + tmp8
    tl.store(out_ptr0 + (xindex), tmp15, xmask)
"""


def test_ops_count_by_density_lanes_and_rows():
    """Online logsumexp (the codegen's form): the fma and exp2 on loaded elements count 1 per element,
    the running max/sum updates on the 8-lane accumulators 1/8 each, the epilogue after the row reduce
    once per row. Counted once per element each (schema < 8), the lane updates and epilogue made a
    32000-wide cross-entropy kernel look compute-bound: 4-5x its measured time."""
    from costmodel.source_ops import count_ops
    ops = count_ops(ONLINE_LSE, "KERNEL")
    dense = ops.per_element()
    # exp2 of each element; of each lane twice (the loop's rescale, the epilogue's on the accumulators)
    assert dense["transcendental"] == pytest.approx(1 + 1 / 8 + 1 / 8)
    assert dense["row_transcendental"] == 1                          # the log after the row reduce
    assert dense["cast"] == 1 and dense["select"] == 1 and dense["compare"] == 1
    assert ops.as_dict()["transcendental"] == 4                      # every exp/log, counted once
    rec = {"kind": "reduction", "numel": 8192, "rnumel": 32000, "bytes_read": 8192 * 32000 * 2,
           "bytes_written": 8192 * 4, "config": {"XBLOCK": 1, "RBLOCK": 2048, "num_warps": 8, "online": True,
                                                 "persistent": False}, "source": ONLINE_LSE, "kernel_fn": "KERNEL"}
    f = kernel_features(rec, compile=False)
    assert f["op_intensity"] == pytest.approx(
        (f["elem_ops"] * 8192 * 32000 + f["row_ops"] * 8192) / (8192 * 32000 * 2 + 8192 * 4))
    assert f["op_intensity"] < 10


def test_access_patterns_contiguous_strided_irregular():
    """A reduction over a transposed input reads with a stride along the row; measured 10x slower than
    its bytes on the H200 (a 2112 x 32000 kernel), it needs telling apart from a contiguous one."""
    x = torch.randn(300, 40)
    rows = kernel_features(_record(lambda t: t.sum(1), [x]), compile=False)
    cols = kernel_features(_record(lambda t: t.sum(0), [x]), compile=False)
    assert (rows["contig_accesses"], rows["strided_accesses"]) == (1, 0)
    assert (cols["contig_accesses"], cols["strided_accesses"], cols["max_stride"]) == (0, 1, 40)
    logits, target = torch.randn(64, 3000), torch.randint(0, 3000, (64,))
    gathered = kernel_features(_record(lambda l, t: l.gather(1, t[:, None]).sum(), [logits, target]), compile=False)
    assert gathered["irregular_accesses"] >= 1
    bcast = kernel_features(_record(lambda a, b: a * b, [torch.randn(64, 48), torch.randn(64, 1)]), compile=False)
    assert (bcast["contig_accesses"], bcast["strided_accesses"], bcast["irregular_accesses"]) == (2, 0, 0)  # b[i // 48]
    permuted = kernel_features(_record(lambda a: a.t().contiguous() * 2, [torch.randn(64, 48)]), compile=False)
    assert (permuted["contig_accesses"], permuted["strided_accesses"], permuted["max_stride"]) == (1, 1, 48)


def test_prelude_is_not_counted(add_record):
    assert "tl.exp(" in add_record["source"]  # in the interpreter prelude's helpers, not in the kernel
    assert kernel_features(add_record, compile=False)["transcendental"] == 0


@pytest.mark.skipif(not ptxas_candidates(), reason="no ptxas (Triton's NVIDIA backend) on this machine")
def test_registers_from_sm90_compile(add_record, softmax_record, tmp_path):
    add = kernel_features(add_record, cache=tmp_path)
    assert add["registers"] > 0 and add["spill_store_bytes"] == 0 and add["blocks_per_sm"] > 0
    assert add["waves_per_sm"] == pytest.approx(add["grid"] / (132 * add["blocks_per_sm"]))
    soft = kernel_features(softmax_record, cache=tmp_path)
    assert soft["registers"] > add["registers"] and soft["shared_bytes"] >= 0
    assert len(list(tmp_path.rglob("*.json"))) == 2  # cached: the second call compiles nothing
    assert kernel_features(add_record, cache=tmp_path)["registers"] == add["registers"]


@pytest.mark.skipif(not ptxas_candidates(), reason="no ptxas (Triton's NVIDIA backend) on this machine")
def test_compiles_in_a_subprocess_when_triton_is_interpreted(add_record, tmp_path, monkeypatch):
    import costmodel.compiled as compiled
    monkeypatch.setattr(compiled, "_interpreter_imported", lambda triton: True)
    assert compiled_stats(add_record, tmp_path).registers > 0


def test_compile_failures_are_nan_not_errors(add_record, tmp_path):
    too_big = dict(add_record, config=dict(add_record["config"], XBLOCK=1 << 22))
    broken = dict(add_record, source=add_record["source"].replace("tmp0 + tmp1", "tmp0 +* tmp1"))
    for rec in (too_big, broken, {"source": "not python (", "kernel_fn": "KERNEL"}):
        s = compiled_stats(rec, tmp_path)
        assert not s.ok and math.isnan(s.registers)
        f = kernel_features(rec, cache=tmp_path)
        assert math.isnan(f["registers"]) and math.isnan(f["waves_per_sm"])
    assert math.isnan(kernel_features({}, compile=False)["loads"])  # an empty record still gives a row


def test_num_stages_twins_are_one_candidate(add_record, softmax_record):
    """num_stages never changed a kernel's time beyond the noise (loop-free kernels compile to the
    same code at every value; looped ones, 1452 measured pairs, features.py schema 7): features read
    1, and a kernel's measurements at several values merge into one (geometric mean)."""
    from costmodel.model import merge_twins

    def row(rec, stages, us, **cfg):
        return {"device": "d", "kernel_key": f"{rec['kind']}{stages}{cfg}",
                "features": dict(rec, config={**rec["config"], **cfg, "num_stages": stages}),
                "stats": {"median_us": us, "error": None}}
    pw = [row(add_record, 1, 10.0), row(add_record, 2, 40.0), row(add_record, 1, 7.0, num_warps=8)]
    x = feature_matrix([r["features"] for r in pw], compile=False)
    assert np.array_equal(x[0], x[1], equal_nan=True) and not np.array_equal(x[0], x[2], equal_nan=True)
    looped = [row(softmax_record, s, 30.0 * s, persistent=False, RBLOCK=256) for s in (1, 2)]
    x = feature_matrix([r["features"] for r in looped], compile=False)
    assert np.array_equal(x[0], x[1], equal_nan=True)
    merged = merge_twins([*pw, *looped])
    assert [r["stats"]["median_us"] for r in merged] == pytest.approx([20.0, 7.0, 30.0 * 2 ** 0.5])
    assert [r["stats"].get("twins") for r in merged] == [2, None, 2]
    assert len(usable([*pw, *looped])) == 3
    other = dict(pw[1], features=dict(pw[1]["features"], group="other"))   # another kernel: not a twin
    assert len(merge_twins([pw[0], other])) == 2
    split = [row(softmax_record, s, 50.0, persistent=False, RBLOCK=256, split=s) for s in (1, 2)]
    assert len(merge_twins(split)) == 2   # split is a real choice


def test_occupancy_limits():
    assert blocks_per_sm(4, 14, 0) == 16          # thread limit: 64 warps / 4
    assert blocks_per_sm(4, 255, 128) == 2        # register limit: 65536 / (256 * 128)
    assert blocks_per_sm(1, 16, 100 * 1024) == 2  # shared memory limit
    assert math.isnan(blocks_per_sm(4, float("nan"), 0))


# --- metrics ---------------------------------------------------------------------------------------

def test_metrics_perfect_and_reversed():
    measured = [1, 2, 3, 4, 5, 6, 7, 10, 20, 30, 40, 50, 60]
    groups = ["a"] * 7 + ["b"] * 6
    good = metrics(measured, measured, groups)
    assert (good.pairwise, good.peak1, good.peak5, good.mae_log, good.regret) == (1, 1, 1, 0, 0)
    assert good.spearman == pytest.approx(1.0)
    bad = metrics(measured, [1 / t for t in measured], groups)
    assert (bad.pairwise, bad.peak1, bad.peak5) == (0, 0, 0) and bad.spearman < 0
    assert good.groups == 2 and good.pairs == 21 + 15


def test_metrics_ties_and_singletons():
    m = metrics([10.0, 10.05, 20.0, 7.0], [3.0, 1.0, 2.0, 1.0], ["a", "a", "a", "solo"])
    assert m.pairs == 2            # 10 vs 10.05 is a tie (within 1%), the singleton group has no pair
    assert m.peak1 == 1.0          # picks 10.05: within 1% of the best
    assert m.groups == 1
    assert metrics([5.0], [5.0], ["x"]).pairwise != metrics([5.0], [5.0], ["x"]).pairwise  # NaN: nothing to rank
    assert Metrics.from_json(m.to_json()) == m


def test_noise_tolerant_metrics_on_a_hand_made_group():
    # measured 100, 101.5, 103, 110 (µs); the model ranks 101.5 first, then 103, 100, 110
    m = metrics([100.0, 101.5, 103.0, 110.0], [2.0, 1.0, 1.5, 3.0], ["g"] * 4)
    assert m.peak1 == 0.0          # 101.5 is 1.5% off the best: a miss within 1%
    assert m.peak1_tol == 1.0      # ... and a hit within 2%
    # pairs beyond the 1% tie: (100,101.5) x, (100,103) x, (100,110) ok, (101.5,103) ok, (101.5,110) ok, (103,110) ok
    assert m.pairs == 6 and m.pairwise == pytest.approx(4 / 6)
    # pairs differing by more than 2%: (100,103) x, (100,110) ok, (101.5,110) ok, (103,110) ok
    assert m.pairs_sig == 4 and m.pairwise_sig == pytest.approx(3 / 4)
    assert Metrics.from_json(m.to_json()) == m
    old = {k: v for k, v in m.to_json().items() if k not in ("peak1_tol", "pairwise_sig", "pairs_sig")}
    assert math.isnan(Metrics.from_json(old).peak1_tol)  # metrics stored before these fields existed still load


def test_split_by_graph_is_whole_graphs_and_stable():
    rows = [{"features": {"graph": f"g{i}", "group": f"g{i}k"}} for i in range(40) for _ in range(3)]
    train, test = split_by_graph(rows, 0.25, seed=3)
    tg, sg = {r["features"]["graph"] for r in train}, {r["features"]["graph"] for r in test}
    assert tg and sg and not tg & sg and len(train) + len(test) == len(rows)
    assert split_by_graph(list(reversed(rows)), 0.25, seed=3)[1] and {r["features"]["graph"] for r in
                                                                       split_by_graph(rows, 0.25, 3)[1]} == sg
    more = rows + [{"features": {"graph": f"h{i}", "group": "x"}} for i in range(40)]
    assert sg <= {r["features"]["graph"] for r in split_by_graph(more, 0.25, seed=3)[1]}  # a graph keeps its side
    assert split_by_graph(rows[:3], 0.25)[1] == []  # one graph: nothing to hold out
    assert {r["features"]["graph"] for r in split_by_graph(rows, 0.25, seed=4)[1]} != sg


# --- training -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dataset() -> list[dict]:
    return read_jsonl_gz(DATA)


@pytest.fixture(scope="module")
def dataset_db(dataset, tmp_path_factory) -> Path:
    """A tuning DB file holding the dataset (tests copy it: one insert per row is slow)."""
    path = tmp_path_factory.mktemp("costmodel") / "dataset.db"
    with TuningDB.open(path) as db:
        for r in dataset:
            db.put_measurement(r["kernel_key"], r["device"], r["features"], r["stats"])
    return path


def _db(tmp_path: Path, source: Path | None = None, rows: list[dict] = ()) -> TuningDB:
    if source is not None:
        shutil.copy(source, tmp_path / "t.db")
    db = TuningDB.open(tmp_path / "t.db")
    for r in rows:
        db.put_measurement(r["kernel_key"], r["device"], r["features"], r["stats"])
    return db


def test_dataset_is_the_generators_output(dataset):
    assert len(dataset) > 200 and len({r["features"]["graph"] for r in dataset}) >= 12
    for r in dataset[::25]:
        assert r["stats"]["median_us"] == pytest.approx(synthetic_time_us(r["features"]), rel=1e-9)


def test_fit_predict_roundtrip_beats_byte_counts(dataset):
    train, test = split_by_graph(dataset, 0.25, seed=0)
    model = fit(train, "hgb", compile=False)
    assert model.feature_names == REGRESSOR_NAMES and model.trained_on["graphs"] < 18
    pred = model.predict_us([r["features"] for r in test])
    assert pred.shape == (len(test),) and np.all(pred > 0)
    got = metrics([r["stats"]["median_us"] for r in test], pred, [r["features"]["group"] for r in test])
    floor = metrics([r["stats"]["median_us"] for r in test], ByteCountPredictor().predict_us([r["features"] for r in test]),
                    [r["features"]["group"] for r in test])
    assert got.pairwise > 0.7 > floor.pairwise and got.spearman > 0.8 and got.mae_log < floor.mae_log
    again = CostModel.from_bytes(model.to_bytes())
    assert again.version == model.version and np.allclose(again.predict_us([r["features"] for r in test]), pred)
    with pytest.raises(ValueError):
        CostModel.from_bytes(pickle.dumps({"format": 99}))
    with pytest.raises(ValueError, match="too few"):
        fit(dataset[:1], compile=False)
    plain = fit(train, "et", compile=False, target="log_us")  # the other target: log time itself
    assert plain.target == "log_us" and np.all(plain.predict_us([r["features"] for r in test[:5]]) > 0)
    with pytest.raises(ValueError, match="unknown target"):
        fit(train, "et", compile=False, target="seconds")


def test_order_within_groups_hands_out_the_regressors_times():
    base = np.log([10.0, 20.0, 30.0, 7.0, 5.0])
    scores = np.array([0.1, 0.9, 0.5, np.nan, 0.3])      # higher: more likely the fastest of its group
    out = np.exp(order_within_groups(base, scores, ["g", "g", "g", "solo", None]))
    assert out == pytest.approx([30.0, 10.0, 20.0, 7.0, 5.0])  # g in the ranker's order; the others kept
    tied = order_within_groups(np.zeros(3), np.array([0.2, 0.8, 0.5]), ["h"] * 3)
    assert list(np.argsort(tied)) == [1, 2, 0]            # equal times still come out in the ranker's order


def test_training_pairs_skip_ties():
    a, b, label = training_pairs(np.log([10.0, 10.05, 20.0, 1.0]), ["g", "g", "g", "solo"])
    pairs = sorted(zip(a.tolist(), b.tolist(), label.tolist()))
    assert pairs == [(0, 2, 1), (1, 2, 1), (2, 0, 0), (2, 1, 0)]  # 10 vs 10.05 is a tie; the singleton has no pair


def test_ranker_orders_configs_within_a_group(dataset):
    train, test = split_by_graph(dataset, 0.25, seed=0)
    model = fit(train, "et", compile=False)
    plain = fit(train, "et", compile=False, ranker=False)
    assert model.ranker is not None and plain.ranker is None and "+rank" not in plain.version != model.version
    assert model_version("et", train, 0, compiled=True) != model_version("et", train, 0, compiled=False)
    recs = [r["features"] for r in test]
    t, t0 = model.predict_us(recs), plain.predict_us(recs)
    groups = np.array([r["group"] for r in recs])
    for g in set(groups):  # a group's times are the regressor's, reordered
        assert np.sort(t[groups == g]) == pytest.approx(np.sort(t0[groups == g]), rel=1e-6)
    assert model.predict_us(recs[:1]) == pytest.approx(t0[:1])  # alone in its group: the regressor's time
    measured = [r["stats"]["median_us"] for r in test]
    assert metrics(measured, t, groups).pairwise > 0.7
    again = CostModel.from_bytes(model.to_bytes())
    assert np.allclose(again.predict_us(recs), t)
    import costmodel.rank as rank   # the classifier on all cores (many pairs) gives the same times
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rank, "PARALLEL_PAIRS", 0)
        assert np.array_equal(model.predict_us(recs), t)
    old = CostModel.__new__(CostModel)  # a model pickled before rankers existed
    old.__dict__.update({k: v for k, v in plain.__dict__.items() if k != "ranker"})
    assert old.ranker is None and np.allclose(old.predict_us(recs), t0)


def test_estimator_comparison_table(dataset):
    table = compare_estimators(dataset, names=("et", "rf"), seeds=(0,), compile=False)
    assert {c.name for c in table} == {"et", "rf", "bytes"}
    assert choose(table) in ("et", "rf")
    text = format_comparison(table)
    assert "pairwise" in text and "bytes" in text


def test_predict_plan_us(dataset):
    model = fit(dataset, "et", compile=False, launch_overhead_us=4.0)
    recs = [r["features"] for r in dataset[:3]]
    kernels = float(np.sum(model.predict_us(recs)))
    assert predict_plan_us(model, recs, 5) == pytest.approx(kernels + 20.0)
    assert predict_plan_us(LearnedPredictor(model), recs, 5) == pytest.approx(kernels + 20.0)
    bc = ByteCountPredictor()  # its launch overhead is already in each kernel's time
    assert predict_plan_us(bc, recs, 5) == pytest.approx(sum(bc.predict_us(recs)))
    assert predict_plan_us(model, [], 2) == pytest.approx(8.0)


# --- retrain --------------------------------------------------------------------------------------

def test_retrain_with_too_few_measurements(tmp_path, dataset):
    with TuningDB.open(tmp_path / "empty.db") as db:
        r = retrain(db, "NVIDIA H200", options=FAST)
        assert not r.stored and "too few" in r.message and db.latest_cost_model("NVIDIA H200") is None
    with _db(tmp_path, rows=[dataset[0]]) as db:
        assert "too few" in retrain(db, options=FAST).message


def test_retrain_stores_refuses_worse_and_force(tmp_path, dataset, dataset_db):
    dev = H200["name"]
    with _db(tmp_path, dataset_db) as db:
        first = retrain(db, options=FAST)
        assert first.stored and first.device == dev and first.current is None
        row = db.latest_cost_model(dev)
        assert row["version"] == first.model.version and row["metrics"]["heldout"]["pairwise"] > 0.7
        assert row["trained_on"]["split_seed"] == 0 and row["trained_on"]["measurements"] == first.train_size
        # a model that trained on every graph (the held-out ones too) is hard to beat on them
        leaky = fit(dataset, "et", compile=False)
        db.put_cost_model(dev, leaky.version, leaky.to_bytes(), {}, {"split_seed": 0})
        refused = retrain(db, options=FAST)
        assert not refused.stored and "worse" in refused.message
        assert refused.current.pairwise > refused.new.pairwise
        assert db.latest_cost_model(dev)["version"] == leaky.version
        forced = retrain(db, force=True, options=FAST)
        assert forced.stored and "forced" in forced.message
        assert db.latest_cost_model(dev)["version"] == forced.model.version


def test_retrain_cli(tmp_path, dataset_db, capsys):
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="command"))
    _db(tmp_path, dataset_db).close()
    args = parser.parse_args(["retrain", "--db", str(tmp_path / "t.db"), "--no-compile", "--seed", "1",
                              "--estimator", "et"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    for word in ("spearman", "pairwise accuracy", "peak@1", "peak@5", "log-time MAE", "current (none)", "stored"):
        assert word in out
    args = parser.parse_args(["retrain", "--db", str(tmp_path / "none.db"), "--device", "NVIDIA H200"])
    assert args.func(args) == 1 and "too few measurements" in capsys.readouterr().out


# --- predictors -----------------------------------------------------------------------------------

class _RankedFake:
    """A ranker-like predictor: a group's "alone" times handed out in "rank" order when two or more of
    its records are predicted together, each record's own "alone" time otherwise."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def predict_us(self, records):
        self.calls.append(len(records))
        out = [r["alone"] for r in records]
        by: dict = {}
        for i, r in enumerate(records):
            by.setdefault(r["group"], []).append(i)
        for ix in by.values():
            if len(ix) > 1:
                times = sorted(records[i]["alone"] for i in ix)
                for t, i in zip(times, sorted(ix, key=lambda i: records[i]["rank"])):
                    out[i] = t
        return out


def test_group_context_predictor_gives_a_config_alone_its_time_among_its_group():
    """Without a GPU the tuner ranks a kernel's configs together, then "measures" each alone; a record
    alone must get the time it got in its group, or the regressor's own times undo the ranker's order
    (the model-only search would keep softmax's default config, 148 µs against the ranker's 129)."""
    from costmodel.predict import GroupContextPredictor
    cfg = lambda x: {"XBLOCK": x}  # noqa: E731
    a = {"group": "k", "config": cfg(1), "alone": 10.0, "rank": 0}   # the ranker's best, slow by the regressor
    b = {"group": "k", "config": cfg(2), "alone": 5.0, "rank": 1}
    other = {"group": "j", "config": cfg(1), "alone": 7.0, "rank": 0}
    inner = _RankedFake()
    assert inner.predict_us([a]) == [10.0]                             # the inconsistency itself
    p = GroupContextPredictor(inner)
    assert p.predict_us([a, b]) == [5.0, 10.0]
    assert p.predict_us([a]) == [5.0] and p.predict_us([b]) == [10.0]  # alone: as ranked with its group
    assert p.predict_us([dict(a)]) == [5.0]                            # the same config, another dict
    assert p.predict_us([other]) == [7.0]                              # a group of one: its own time


def test_group_context_predictor_ranks_a_group_again_only_when_it_grows():
    """A group's times are kept until a new config joins it, so that the plan totals of later trials,
    which ask again for configs already ranked, cost no prediction; a new config re-ranks the group."""
    from costmodel.predict import GroupContextPredictor
    cfg = lambda x: {"XBLOCK": x}  # noqa: E731
    a = {"group": "k", "config": cfg(1), "alone": 10.0, "rank": 1}
    b = {"group": "k", "config": cfg(2), "alone": 5.0, "rank": 0}
    c = {"group": "k", "config": cfg(4), "alone": 8.0, "rank": 2}
    loose = {"group": None, "config": cfg(1), "alone": 3.0, "rank": 0}   # no group: predicted as it is
    inner = _RankedFake()
    p = GroupContextPredictor(inner)
    assert p.predict_us([a, b]) == [10.0, 5.0] and inner.calls == [2]
    assert p.predict_us([b]) == [5.0] and p.predict_us([a, dict(b), a]) == [10.0, 5.0, 10.0]
    assert inner.calls == [2]                                            # nothing predicted again
    assert p.predict_us([loose]) == [3.0] and inner.calls == [2, 1]      # alone: always predicted
    assert p.predict_us([c]) == [10.0] and inner.calls == [2, 1, 3]      # a new config: the group re-ranked
    assert p.predict_us([a, b, c, loose]) == [8.0, 5.0, 10.0, 3.0] and inner.calls == [2, 1, 3, 1]


def test_byte_count_predictor():
    rec = {"bytes_read": 4.27e6, "bytes_written": 4.27e6, "config": {"XBLOCK": 128}}
    p = ByteCountPredictor()
    assert p.predict_us([rec]) == pytest.approx([2.0 + 3.0])
    assert p.predict_us([rec, dict(rec, config={"XBLOCK": 1024})])[0] == p.predict_us([rec])[0]  # configs tie
    assert ByteCountPredictor(copy_bw=8.54e12, launch_overhead_us=0).predict_us([rec]) == pytest.approx([1.0])
    assert p.predict_us([dict(rec, device={"copy_bw": 2.135e12})]) == pytest.approx([7.0])  # the record's own
    assert isinstance(p, Predictor) and p.predict_us([]) == []


class _CountingDB:
    def __init__(self, row=None):
        self.row, self.calls = row, 0

    def latest_cost_model(self, device):
        self.calls += 1
        return self.row


def test_load_predictor_fallbacks(tmp_path, dataset, monkeypatch):
    import costmodel.predict as predict
    monkeypatch.setattr(predict, "PRETRAINED_DIR", tmp_path / "pretrained")
    recs = [r["features"] for r in dataset[:4]]
    empty = _CountingDB()
    p = load_predictor(empty, "NVIDIA H200")
    assert isinstance(p, LazyPredictor) and empty.calls == 0  # lazy
    assert p.predict_us(recs) == ByteCountPredictor().predict_us(recs) and empty.calls == 1
    p.predict_us(recs)
    assert empty.calls == 1  # resolved once
    assert isinstance(load_predictor(None, "NVIDIA H200").resolve(), ByteCountPredictor)
    with pytest.warns(UserWarning, match="ignoring the cost model"):
        broken = load_predictor(_CountingDB({"blob": b"not a pickle", "version": "x"}), "NVIDIA H200").resolve()
    assert isinstance(broken, ByteCountPredictor)
    model = fit(dataset, "et", compile=False)
    good = load_predictor(_CountingDB({"blob": model.to_bytes(), "version": model.version}), "NVIDIA H200")
    assert good.predict_us(recs) == pytest.approx(list(model.predict_us(recs)))
    # no model in the DB: the packaged pretrained model for the device
    (tmp_path / "pretrained").mkdir()
    (tmp_path / "pretrained" / "nvidia-h200.npz").write_bytes(model.to_bytes())
    shipped = load_predictor(_CountingDB(), "NVIDIA H200").resolve()
    assert isinstance(shipped, LearnedPredictor) and shipped.model.version == model.version
    assert isinstance(load_predictor(_CountingDB(), "NVIDIA A100").resolve(), ByteCountPredictor)
    with pytest.warns(UserWarning, match="failed to predict"):  # a model that loads but cannot predict
        assert LearnedPredictor(object()).predict_us(recs) == ByteCountPredictor().predict_us(recs)


def test_load_predictor_from_a_real_db(tmp_path, dataset, dataset_db):
    with _db(tmp_path, dataset_db) as db:
        assert isinstance(load_predictor(db, H200["name"]).resolve(), ByteCountPredictor)
        retrain(db, options=FAST)
        p = load_predictor(db, H200["name"]).resolve()
        assert isinstance(p, LearnedPredictor) and p.model.version == db.latest_cost_model(H200["name"])["version"]
        assert len(usable(db.measurements())) == len(dataset)


def test_codegen_flags_are_config_features():
    # two configs that differ only in a codegen flag must not look the same to the model
    from costmodel.features import FEATURE_NAMES, kernel_features
    from costmodel.rank import CONFIG_NAMES
    base = {"kind": "reduction", "numel": 8192, "rnumel": 32000, "bytes_read": 524288000, "bytes_written": 32768,
            "config": {"XBLOCK": 1, "RBLOCK": 4096, "num_warps": 8, "num_stages": 1, "persistent": False}}
    plain = kernel_features(base, compile=False)
    online = kernel_features({**base, "config": {**base["config"], "online": True}}, compile=False)
    tanh = kernel_features({**base, "config": {**base["config"], "fast_tanh": True}}, compile=False)
    assert (plain["online"], online["online"], tanh["fast_tanh"], plain["fast_tanh"]) == (0.0, 1.0, 1.0, 0.0)
    early = kernel_features({**base, "config": {**base["config"], "early_loads": True}}, compile=False)
    assert early["early_loads"] == 1.0 and plain["early_loads"] == 0.0
    flags = {"online", "fast_tanh", "early_loads"}
    assert flags <= CONFIG_NAMES and flags <= set(FEATURE_NAMES)
    assert [k for k in FEATURE_NAMES if plain[k] != online[k] and plain[k] == plain[k]] == ["online"]


def test_thread_limits_scan_the_libraries_once(monkeypatch):
    """Each prediction limits OpenMP threads; the process's libraries are found once, not per call."""
    import threadpoolctl
    from sklearn.utils._openmp_helpers import _openmp_effective_n_threads

    from costmodel import threads
    made = []
    real = threadpoolctl.ThreadpoolController
    monkeypatch.setattr(threads, "_controller", None)
    monkeypatch.setattr(threadpoolctl, "ThreadpoolController", lambda: made.append(1) or real())
    for _ in range(3):
        with threads.thread_limit(1):
            assert _openmp_effective_n_threads() == 1
    assert made == [1]
