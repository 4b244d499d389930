"""benchmarks/search_quality.py on the CPU: the four searches (model only, two guided, unguided
reference) run under the fake timer of tests/test_search.py — the model-only one under none: it
times with its predictor and measures nothing — the stored winners are compiled from their DBs and
re-timed by a fake re-timer that prices each compiled kernel with the same planted costs, and the
rows, verdicts and table follow from those costs. Also: partial results are on disk before the
re-timing, a spent budget skips cases, a failing learned model is noticed, no GPU means exit 2."""
from __future__ import annotations

import json
import warnings

import pytest
import torch

from autofuse.measure.timing import FakeBenchmarker
from benchmarks import search_quality as sq
from benchmarks.programs import PROGRAMS
from benchmarks.cases import Case
from costmodel.predict import ByteCountPredictor
from tests.helpers import seed_fn
from tests.test_search import planted_cost, seed_args


class PlantedPredictor:
    """Stands in for the learned model: it knows the planted costs (num_warps=2 is best)."""

    def predict_us(self, records):
        return [planted_cost(r) for r in records]


def kernel_us(k) -> float:
    """The fake's price of one compiled kernel (the seed graph's only reduction is its mean), plus
    FakeBenchmarker's launch term — what the tuner's fake timer charged for the same kernel."""
    return planted_cost({"nodes": ["mean"] if k.kind == "reduction" else [], "source": k.source,
                         "config": k.config.to_json()}) + 1.0


def factories():
    return {"byte-count": lambda db, dev: ByteCountPredictor(), "learned": lambda db, dev: PlantedPredictor()}


def test_four_searches_rows_and_table(tmp_path, device):
    out = tmp_path / "out"
    benches: dict[str, FakeBenchmarker] = {}
    seen: dict[str, object] = {}

    def bench_for(v):
        benches[v.name] = FakeBenchmarker(planted_cost)
        return benches[v.name]

    def retime(fn, args, contenders):
        seen["on_disk"] = json.loads((out / "results.json").read_text())   # written before the re-timing
        seen["names"] = [c.name for c in contenders]
        return {c.name: [sum(kernel_us(k) for a in c.artifacts for k in a.kernels if k.kind != "fallback")] * 3
                for c in contenders}

    # small stand-ins for 32 trials / top-k 16 (reference), 8, 32 trials (guided) and 32 (model only)
    variants = sq.default_variants(ref_trials=12, ref_top_k=12, ref_explore=1.0, guided_trials=(3, 12),
                                   model_only_trials=12)
    assert [(v.name, v.predictor, v.trials, v.target, v.measures) for v in variants] == [   # in the order they run
        ("model only", "learned", 12, 1.10, False), ("guided 3", "learned", 3, 1.05, True),
        ("guided 12", "learned", 12, 1.01, True), ("unguided long", "byte-count", 12, None, True)]
    case = Case("seed_tiny", lambda dev, scale: (seed_fn, seed_args(dev)))
    res = sq.run_all([case], variants, out, 600.0, device=device, factories=factories(), retime=retime,
                     benchmarker_for=bench_for, meta={"device": "cpu (fake timer)"})

    c = res["cases"][0]
    assert "error" not in c and "retime_error" not in c, c
    # partial results were on disk before the re-timing: all four searches, no verdicts yet
    part = seen["on_disk"]["cases"][0]
    assert part["partial"] and [s["name"] for s in part["searches"]] == [
        "model only", "guided 3", "guided 12", "unguided long"]
    assert seen["names"] == ["model only", "guided 3", "guided 12", "unguided long", "default plan"]

    rows = {r["variant"]: r for r in c["rows"]}
    assert list(rows) == ["unguided long", "model only", "guided 3", "guided 12", "default plan"]   # the reference first
    ref, g3, g12, default = rows["unguided long"], rows["guided 3"], rows["guided 12"], rows["default plan"]
    # the reference finds the planted optimum: relu in its own kernel, mean fused with the epilogue,
    # num_warps=2 everywhere: two kernels of 10 us + 1 us launch
    assert (ref["us"], ref["kernels"], ref["ratio"]) == (pytest.approx(22.0), 2, pytest.approx(1.0))
    # 3 trials are the default strategies' plans only; the best of them, configs tuned: three 11 us kernels
    assert (g3["us"], g3["kernels"], g3["ratio"], g3["within"]) == (pytest.approx(33.0), 3, pytest.approx(1.5), False)
    assert (g12["us"], g12["kernels"], g12["ratio"], g12["within"]) == (pytest.approx(22.0), 2, pytest.approx(1.0), True)
    # the default plan: one kernel computing relu inline (+30) at the default num_warps (+7)
    assert (default["us"], default["kernels"]) == (pytest.approx(48.0), 1)
    assert default["ratio"] == pytest.approx(48.0 / 22.0)

    searches = {s["name"]: s for s in c["searches"]}
    # model only: nothing measured (the fake timer it was handed was never asked), the plan stored as
    # predicted, its winner — the planted optimum, since the stand-in model knows the costs — re-timed
    # like the others; its own time is the model's sum of kernel predictions, without launches
    mo, mo_row = searches.pop("model only"), rows["model only"]
    assert benches["model only"].calls == [] and mo["kernels_measured"] == mo_row["kernels_measured"] == 0
    assert mo["stored"] and mo["source"] == ["predicted"] and mo["measured"] is False and not mo["cut_by_budget"]
    assert mo["predictor_used"] == ["PlantedPredictor"] and mo["predictor_calls"] > 0
    assert mo_row["trials"] == mo_row["trials_asked"] == 12 and c["retimed"]["model only"]["rounds_us"] == [22.0] * 3
    assert (mo_row["us"], mo_row["kernels"], mo_row["ratio"], mo_row["within"], mo_row["target"]) == (
        pytest.approx(22.0), 2, pytest.approx(1.0), True, 1.10)
    assert mo_row["tuner_us"] == pytest.approx(20.0) and mo_row["note"] == ""
    for name, s in searches.items():
        fake_kernel_calls = [k for k in benches[name].calls if k.get("kind") in ("pointwise", "reduction")]
        assert s["kernels_measured"] == rows[name]["kernels_measured"] == len(fake_kernel_calls) > 0
        assert s["stored"] and s["source"] == ["tuned"] and s["measured"] and not s["cut_by_budget"]
        assert s["tune_us"] == pytest.approx(rows[name]["us"])         # the tuner's own time agrees
        assert rows[name]["trials"] == rows[name]["trials_asked"] == s["trials"]
    assert searches["unguided long"]["predictor_used"] == ["ByteCountPredictor"]
    assert searches["guided 3"]["predictor_used"] == ["PlantedPredictor"] and searches["guided 12"]["predictor_calls"] > 0
    assert searches["unguided long"]["kernel"]["top_k"] == 12 and searches["guided 12"]["kernel"]["top_k"] == 6
    # the wide search measures more configs per kernel than the guided one of about as many trials
    assert searches["unguided long"]["kernels_measured"] > searches["guided 12"]["kernels_measured"]

    table = (out / "results.md").read_text()
    assert table == sq.markdown(res)
    assert "| seed_tiny | guided 3 | learned | 3/3 |" in table and "| 1.500 | 3 | ≤ 1.05 | NO |" in table
    assert "| seed_tiny | guided 12 | learned | 12/12 |" in table and "| 1.000 | 2 | ≤ 1.01 | yes |" in table
    assert "| seed_tiny | model only | learned | 12/12 | 0 |" in table and "| 1.000 | 2 | ≤ 1.10 | yes |" in table
    assert "model only ≤ 1.10: 1/1 cases; guided 3 ≤ 1.05: 0/1 cases; guided 12 ≤ 1.01: 1/1 cases" in table
    on_disk = json.loads((out / "results.json").read_text())
    assert on_disk["cases"][0]["rows"] == json.loads(json.dumps(c["rows"])) and on_disk["device"] == "cpu (fake timer)"


def test_spent_budget_skips_cases(tmp_path):
    def never(*a, **k):
        raise AssertionError("no search should run")

    cases = [Case("a", never), Case("b", never)]
    res = sq.run_all(cases, sq.default_variants(), tmp_path, 0.0, device="cpu",
                     factories={"byte-count": never, "learned": never}, retime=never)
    assert [c.get("skipped", "")[:12] for c in res["cases"]] == ["budget spent"] * 2
    assert "| a | skipped: budget spent" in (tmp_path / "results.md").read_text()


def test_budget_split_and_targets():
    vs = sq.default_variants()
    assert [(v.name, v.trials, v.target, v.measures) for v in vs] == [
        ("model only", 32, 1.10, False), ("guided 8", 8, 1.05, True),
        ("guided 32", 32, 1.01, True), ("unguided long", 32, None, True)]
    # the reference searches wider than the guided searches, all of it drawn at random
    assert vs[3].kernel.top_k > vs[1].kernel.top_k and vs[3].kernel.explore == 1.0
    # each search gets its weight's share of what is left; the model-only one, first, always runs;
    # the reference, last, gets all that is left
    assert sq.split(120.0, vs[0].weight, 1.2) == pytest.approx(20.0)
    assert sq.split(100.0, vs[1].weight, 1.0) == pytest.approx(20.0)
    assert sq.split(90.0, vs[2].weight, 0.8) == pytest.approx(45.0)
    assert sq.split(70.0, vs[3].weight, 0.4) == pytest.approx(70.0)
    assert sq.split(-5.0, 0.5, 1.0) == sq.MIN_SEARCH_S
    assert [v.name for v in sq.default_variants(model_only_trials=0)] == ["guided 8", "guided 32", "unguided long"]
    # --max-candidates widens what the model ranks; the byte-count reference keeps the tuner's default
    wide = sq.default_variants(max_candidates=160)
    assert [v.kernel.max_candidates for v in wide] == [160, 160, 160, sq.DEFAULT_CANDIDATES]
    # by default the tuner decides (more configs where a learned model ranks them); the reference keeps the byte-count default
    assert [v.kernel.max_candidates for v in vs] == [None, None, None, sq.DEFAULT_CANDIDATES]
    # --guided-refine: a set of guided searches per value; 0 is the ranking alone
    assert all(v.kernel.refine == 0 for v in vs[:3]) and vs[3].kernel.refine == sq.KernelTuneSettings().refine
    both = sq.default_variants(guided_refine=(0, 24))
    assert [(v.name, v.kernel.refine, v.target) for v in both[1:5]] == [
        ("guided 8", 0, 1.05), ("guided 32", 0, 1.01), ("guided 8 refine 24", 24, 1.05), ("guided 32 refine 24", 24, 1.01)]
    assert sum(v.weight for v in both[1:5]) == pytest.approx(sum(v.weight for v in vs[1:3]))   # the same guided share


def test_probe_notices_a_failing_model():
    class Failing:
        def predict_us(self, records):
            warnings.warn("autofuse: cost model cm-x failed to predict (ValueError: x); using byte counts")
            return [1.0] * len(records)

    p = sq.PredictorProbe(Failing())
    assert p.predict_us([{}, {}]) == [1.0, 1.0]
    assert p.calls == 1 and "failed to predict" in p.problems[0] and p.describe() == "Failing"


def test_no_gpu_exits_with_a_message(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert sq.main(["--budget", "10"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_table_flags_a_guided_search_without_the_model():
    vs = sq.default_variants(guided_trials=(8,), model_only_trials=0)
    row = {"case": "c", "searches": [
        {"name": "guided 8", "trials": 8, "kernels_measured": 30, "seconds": 9.0, "cut_by_budget": False,
         "predictor_used": ["ByteCountPredictor"]},
        {"name": "unguided long", "trials": 20, "kernels_measured": 200, "seconds": 60.0, "cut_by_budget": True}],
        "retimed": {"guided 8": {"us": 104.0, "rounds_us": [103.0, 104.0, 106.0], "kernels": 1},
                    "unguided long": {"us": 100.0, "rounds_us": [100.0], "kernels": 2}}}
    rows = sq.summarize(vs, row)
    assert [r["variant"] for r in rows] == ["unguided long", "guided 8"]
    g = rows[1]
    assert g["ratio"] == pytest.approx(1.04) and g["within"] is True and g["spread_pct"] == pytest.approx(3 / 104 * 100)
    assert "ranked by byte counts" in g["note"]
    table = sq.markdown({"cases": [{**row, "rows": rows}]})
    assert "| c | unguided long | byte-count | 20/32 (budget) | 200 | 60.0 | 100.0 | 1.000 | 2 |  |  |" in table
    assert "| c | guided 8 | learned | 8/8 | 30 | 9.0 | 104.0 ±2.9% no learned model" in table
    assert "guided 8 ≤ 1.05: 1/1 cases" in table


def test_model_only_takes_the_no_gpu_path(monkeypatch):
    """searching_with(measures=False) makes the tuner's own benchmarker choice the no-GPU one even
    with CUDA inputs (a stand-in here), over the predictor the tuner loaded; both swaps are undone."""
    from unittest import mock

    from autofuse.measure.timing import PredictingBenchmarker
    from autofuse.search import graph_tuner

    class OnGpu:
        measures = True

    monkeypatch.setattr(graph_tuner, "CudaEventBenchmarker", OnGpu)
    cuda_arg = mock.MagicMock(spec=torch.Tensor, is_cuda=True)
    choose, load = graph_tuner.default_benchmarker, graph_tuner.load_predictor
    pred = PlantedPredictor()
    assert isinstance(choose([cuda_arg], pred), OnGpu)
    with sq.searching_with(lambda db, dev: pred, measures=True):
        assert isinstance(graph_tuner.default_benchmarker([cuda_arg], pred), OnGpu)
    with sq.searching_with(lambda db, dev: pred, measures=False):
        b = graph_tuner.default_benchmarker([cuda_arg], pred)
        assert isinstance(b, PredictingBenchmarker) and b.predictor is pred and not b.measures
        assert graph_tuner.load_predictor(None, "cuda:x") is pred
    assert (graph_tuner.default_benchmarker, graph_tuner.load_predictor) == (choose, load)


def test_model_only_search_is_not_cut_by_its_budget(tmp_path, device, monkeypatch):
    """Its trials are predictions: it runs without a time budget however small its share (cut by one,
    softmax's model-only search stops at 15 of 32 trials), while a measuring search gets its share. (The
    settings are checked, not the cut: the tuner allows every graph at least 1 s, in which a fast
    host finishes a small search anyway.)"""
    import autofuse
    budgets: dict[str, object] = {}
    real = autofuse.tune

    def spy(fn, args, settings=None, **kw):
        budgets[str(settings.db)] = settings.time_budget
        return real(fn, args, settings=settings, **kw)

    monkeypatch.setattr(autofuse, "tune", spy)
    variants = {v.name: v for v in sq.default_variants(ref_trials=12, ref_top_k=12, ref_explore=1.0,
                                                        guided_trials=(4,), model_only_trials=4)}
    args = seed_args(device)
    mo = sq.run_search(seed_fn, args, variants["model only"], tmp_path / "mo.db", 1e-6,
                       lambda db, dev: PlantedPredictor())
    assert mo["trials"] == 4 and not mo["cut_by_budget"] and mo["kernels_measured"] == 0
    guided = sq.run_search(seed_fn, args, variants["guided 4"], tmp_path / "g.db", 0.5,
                           lambda db, dev: PlantedPredictor(), FakeBenchmarker(planted_cost))
    assert "error" not in guided and guided["budget_s"] == 0.5
    assert budgets == {str(tmp_path / "mo.db"): None, str(tmp_path / "g.db"): 0.5}


def test_corpus_programs_as_cases(tmp_path, device):
    """--programs / --categories: broad-corpus programs join the suite's cases, run without
    gradients at their CPU sizes when the scale is below 1, and go through the four searches."""
    picked = sq.select_cases(["softmax_f32_16384x4096"], ["reduce_sum_last_f32"], ["scan"])
    names = [c.name for c in picked]
    scans = [p.name for p in PROGRAMS if p.category == "scan"]
    assert names == ["softmax_f32_16384x4096", "reduce_sum_last_f32", *scans]
    with pytest.raises(ValueError, match="no_such_program"):
        sq.select_cases([], ["no_such_program"], [])
    case = sq.select_cases([], ["reduce_sum_last_f32"], [])[0]
    fn, args = case.build(device, 0.5)
    out = fn(*args)
    assert out.shape == args[0].shape[:-1] and not out.requires_grad
    variants = sq.default_variants(ref_trials=3, ref_top_k=4, ref_explore=1.0, guided_trials=(2,),
                                   model_only_trials=2)

    def retime(fn, args, contenders):
        return {c.name: [10.0] * 3 for c in contenders}

    res = sq.run_all([case], variants, tmp_path / "out", 600.0, device=device, factories=factories(), retime=retime,
                     benchmarker_for=lambda v: FakeBenchmarker(lambda r: 10.0), scale=0.5)
    row = res["cases"][0]
    assert "error" not in row, row
    assert {r["variant"] for r in row["rows"]} >= {"unguided long", "model only", "guided 2", "default plan"}
