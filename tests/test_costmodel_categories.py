"""Kernel categories of feature records, TenSet top-k scores, and leave-one-category-out evaluation.

Category tests use hand-written feature records shaped as the exports' rows (`costmodel/data`);
the evaluation tests train extra-trees models on the small synthetic dataset of tests/data.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pytest

from costmodel import cli, train
from costmodel.categories import CATEGORIES, base_op, category_of, group_categories
from costmodel.evaluate import category_score, topk_score
from costmodel.synth import H200, read_jsonl_gz
from costmodel.train import RetrainOptions, leave_one_category_out, retrain
from tuning_db import TuningDB

DATA = Path(__file__).parent / "data" / "costmodel_small.jsonl.gz"
FAST = RetrainOptions(estimator="et", compile=False, ranker=False)

_HEAD = """
@triton.jit
def KERNEL(in_ptr0, out_ptr0, xnumel, rnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    rindex = tl.arange(0, RBLOCK)[None, :]
    rmask = rindex < rnumel
    xrmask = xmask & rmask
"""
ROW_LOAD = "    tmp0 = tl.load(in_ptr0 + ((rindex + (3000 * xindex))), xrmask, other=0)\n"
COL_LOAD = "    tmp0 = tl.load(in_ptr0 + ((xindex + (2944 * rindex))), xrmask, other=0)\n"
SUM = "    tmp1 = tl.reduce(tl.where(xrmask, tmp0, 0.0), 1, _fast_sum)[:, None]\n"
MAX = "    tmp2 = tl.reduce(tl.where(xrmask, tmp0, float('-inf')), 1, _fast_max)[:, None]\n"
STORE = "    tl.store(out_ptr0 + (xindex), tmp1, xmask)\n"
CONFIG = {"RBLOCK": 1024, "XBLOCK": 4, "num_stages": 1, "num_warps": 4, "persistent": True}


def _record(body: str, nodes: tuple[str, ...] = (), kind: str = "reduction", numel: int = 3000,
            rnumel: int = 3000, group: str = "k", **config) -> dict:
    """A feature record as the exports hold one: a hand-written kernel body and its config."""
    rec = {"schema": 1, "graph": "g", "group": group, "kind": kind, "numel": numel, "rnumel": rnumel,
           "config": dict(CONFIG, **config), "bytes_read": 4 * numel * rnumel, "bytes_written": 4 * numel,
           "kernel_fn": "KERNEL", "source": "import triton\nimport triton.language as tl\n" + _HEAD + body,
           "signature": {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "rnumel": "i32", "xnumel": "i32"}, "device": H200}
    if nodes:
        rec["nodes"] = list(nodes)
    return rec


SCAN = "    tmp1 = tl.associative_scan(tmp0, 1, _sum_combine)\n    tl.store(out_ptr0 + (rindex + 3000 * xindex), tmp1, xrmask)\n"
ARG = ("    tmp1 = tl.broadcast_to(rindex, [XBLOCK, RBLOCK])\n"
       "    _, tmp2 = tl.reduce((tmp0, tmp1), 1, _argmax_combine)\n    tl.store(out_ptr0 + (xindex), tmp2, xmask)\n")
SOFTMAX = MAX + "    tmp3 = tl.exp(tmp0 - tmp2)\n    tmp1 = tl.reduce(tl.where(xrmask, tmp3, 0.0), 1, _fast_sum)[:, None]\n" + STORE
NORM = SUM + "    tmp2 = _rsqrt(tmp1 / 3000.0 + 1e-05)\n    tl.store(out_ptr0 + (rindex + 3000 * xindex), tmp0 * tmp2, xrmask)\n"
POINTWISE = ("    tmp0 = tl.load(in_ptr0 + (xindex), xmask)\n    tl.store(out_ptr0 + (xindex), tmp0 * 2.0, xmask)\n")

CASES = [
    ("scan", _record(ROW_LOAD + SCAN, ("cumsum", "output"), kind="scan")),
    ("arg_reduction", _record(ROW_LOAD + ARG, ("argmax", "output"))),
    ("arg_reduction", _record(ROW_LOAD + ARG)),  # no node names: the combine function says it
    ("loss", _record(ROW_LOAD + SUM + STORE, ("sum_2", "sum_3", "output"), numel=1, rnumel=8192)),
    ("split_reduction", _record(ROW_LOAD + SUM + STORE, ("sum_1", "output"), numel=24, rnumel=1 << 20, split=8)),
    ("outer_reduction", _record(COL_LOAD + SUM + STORE, ("sum_1", "output"))),
    ("outer_reduction", _record(ROW_LOAD + SUM + STORE, ("sum_1", "output"), YBLOCK=16)),
    ("softmax", _record(ROW_LOAD + SOFTMAX, ("amax", "sub", "exp", "sum_1", "div", "output"))),
    ("softmax", _record(ROW_LOAD + SOFTMAX)),  # max and sum reductions with exp, read off the body
    ("softmax", _record(ROW_LOAD + SUM + STORE, ("amax", "sum_1", "mul_5", "output"), online=True)),
    ("softmax", _record(ROW_LOAD + SUM + STORE, ("logsumexp", "logsumexp.1", "output"))),
    ("norm", _record(ROW_LOAD + NORM, ("var_mean", "var_mean.1", "rsqrt", "output"))),
    ("norm", _record(ROW_LOAD + NORM, ("pow_1", "mean", "add", "output"))),  # RMS norm: rsqrt in the body
    ("row_reduction", _record(ROW_LOAD + SUM + STORE, ("var", "var.1", "output"))),  # a variance, no rsqrt
    ("row_reduction", _record(ROW_LOAD + MAX.replace("tmp2", "tmp1") + STORE, ("max_1", "output"))),
    ("pointwise", _record(POINTWISE, ("add", "relu", "output"), kind="pointwise", rnumel=1)),
    ("pointwise", _record(POINTWISE, ("div",), kind="pointwise", numel=1, rnumel=1)),  # a scalar op is no loss
]


@pytest.mark.parametrize("expected, record", CASES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(CASES)])
def test_category_of_a_feature_record(expected, record):
    assert category_of(record) == expected


def test_every_category_has_a_case_and_bad_sources_still_categorise():
    assert {c for c, _ in CASES} == set(CATEGORIES)
    broken = dict(_record(ROW_LOAD + SUM + STORE, ("sum_1", "output")), source="def nothing(:")
    assert category_of(broken) == "row_reduction"
    assert category_of({"kind": "pointwise"}) == "pointwise"


def test_base_op_strips_fx_suffixes():
    assert [base_op(n) for n in ("sum_1", "sum_1.1", "var_mean.2", "_to_copy_3", "mul_10", "amax", "output.1")] == \
        ["sum", "sum", "var_mean", "_to_copy", "mul", "amax", "output"]


def test_a_kernel_offered_split_configs_is_a_split_reduction_in_every_config():
    plain = _record(ROW_LOAD + SUM + STORE, ("sum_1", "output"), group="a")
    split = _record(ROW_LOAD + SUM + STORE, ("sum_1", "output"), group="a", split=4)
    other = _record(POINTWISE, ("add",), kind="pointwise", group="b")
    rows = [{"features": plain}, {"features": split}, {"features": other}]
    assert category_of(plain) == "row_reduction"
    assert group_categories(rows) == {"a": "split_reduction", "b": "pointwise"}
    assert group_categories([plain, other]) == {"a": "row_reduction", "b": "pointwise"}  # bare records too


def test_topk_score_is_tensets_ratio_per_graph():
    measured = [10.0, 12.0, 30.0, 5.0, 6.0, 7.0, 100.0]
    predicted = [3.0, 1.0, 2.0, 9.0, 8.0, 1.0, 1.0]
    groups = ["a", "a", "a", "b", "b", "b", "c"]
    graphs = ["g1", "g1", "g1", "g1", "g1", "g1", "g2"]  # c has one candidate: left out, and so is g2
    # top-1 picks 12 (best 10) and 7 (best 5): (10 + 5) / (12 + 7); top-2 picks {12, 30} and {7, 6}
    assert topk_score(measured, predicted, groups, graphs, 1) == pytest.approx(15 / 19)
    assert topk_score(measured, predicted, groups, graphs, 2) == pytest.approx(15 / 18)
    assert topk_score(measured, predicted, groups, graphs, 3) == pytest.approx(1.0)
    two = topk_score(measured[:3] * 2, predicted[:3] * 2, ["a"] * 3 + ["b"] * 3, ["g1"] * 3 + ["g2"] * 3, 1)
    assert two == pytest.approx(10 / 12)  # the mean over graphs
    assert math.isnan(topk_score([1.0], [1.0], ["a"], ["g"], 1))


@pytest.fixture(scope="module")
def dataset() -> list[dict]:
    return read_jsonl_gz(DATA)


class _Oracle:
    """Predicts each record's measured time from a lookup (a perfect model), or its negation (the worst)."""

    def __init__(self, rows: list[dict], sign: float = 1.0):
        self.times = {id(r["features"]): float(r["stats"]["median_us"]) for r in rows}
        self.sign = sign

    def predict_us(self, records):
        return np.array([self.sign * self.times[id(f)] for f in records])


def test_category_score_of_a_perfect_and_of_a_reversed_model(dataset):
    best = category_score("all", _Oracle(dataset), dataset)
    worst = category_score("all", _Oracle(dataset, -1.0), dataset)
    assert (best.top1, best.top5, best.pairwise) == (1.0, 1.0, 1.0) and best.rows == len(dataset)
    assert best.graphs == len({r["features"]["graph"] for r in dataset})
    assert worst.top1 < 0.9 and worst.top5 < best.top5 and worst.pairwise == 0.0
    assert best.to_json()["category"] == "all"


def test_leave_one_category_out_trains_without_the_held_out_category(dataset, monkeypatch):
    of_group = group_categories(dataset)
    trained_on: dict[str, set[str]] = {}
    real = train.train_model

    def spy(rows, estimator, seed, opts, x=None):
        model = real(rows, estimator, seed, opts, x=x)
        trained_on[model.version] = {of_group[r["features"]["group"]] for r in rows}
        return model

    monkeypatch.setattr(train, "train_model", spy)
    scores = leave_one_category_out(dataset, "et", 0, FAST, min_graphs=4)
    held = [s.category for s in scores]
    graphs = {c: {r["features"]["graph"] for r in dataset if of_group[r["features"]["group"]] == c}
              for c in set(of_group.values())}
    assert held == [c for c in CATEGORIES if len(graphs.get(c, ())) >= 4] and len(held) >= 2
    assert len(trained_on) == len(held)
    for s, cats in zip(scores, trained_on.values()):
        assert s.category not in cats and cats  # trained on the others only
        assert s.rows == sum(of_group[r["features"]["group"]] == s.category for r in dataset)
        assert 0.0 < s.top1 <= s.top5 <= 1.0 and 0.0 <= s.pairwise <= 1.0


def _dataset_db(path: Path, rows: list[dict]) -> Path:
    with TuningDB.open(path) as db:
        for r in rows:
            db.put_measurement(r["kernel_key"], r["device"], r["features"], r["stats"])
    return path


def test_retrain_reports_the_random_split_and_each_held_out_category(tmp_path, dataset, capsys):
    path = _dataset_db(tmp_path / "t.db", dataset)
    with TuningDB.open(path) as db:
        quiet = retrain(db, options=FAST)
    assert quiet.loco == () and quiet.random_split is not None and quiet.random_split.category == "random split"
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["retrain", "--db", str(path), "--no-compile", "--no-ranker", "--estimator", "et",
                              "--force"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "leave one category out" in out and "random split" in out and "norm: top-1" in out
    assert out.index("random split: top-1") < out.index("norm: top-1")
    table = out[out.index("leave one category out"):]
    assert all(word in table for word in ("graphs", "rows", "top-1", "top-5", "pairwise", "norm", "pointwise"))
    with TuningDB.open(path) as db:
        stored = db.latest_cost_model("NVIDIA H200") or db.latest_cost_model(dataset[0]["device"])
    assert [s["category"] for s in stored["metrics"]["loco"]][0] == "random split"
    args = parser.parse_args(["retrain", "--db", str(path), "--no-compile", "--no-ranker", "--estimator", "et",
                              "--no-loco"])
    args.func(args)
    out = capsys.readouterr().out
    assert "spearman" in out and "leave one category out" not in out
