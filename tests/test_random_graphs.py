"""Differential test of the whole pipeline on random programs (tests/randgraph.py).

Every seed in range(--graphs) is traced, compiled with poisoned buffers and compared with eager
(values, dtypes, shapes, strides; tests/helpers.py's tolerances):
  * test_random_graph:            Inductor-style fusion (the default strategy);
  * test_random_graph_unfused:    every 4th seed with strategy="none" (one kernel per buffer);
  * test_random_graph_small_blocks: every 3rd seed with launch configs that force many programs
    per kernel, ragged x/r masks and (odd seeds) looped, non-persistent reductions — code paths
    the interpreter's default whole-tensor blocks never reach;
  * test_random_graph_reuse:      every 4th seed (from 2) unfused and without poison, so that
    allocations take over the storage of freed intermediates (poisoning disables that);
  * test_random_graph_gpu_defaults: every 4th seed (from 3) with the launch configs the GPU's
    default rules choose (outer tiles, rows per program, pass-aware steps), run in the interpreter;
  * test_random_graph_autotuned:  every 5th seed (from 4) compiled from the plan the compile-time
    autotune picks, under a fake timer that ranks the candidate configs at random;
  * test_random_graph_training:   every 2nd seed drawn as a program to train through
    (`make_training_case`), compiled by torch.compile with autofuse's backend (AOTAutograd's
    forward and min-cut backward graphs), forward + autograd.grad compared with eager's outputs and
    gradients (tests/randgraph_train.py); test_random_graph_training_coverage checks that most of
    those seeds find such a program at all.
A failure prints the seed and the program's source, which replays the case on its own.
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass

import pytest

from autofuse import CompileOptions, Heuristics
from autofuse.capture.trace import compile_traced
from autofuse.codegen.config import LaunchConfig
from tests.helpers import assert_close, compile_and_compare
from tests.randgraph import make_case, make_training_case
from tests.randgraph_train import compare_training


SUBSETS = {  # test -> (first seed, step) of the seeds it runs
    "test_random_graph": (0, 1),
    "test_random_graph_unfused": (0, 4),
    "test_random_graph_small_blocks": (1, 3),
    "test_random_graph_reuse": (2, 4),
    "test_random_graph_gpu_defaults": (3, 4),
    "test_random_graph_autotuned": (4, 5),
    "test_random_graph_training": (0, 2),
}
TRAINED_SHARE = 0.7  # of the training subset's seeds, at least this many must run a backward


def pytest_generate_tests(metafunc):
    if "seed" in metafunc.fixturenames:
        first, step = SUBSETS[metafunc.function.__name__]
        metafunc.parametrize("seed", list(range(metafunc.config.getoption("--graphs")))[first::step])


@dataclass(frozen=True)
class SmallBlocks(Heuristics):
    """Tiny blocks: several programs per kernel and partial blocks; reductions either looped in
    steps of 8 (`looped`, online softmax where legal; cut into `split` chunks where the kernel is
    splittable, codegen/split.py) or persistent with 4 rows per program; a transposing pointwise
    kernel in 4 x 8 tiles (codegen/tiling.py)."""

    looped: bool = True
    split: int = 1

    def launch_config(self, kind, numel, rnumel, interpret, outer=False, legal=None, device=None, tile=None,
                      passes=1, writes_rows=False, strided=False):
        legal = legal or {}
        online = legal.get("online", False)
        if kind == "pointwise":
            return LaunchConfig(XBLOCK=8, YBLOCK=4) if tile is not None else LaunchConfig(XBLOCK=16)
        if self.looped and legal.get("split") and self.split > 1:
            return LaunchConfig(XBLOCK=2, RBLOCK=8, persistent=False, split=self.split, online=online)
        if self.looped:
            return LaunchConfig(XBLOCK=2, RBLOCK=8, persistent=False, online=online)
        rblock = 1
        while rblock < rnumel:
            rblock *= 2
        return LaunchConfig(XBLOCK=4, RBLOCK=rblock, persistent=True)


@dataclass(frozen=True)
class GpuDefaults(Heuristics):
    """The GPU's default launch configs, whatever the device (the kernels still run in the interpreter)."""

    def launch_config(self, kind, numel, rnumel, interpret, *args, **kw):
        return super().launch_config(kind, numel, rnumel, False, *args, **kw)


def _compile_with(fn, args, **options):
    """compile_and_compare with other compile options (same comparison, same tolerances)."""
    compiled = compile_traced(fn, args, CompileOptions(strict=True, use_db=False, **options))
    expected = fn(*args)
    actual = compiled(*args)
    if not isinstance(expected, (list, tuple)):
        assert len(actual) == 1
        actual = actual[0]
    assert_close(actual, expected)


def _check(seed, device, run):
    fn, args, src = make_case(seed, device)
    try:
        run(fn, args)
    except Exception as e:  # noqa: BLE001 - any failure is reported with the program
        tb = "".join(traceback.format_exception(e, chain=False)[-6:])
        pytest.fail(f"seed {seed}: {type(e).__name__}: {e}\n\n{tb}\n--- program (seed {seed}) ---\n{src}",
                    pytrace=False)


def test_random_graph(seed, device):
    _check(seed, device, compile_and_compare)


def test_random_graph_unfused(seed, device):
    _check(seed, device, lambda fn, args: compile_and_compare(fn, args, strategy="none"))


def test_random_graph_small_blocks(seed, device):
    _check(seed, device, lambda fn, args: _compile_with(
        fn, args, heuristics=SmallBlocks(looped=seed % 2 == 1, split=3 if seed % 4 == 3 else 1), poison=True))


def test_random_graph_reuse(seed, device):
    """Unpoisoned and unfused, so allocations take over freed buffers (poison turns reuse off)."""
    _check(seed, device, lambda fn, args: _compile_with(fn, args, strategy="none", poison=False))


def test_reuse_skips_storage_aliased_by_fallback(device):
    """Regression (random graph 598, reuse subset): rms_norm's decomposition leaves an in-place
    `add_` on the mean of squares in the graph; that ATen fallback returns its input, so the mean's
    storage lives on as the fallback's output and must not be handed to a later allocation."""
    import torch
    import torch.nn.functional as F

    def f(x):
        a = F.rms_norm(x, (9,))
        m = x.mean(0, keepdim=True)
        return a + m

    x = torch.randn(9, generator=torch.Generator().manual_seed(0)).to(device)
    _compile_with(f, [x], strategy="none", poison=False)


def test_random_graph_gpu_defaults(seed, device):
    _check(seed, device, lambda fn, args: _compile_with(fn, args, heuristics=GpuDefaults(), poison=True))


def test_random_graph_autotuned(seed, device):
    import hashlib
    import json

    from autofuse.capture.trace import trace_aten
    from autofuse.measure.timing import FakeBenchmarker
    from autofuse.search.autotune import autotuned_plan

    def any_order(rec):   # a config's "time": a hash of it and the seed, so any candidate may win
        h = hashlib.sha256(f"{seed}{json.dumps(rec['config'], sort_keys=True)}".encode()).digest()
        return 1.0 + h[0]

    def run(fn, args):
        opts = CompileOptions(strict=True, use_db=False, poison=True)
        plan = autotuned_plan(trace_aten(fn, args), args, opts, benchmarker=FakeBenchmarker(any_order))
        _compile_with(fn, args, **({"plan": plan} if plan is not None else {}), poison=True)
    _check(seed, device, run)


def test_random_graph_training(seed, device):
    """Forward and backward of a random program, compiled vs eager (outputs, gradients, inputs left
    alone); a seed whose stream holds no well-conditioned program to train through is skipped.
    Every other seed runs unpoisoned, so the backward's allocations take over freed buffers too."""
    from autofuse.api import Recorder

    case = make_training_case(seed, device)
    if case is None:
        pytest.skip(f"seed {seed}: no draft with a well-conditioned backward")
    fn, args, src = case
    rec = Recorder()
    try:
        compare_training(fn, args, rec, poison=seed % 4 == 0)
        assert any(o.label == "backward" and o.compiled for o in rec.outcomes), \
            f"no backward graph compiled: {[(o.label, o.compiled) for o in rec.outcomes]}"
    except Exception as e:  # noqa: BLE001 - any failure is reported with the program
        tb = "".join(traceback.format_exception(e, chain=False)[-6:])
        pytest.fail(f"seed {seed}: {type(e).__name__}: {e}\n\n{tb}\n--- program (seed {seed}) ---\n{src}",
                    pytrace=False)


def test_random_graph_training_coverage(request):
    """Most of test_random_graph_training's seeds train a program (decided from eager alone), so a
    change to the generator or its conditioning cannot quietly turn that test into skips."""
    first, step = SUBSETS["test_random_graph_training"]
    seeds = list(range(request.config.getoption("--graphs")))[first::step]
    trained = [s for s in seeds if make_training_case(s) is not None]
    assert len(trained) >= TRAINED_SHARE * len(seeds), \
        f"{len(trained)} of {len(seeds)} seeds train a program; skipped: {sorted(set(seeds) - set(trained))}"


def test_training_check_catches_a_wrong_gradient(monkeypatch):
    """The training comparison is not vacuous: a backward graph whose gradients are 0.1% off fails."""
    import torch

    from autofuse.capture import backend
    from tests.randgraph_train import Mismatch

    run = backend.CompiledGraph.__call__

    def off(self, args):
        out = run(self, args)
        if self.label != "backward":
            return out
        return [o * 1.001 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in out]

    monkeypatch.setattr(backend.CompiledGraph, "__call__", off)
    fn, args, _ = make_training_case(3)
    with pytest.raises(Mismatch, match="gradient of input"):
        compare_training(fn, args)


def test_the_soak_runs_training_steps(tmp_path):
    import json

    from benchmarks.soak import main
    out = tmp_path / "soak.json"
    assert main(["--seed", "7", "--programs", "2", "--train", "--out", str(out), "--quiet"]) == 0
    counts = json.loads(out.read_text())["counts"]
    assert counts["programs"] == counts["equal"] == counts["with_backward"] == 2 and counts["skipped"] == 0
