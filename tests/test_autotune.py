"""Compile-time autotuning of reduction, 2-D tiled, windowed (pooling) and strided-read kernels: the measured best
config is used, other 1-D pointwise kernels keep their default, measurements are stored once, the user's inputs and generators are untouched,
and a failure leaves the default plan. On the CPU a fake benchmarker stands in for the GPU timer."""
from __future__ import annotations

import json

import pytest
import torch

from autofuse.capture.trace import trace_aten
from autofuse.compiler import compile_graph
from autofuse.measure.timing import FakeBenchmarker
from autofuse.options import CompileOptions
from autofuse.search.autotune import autotuned_plan
from tests.helpers import assert_close, rand


@pytest.fixture(autouse=True)
def _autotune_on(monkeypatch):
    """The suite turns compile-time autotuning off (tests/conftest.py); these tests are about it."""
    monkeypatch.setenv("AUTOFUSE_AUTOTUNE", "1")


def _prefer_looped(rec: dict) -> float:
    """A fake timer under which a looped reduction config is the fastest (pointwise: all alike)."""
    if rec["kind"] == "pointwise":
        return 5.0
    return 10.0 if not rec["config"].get("persistent", True) else 13.0 + rec["config"]["XBLOCK"] / 1024


def _row_graph(device: str | None = None):
    """A row reduction and a pointwise kernel. The tests that time it with a fake timer keep it on the
    CPU: the candidates ranked there are the interpreter's, whatever device the suite runs on."""
    def fn(x, w):
        y = torch.tanh(x) * w
        return y - y.mean(-1, keepdim=True), torch.sigmoid(w) + 1
    args = [rand((37, 300), device=device), rand((300,), device=device)]
    return fn, args, trace_aten(fn, args)


def _options(tmp_path, **kw) -> CompileOptions:
    return CompileOptions(db=str(tmp_path / "t.db"), strict=True, **kw)


def test_the_measured_best_reduction_config_is_used_and_pointwise_keeps_its_default(tmp_path):
    fn, args, gm = _row_graph(device="cpu")
    opts = _options(tmp_path)
    default = compile_graph(gm, args, opts).plan
    fb = FakeBenchmarker(_prefer_looped)
    plan = autotuned_plan(gm, args, opts, benchmarker=fb)
    assert plan is not None and plan.strategy == "inductor"
    assert [k.nodes for k in plan.kernels] == [k.nodes for k in default.kernels]   # grouping unchanged
    timed = [c for c in fb.calls if c.get("kind") != "extern"]
    assert timed and all(c["kind"] != "pointwise" for c in timed)                  # pointwise never timed
    arts = compile_graph(gm, args, opts.with_(plan=plan))
    by_kind = {k.kind for k in arts.kernels}
    assert "reduction" in by_kind and "pointwise" in by_kind
    fastest = min(timed, key=_prefer_looped)["config"]
    for k, dk in zip(arts.kernels, compile_graph(gm, args, opts).kernels):
        if k.kind == "reduction":
            assert k.config.to_json() == fastest and k.config != dk.config, k.config
        else:
            assert k.config == dk.config
    assert_close(arts.program(list(args)), list(fn(*args)))


def test_inductors_configs_are_measured_whatever_the_ranking_and_the_fastest_is_used(tmp_path):
    """A logsumexp down the columns of a transposed bf16 input (an outer reduction): the config
    Inductor's heuristics give it (8 x 64 looped, 4 warps, at 1000 columns) is measured beside the ranked ones, and used
    where it is the fastest."""
    from autofuse.compiler import default_config, schedule
    from autofuse.schedule.fusion import reduction_hint
    from autofuse.search.reference import reference_configs

    def fn(x):
        return torch.logsumexp(x.t() * 1.5 + 0.25, dim=-1)
    args = [rand((94, 1000), dtype=torch.bfloat16, device="cpu")]
    gm = trace_aten(fn, args)
    opts = _options(tmp_path)
    red = [g for g in schedule(gm, args, opts).groups if g.is_reduction]
    assert len(red) == 1 and reduction_hint(red[0]) == "outer"
    refs = reference_configs(red[0], default_config(red[0], opts.heuristics, True), "outer")
    assert [(c.XBLOCK, c.RBLOCK, c.num_warps, c.persistent) for c in refs] == [(8, 64, 4, False)]
    want = refs[0].to_json()
    fb = FakeBenchmarker(lambda rec: 5.0 if rec["config"] == want else 20.0)
    plan = autotuned_plan(gm, args, opts, benchmarker=fb)
    assert plan is not None and [k.config for k in plan.kernels if k.config.RBLOCK > 1] == [refs[0]]
    assert want in [c["config"] for c in fb.calls]
    arts = compile_graph(gm, args, opts.with_(plan=plan))
    assert_close(arts.program(list(args)), [fn(*args)])


def test_measurements_are_stored_and_the_next_compile_measures_nothing(tmp_path):
    from tuning_db import TuningDB
    _, args, gm = _row_graph()
    opts = _options(tmp_path)
    first = FakeBenchmarker(_prefer_looped)
    plan = autotuned_plan(gm, args, opts, benchmarker=first)
    assert first.calls
    with TuningDB.open(tmp_path / "t.db") as db:
        assert len(db.measurements()) == len(first.calls)
    again = FakeBenchmarker(_prefer_looped)
    assert autotuned_plan(gm, args, opts, benchmarker=again) == plan and again.calls == []
    off = FakeBenchmarker(_prefer_looped)   # use_db=False: measured again, nothing stored
    assert autotuned_plan(gm, args, opts.with_(use_db=False), benchmarker=off) == plan and off.calls


def _three_reductions_graph():
    """Three reduction kernels of different sizes: row means of 64 x 500 and 9 x 70, a column sum of
    300 x 40 (the largest first by elements reduced: 32000, 12000, 630). On the CPU under any
    --device, as the other fake-timer graphs here: the assertions are about the interpreter's
    candidates."""
    def fn(a, b, c):
        return torch.tanh(a).mean(-1), torch.sigmoid(b).mean(-1), (c * 3).sum(0)
    args = [rand((64, 500), device="cpu"), rand((9, 70), device="cpu"), rand((300, 40), device="cpu")]
    return fn, args, trace_aten(fn, args)


def _timed_reductions(fb: FakeBenchmarker) -> set[tuple]:
    return {(c["numel"], c["rnumel"]) for c in fb.calls if c.get("kind") == "reduction"}


def test_the_kernels_with_the_most_elements_reduced_are_measured_first(tmp_path, monkeypatch):
    from autofuse.search import autotune as at
    _, args, gm = _three_reductions_graph()
    fb = FakeBenchmarker(_prefer_looped)
    assert autotuned_plan(gm, args, _options(tmp_path, use_db=False), benchmarker=fb) is not None
    assert _timed_reductions(fb) == {(64, 500), (40, 300), (9, 70)}
    monkeypatch.setattr(at, "AUTOTUNE_KERNELS", 2)
    fb = FakeBenchmarker(_prefer_looped)
    autotuned_plan(gm, args, _options(tmp_path, use_db=False), benchmarker=fb)
    assert _timed_reductions(fb) == {(64, 500), (40, 300)}


def test_past_the_time_budget_kernels_keep_their_default(tmp_path, monkeypatch):
    from autofuse.search import autotune as at
    monkeypatch.setattr(at, "AUTOTUNE_BUDGET_S", 0.0)
    _, args, gm = _three_reductions_graph()
    opts = _options(tmp_path, use_db=False)
    fb = FakeBenchmarker(_prefer_looped)
    plan = autotuned_plan(gm, args, opts, benchmarker=fb)
    assert not _timed_reductions(fb)
    default = compile_graph(gm, args, opts).plan
    assert plan is not None and [k.config for k in plan.kernels] == [k.config for k in default.kernels]


def test_no_gpu_and_no_timer_means_no_autotune(tmp_path):
    _, args, gm = _row_graph(device="cpu")
    assert autotuned_plan(gm, args, _options(tmp_path)) is None


def _prefer_short_tiles(rec: dict) -> float:
    """A fake timer under which a pointwise kernel runs faster the shorter its 2-D tile (1-D: slowest)."""
    y = rec["config"].get("YBLOCK", 0)
    return (10.0 + y / 64 if y else 100.0) if rec["kind"] == "pointwise" else 10.0


def test_a_tiled_pointwise_kernel_is_measured_and_its_fastest_tile_used(tmp_path):
    def fn(x, y):
        return x.t() + y    # stores along y's rows, loads along x's: 2-D tiles
    args = [rand((300, 37), device="cpu"), rand((37, 300), device="cpu")]
    gm = trace_aten(fn, args)
    opts = _options(tmp_path, use_db=False)
    default = compile_graph(gm, args, opts)
    assert [k.config.YBLOCK > 0 for k in default.kernels] == [True]
    fb = FakeBenchmarker(_prefer_short_tiles)
    plan = autotuned_plan(gm, args, opts, benchmarker=fb)
    assert plan is not None and any(c["kind"] == "pointwise" for c in fb.calls)
    arts = compile_graph(gm, args, opts.with_(plan=plan))
    (k,) = arts.kernels
    assert 0 < k.config.YBLOCK < default.kernels[0].config.YBLOCK
    assert k.config.YBLOCK == min(c["config"].get("YBLOCK", 0) or 1 << 30 for c in fb.calls if c["kind"] == "pointwise")
    assert_close(arts.program(list(args)), [fn(*args)])


def _prefer_eight_warps(rec: dict) -> float:
    return 10.0 - rec["config"]["num_warps"] / 8


def test_a_pooling_window_is_measured_and_its_fastest_config_used(tmp_path):
    def fn(x):
        return torch.nn.functional.avg_pool2d(x, 3, 1, 1, count_include_pad=False)
    args = [rand((2, 5, 11, 13))]
    gm = trace_aten(fn, args)
    opts = _options(tmp_path, use_db=False)
    default = compile_graph(gm, args, opts)
    assert [k.config.YBLOCK for k in default.kernels] == [0]   # a 1-D kernel, not a tiled one
    fb = FakeBenchmarker(_prefer_eight_warps)
    plan = autotuned_plan(gm, args, opts, benchmarker=fb)
    assert plan is not None and any(c["kind"] == "pointwise" for c in fb.calls)
    arts = compile_graph(gm, args, opts.with_(plan=plan))
    (k,) = arts.kernels
    assert k.config.num_warps == max(c["config"]["num_warps"] for c in fb.calls if c["kind"] == "pointwise")
    assert k.config.num_warps > default.kernels[0].config.num_warps
    assert_close(arts.program(list(args)), [fn(*args)])


def _prefer_four_warps(rec: dict) -> float:
    return abs(rec["config"]["num_warps"] - 4) + rec["config"]["XBLOCK"] / 4096


def test_a_kernel_reading_with_a_small_stride_is_measured_and_its_fastest_config_used(tmp_path):
    def fn(x):
        return torch.tanh(x[:, ::2]) + x.narrow(1, 1, x.shape[1] // 2)
    args = [rand((9, 74))]
    gm = trace_aten(fn, args)
    opts = _options(tmp_path, use_db=False)
    fb = FakeBenchmarker(_prefer_four_warps)
    plan = autotuned_plan(gm, args, opts, benchmarker=fb)
    assert plan is not None and any(c["kind"] == "pointwise" for c in fb.calls)
    arts = compile_graph(gm, args, opts.with_(plan=plan))
    (k,) = arts.kernels
    timed = [c["config"] for c in fb.calls if c["kind"] == "pointwise"]
    assert (k.config.num_warps, k.config.XBLOCK) == min(((c["num_warps"], c["XBLOCK"]) for c in timed),
                                                         key=lambda w: abs(w[0] - 4) + w[1] / 4096)
    assert_close(arts.program(list(args)), [fn(*args)])


def test_a_row_sort_keeps_its_default_while_the_reductions_beside_it_are_measured(tmp_path):
    """Each variant of a sorting network compiles for seconds: the autotune leaves the sort's config
    to the rule and measures the softmax beside it."""
    def fn(x):
        return torch.sort((x * 1000).long(), dim=-1, stable=True)[1], torch.softmax(x, -1)
    args = [rand((6, 300), device="cpu")]
    gm = trace_aten(fn, args)
    fb = FakeBenchmarker(lambda rec: 10.0)
    plan = autotuned_plan(gm, args, _options(tmp_path, use_db=False), benchmarker=fb)
    assert plan is not None and {c["kind"] for c in fb.calls} == {"reduction"}
    arts = compile_graph(gm, args, _options(tmp_path, use_db=False).with_(plan=plan))
    assert any("_sort_rows" in k.source for k in arts.kernels)
    assert_close(arts.program(list(args)), list(fn(*args)))


def test_a_graph_without_reductions_or_tiles_is_left_alone(tmp_path, monkeypatch):
    """Nothing measured, no autotuned plan; the compile uses the default plan, built from the schedule
    the autotune made (the graph is lowered once)."""
    from autofuse.lower.graph import GraphLowering
    from autofuse.search.autotune import autotuned
    args = [rand((37, 300))]
    gm = trace_aten(lambda x: torch.tanh(x) * 2, args)
    fb = FakeBenchmarker(_prefer_looped)
    assert autotuned_plan(gm, args, _options(tmp_path), benchmarker=fb) is None and fb.calls == []
    lowered, run = [], GraphLowering.run
    monkeypatch.setattr(GraphLowering, "run", lambda self: lowered.append(1) or run(self))
    arts = autotuned(gm, args, _options(tmp_path), benchmarker=fb)
    assert arts.source == "strategy" and fb.calls == [] and len(lowered) == 1
    assert [k.source for k in arts.kernels] == [k.source for k in compile_graph(gm, args, _options(tmp_path)).kernels]
    assert_close(arts.program(list(args)), [torch.tanh(args[0]) * 2])


def test_inputs_written_in_place_and_the_generators_are_untouched(tmp_path):
    def fn(x, running):
        running.mul_(0.9).add_(x.mean(0) * 0.1)
        return torch.nn.functional.dropout(x, 0.5) - x.mean(-1, keepdim=True)
    args = [rand((19, 130)), rand((130,))]
    gm = trace_aten(fn, [args[0], args[1].clone()])
    before = args[1].clone()
    rng = torch.get_rng_state()
    plan = autotuned_plan(gm, args, _options(tmp_path), benchmarker=FakeBenchmarker(_prefer_looped))
    assert plan is not None
    assert torch.equal(args[1], before)              # the running buffer is updated by real calls only
    assert torch.equal(torch.get_rng_state(), rng)   # the draws of the next call are eager's


def test_a_failing_autotune_warns_and_leaves_the_default(tmp_path, monkeypatch):
    _, args, gm = _row_graph()

    def broken(*a, **k):
        raise RuntimeError("no luck")
    monkeypatch.setattr("autofuse.search.autotune.schedule", broken)
    with pytest.warns(UserWarning, match="autotuning .* failed .*no luck.*default plan"):
        assert autotuned_plan(gm, args, _options(tmp_path), benchmarker=FakeBenchmarker(_prefer_looped)) is None


def test_the_driver_compiles_from_the_autotuned_plan(tmp_path, monkeypatch):
    """Where the autotune returns a plan (the GPU), compile uses it and says so; with autotune off or
    a stored plan, it is not asked. The program is built from the schedule the kernels were measured
    on: the graph is lowered once, and its kernels are those a compile from the plan gives."""
    import autofuse
    from autofuse.search import autotune as at
    fn, args, _ = _row_graph(device="cpu")
    asked = []
    real = at.autotuned

    timers: list[FakeBenchmarker] = []

    def on_a_gpu(gm, a, options, benchmarker=None, settings=at.AUTOTUNE):
        asked.append(options.autotune)
        timers.append(FakeBenchmarker(_prefer_looped))
        return real(gm, a, options, benchmarker=timers[-1], settings=settings)
    monkeypatch.setattr(at, "autotuned", on_a_gpu)
    from autofuse.lower.graph import GraphLowering
    lowered, run = [], GraphLowering.run

    def counted(self):
        lowered.append(1)
        return run(self)
    monkeypatch.setattr(GraphLowering, "run", counted)
    rep = autofuse.explain(fn, args, options=_options(tmp_path))
    assert asked == [True] and "(autotuned)" in rep.strategy and len(lowered) == 1
    fastest = min((c for c in timers[0].calls if c.get("kind") == "reduction"), key=_prefer_looped)["config"]
    assert [k.config.to_json() for k in rep.kernels if k.kind == "reduction"] == [fastest]
    from_plan = compile_graph(trace_aten(fn, args), args, _options(tmp_path).with_(plan=rep.plans[0]))
    assert [k.source for k in from_plan.kernels] == [k.source for k in rep.kernels]
    (outcome,) = json.loads(rep.to_json())["graph_outcomes"]
    assert set(outcome["compile_seconds"]) == {"lower_and_group", "measure", "program"}
    assert all(v >= 0 for v in outcome["compile_seconds"].values())
    assert set(from_plan.seconds) == {"lower_and_group", "program"}
    compiled = autofuse.compile(fn, options=_options(tmp_path))
    assert_close(compiled(*args), fn(*args))
    asked.clear()
    rep = autofuse.explain(fn, args, options=_options(tmp_path, autotune=False))
    assert asked == [] and "autotuned" not in rep.strategy
    assert json.loads(json.dumps(rep.to_json()))  # the report still serializes


def test_a_read_only_db_is_read_not_written_and_the_autotune_goes_on(tmp_path):
    """A shared DB opened read-only: the autotune measures, warns once that nothing is stored, and
    the database file is untouched."""
    _, args, gm = _row_graph(device="cpu")
    from tuning_db import TuningDB
    path = tmp_path / "ro.db"
    with TuningDB.open(str(path)) as db:
        db.put_graph("h" * 64, "a graph")
    before = path.read_bytes()
    opts = CompileOptions(db=f"sqlite:///file:{path}?mode=ro&uri=true", strict=True)
    fb = FakeBenchmarker(_prefer_looped)
    with pytest.warns(UserWarning, match="not stored in the tuning DB"):
        plan = autotuned_plan(gm, args, opts, benchmarker=fb)
    assert plan is not None and fb.calls and path.read_bytes() == before
    fastest = min((c for c in fb.calls if c.get("kind") == "reduction"), key=_prefer_looped)["config"]
    assert [k.config.to_json() for k in plan.kernels if k.config.RBLOCK > 1] == [fastest]


@pytest.mark.parametrize("dynamic", [False, True])
def test_only_graphs_of_static_sizes_are_autotuned(dynamic, tmp_path, monkeypatch):
    """A graph Dynamo made symbolic is specialized for every size it meets: those specializations
    keep the rules' configs rather than measuring each new size."""
    from autofuse.search import autotune as at
    asked = []
    monkeypatch.setattr(at, "autotuned", lambda gm, a, options, **k: asked.append(options.autotune))
    torch._dynamo.reset()

    def fn(x):
        return x - x.mean(-1, keepdim=True)
    f = torch.compile(fn, backend="autofuse", dynamic=dynamic,
                      options={"db": str(tmp_path / "t.db"), "strict": True})
    for rows in (5, 7):
        x = rand((rows, 33))
        assert_close(f(x), fn(x))
    assert asked == ([] if dynamic else [True, True])


def test_a_training_step_with_running_statistics_is_unchanged_by_the_autotune(tmp_path, monkeypatch):
    """BatchNorm in training mode writes its running statistics in place and dropout draws from the
    generator: with the autotune running the forward graph's kernels several times first, the
    statistics still move once per call (as eager's) and the draws, outputs and gradients are those
    of the same model compiled without the autotune. (A compiled dropout draws its mask inside the
    generated kernel, from a seed the generator gives: not eager's bits, as under Inductor.)"""
    from autofuse.search import autotune as at
    real, asked = at.autotuned, []

    def on_a_gpu(gm, a, options, benchmarker=None, settings=at.AUTOTUNE):
        asked.append(1)
        return real(gm, a, options, benchmarker=FakeBenchmarker(_prefer_looped), settings=settings)
    monkeypatch.setattr(at, "autotuned", on_a_gpu)
    torch._dynamo.reset()

    def build():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(24, 40), torch.nn.BatchNorm1d(40), torch.nn.Dropout(0.3),
                                   torch.nn.Linear(40, 5)).train()
    x = rand((19, 24))
    eager, plain_model, tuned_model = (build().to(x.device) for _ in range(3))
    plain = torch.compile(plain_model, backend="autofuse",
                          options={"db": str(tmp_path / "p.db"), "strict": True, "autotune": False})
    tuned = torch.compile(tuned_model, backend="autofuse", options={"db": str(tmp_path / "t.db"), "strict": True})
    for _ in range(2):
        outs = []
        for model in (eager, plain, tuned):
            torch.manual_seed(1)
            out = model(x)
            out.sum().backward()
            outs.append(out)
        assert_close(outs[2], outs[1], atol=1e-5, rtol=1e-4)
        assert not torch.equal(outs[2], outs[0])
    assert asked   # the forward or backward graph was autotuned
    bn_e, bn_t = eager[1], tuned_model[1]
    assert_close(bn_t.running_mean, bn_e.running_mean)
    assert_close(bn_t.running_var, bn_e.running_var)
    assert int(bn_t.num_batches_tracked) == int(bn_e.num_batches_tracked) == 2
    for pp, pt in zip(plain_model.parameters(), tuned_model.parameters()):
        assert_close(pt.grad, pp.grad, atol=1e-5, rtol=1e-4)


def test_the_environment_switch_turns_it_off(tmp_path, monkeypatch):
    import autofuse
    from autofuse.search import autotune as at
    asked = []
    monkeypatch.setattr(at, "autotuned", lambda gm, a, options, **k: asked.append(1))
    monkeypatch.setenv("AUTOFUSE_AUTOTUNE", "0")
    fn, args, _ = _row_graph()
    autofuse.explain(fn, args, options=_options(tmp_path))
    assert asked == []


@pytest.mark.gpu
def test_on_the_gpu_a_compile_measures_once_and_matches_eager(tmp_path, device):
    """The real timer: the first compile measures and stores, the second (another graph object,
    same kernels) finds every measurement in the DB; both match eager."""
    import autofuse
    from tuning_db import TuningDB

    def fn(x, w):
        y = torch.tanh(x) * w
        return torch.softmax(y, -1) + y.mean(-1, keepdim=True), (x * x).sum(0)
    args = [rand((3001, 1000), device=device), rand((1000,), device=device)]
    opts = _options(tmp_path)
    rep = autofuse.explain(fn, args, options=opts)
    assert "(autotuned)" in rep.strategy
    with TuningDB.open(str(tmp_path / "t.db")) as db:
        first = len(db.measurements())
    assert first > 0
    for _ in range(2):
        torch._dynamo.reset()
        assert_close(autofuse.compile(fn, options=opts)(*args), fn(*args), atol=1e-4, rtol=1e-4)
    with TuningDB.open(str(tmp_path / "t.db")) as db:
        assert len(db.measurements()) == first
