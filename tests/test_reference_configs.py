"""The reduction configs Inductor's default mode would time (search/reference.py), by hint: which
shapes each kernel gets, that every one is legal, and that a split row keeps its split only where
Inductor would split it."""
from __future__ import annotations

import torch

from autofuse.capture.trace import trace_aten
from autofuse.compiler import default_config, schedule
from autofuse.options import CompileOptions
from autofuse.plan.apply import check_config
from autofuse.schedule.fusion import reduction_hint
from autofuse.search.reference import reference_configs
from tests.helpers import rand


def _reduction(fn, args):
    opts = CompileOptions(strict=True, use_db=False)
    (g,) = [g for g in schedule(trace_aten(fn, args), args, opts).groups if g.is_reduction]
    default = default_config(g, opts.heuristics, False)
    hint = reduction_hint(g)
    refs = reference_configs(g, default, hint)
    assert all(check_config(c, g) is None for c in refs) and default not in refs
    return g, default, hint, [(c.XBLOCK, c.RBLOCK, c.num_warps, c.persistent, c.split) for c in refs]


def test_a_few_short_rows_get_one_persistent_row_a_program():
    _, _, hint, refs = _reduction(lambda x: x.softmax(-1), [rand((37, 300), device="cpu")])
    assert hint == "inner" and refs == [(1, 512, 4, True, 1)]


def test_rows_under_256_elements_get_every_persistent_row_count():
    _, default, hint, refs = _reduction(lambda x: x.sum(-1), [rand((1000, 60), device="cpu")])
    shapes = {(1, 64, 2, True, 1), (8, 64, 4, True, 1), (32, 64, 8, True, 1)}
    assert hint == "inner" and set(refs) == shapes - {(default.XBLOCK, 64, default.num_warps, True, 1)}


def test_many_rows_of_a_few_hundred_also_get_several_rows_on_one_warp():
    _, _, hint, refs = _reduction(lambda x: x.sum(-1), [rand((2048, 300), device="cpu")])
    assert hint == "inner" and refs == [(2, 512, 1, True, 1), (1, 512, 4, True, 1)]


def test_a_long_row_is_looped_in_steps_of_at_most_2048():
    _, _, hint, refs = _reduction(lambda x: x.sum(-1), [rand((64, 5000), device="cpu")])
    assert hint == "inner" and refs == [(1, 2048, 16, False, 1)]


def test_a_column_reduction_gets_inductors_outer_tile():
    _, _, hint, refs = _reduction(lambda x: x.sum(0), [rand((300, 1000), device="cpu")])
    assert hint == "outer" and refs == [(8, 64, 4, False, 1)]


def test_rows_read_both_along_and_across_get_the_whole_set():
    _, _, hint, refs = _reduction(lambda x, y: (x * y.t()).sum(-1),
                                  [rand((1000, 700), device="cpu"), rand((700, 1000), device="cpu")])
    assert hint == "mixed"
    assert refs == [(2, 1024, 16, False, 1), (8, 64, 4, False, 1), (1, 1024, 8, False, 1),
                    (64, 64, 16, False, 1), (8, 512, 16, False, 1), (64, 4, 8, False, 1)]


def test_a_whole_tensor_sum_keeps_its_split_and_a_wide_one_does_not():
    g, default, _, refs = _reduction(lambda x: x.sum(), [rand((2000, 2000), device="cpu")])
    assert default.split > 1 and refs and all(r[4] == default.split for r in refs)
    g, default, _, refs = _reduction(lambda x: x.sum(-1), [rand((4096, 2048), device="cpu")])
    assert all(r[4] == 1 for r in refs)


def test_a_tune_with_default_settings_measures_them_and_keeps_the_fastest(tmp_path):
    """`autofuse tune`'s kernel search measures the references too, so a tuned plan never misses
    what the default plan's compile-time autotune measured."""
    import autofuse
    from autofuse.measure.timing import FakeBenchmarker
    from autofuse.search.settings import TuneSettings

    def fn(x):
        return x.sum(0)
    args = [rand((100, 130), device="cpu")]
    (ref,) = _reference_of(fn, args)
    want = ref.to_json()
    fb = FakeBenchmarker(lambda rec: 5.0 if rec["config"] == want else 20.0)
    settings = TuneSettings(db=str(tmp_path / "t.db"), trials=2, progress=False, compare_torch_compile=False,
                            finalists=1, runner_ups=0, rounds=1)
    assert settings.kernel.reference
    res = autofuse.tune(fn, args, settings=settings, benchmarker=fb)
    assert want in [c["config"] for c in fb.calls if c.get("kind") == "reduction"]
    (graph,) = res.graphs
    assert [k.config for k in graph.plan.kernels if k.config.RBLOCK > 1] == [ref]


def _reference_of(fn, args):
    opts = CompileOptions(strict=True, use_db=False)
    (g,) = [g for g in schedule(trace_aten(fn, args), args, opts).groups if g.is_reduction]
    return reference_configs(g, default_config(g, opts.heuristics, True), reduction_hint(g))
