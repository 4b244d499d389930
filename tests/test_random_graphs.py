"""Differential test of the whole pipeline on random programs (tests/randgraph.py).

Every seed in range(--graphs) is traced, compiled with poisoned buffers and compared with eager
(values, dtypes, shapes, strides; tests/helpers.py's tolerances):
  * test_random_graph:            Inductor-style fusion (the default strategy);
  * test_random_graph_unfused:    every 4th seed with strategy="none" (one kernel per buffer);
  * test_random_graph_small_blocks: every 3rd seed with launch configs that force many programs
    per kernel, ragged x/r masks and looped (non-persistent) reductions — code paths the
    interpreter's default whole-tensor blocks never reach.
A failure prints the seed and the program's source, which replays the case on its own.
"""
from __future__ import annotations

import traceback

import pytest

from autofuse import CompileOptions, Heuristics
from autofuse.capture.trace import compile_traced
from autofuse.codegen.config import LaunchConfig
from tests.helpers import assert_close, compile_and_compare
from tests.randgraph import make_case


def pytest_generate_tests(metafunc):
    if "seed" not in metafunc.fixturenames:
        return
    n = metafunc.config.getoption("--graphs")
    seeds = list(range(n))
    name = metafunc.function.__name__
    if name == "test_random_graph_unfused":
        seeds = seeds[::4]
    elif name == "test_random_graph_small_blocks":
        seeds = seeds[1::3]
    metafunc.parametrize("seed", seeds)


class SmallBlocks(Heuristics):
    """Tiny blocks: several programs per kernel, partial blocks, and always-looped reductions."""

    def launch_config(self, kind, numel, rnumel, interpret):
        if kind == "pointwise":
            return LaunchConfig(XBLOCK=16)
        return LaunchConfig(XBLOCK=2, RBLOCK=8, persistent=False)


def _compile_small_blocks(fn, args):
    options = CompileOptions(heuristics=SmallBlocks(), poison=True, strict=True)
    compiled = compile_traced(fn, args, options)
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
    _check(seed, device, _compile_small_blocks)
