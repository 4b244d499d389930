"""The tvm strategy (and plan replay) equal eager on the random-graph generator's programs."""
from __future__ import annotations

import traceback

import pytest

from autofuse import CompileOptions
from autofuse.capture.trace import compile_traced
from tests.helpers import assert_close, compile_and_compare
from tests.randgraph import make_case


def pytest_generate_tests(metafunc):
    if "seed" in metafunc.fixturenames:
        n = metafunc.config.getoption("--graphs")
        step = 5 if metafunc.function.__name__ == "test_random_graph_tvm" else 10
        metafunc.parametrize("seed", list(range(n))[2::step])


def _fail(seed, e, src):
    tb = "".join(traceback.format_exception(e, chain=False)[-6:])
    pytest.fail(f"seed {seed}: {type(e).__name__}: {e}\n\n{tb}\n--- program (seed {seed}) ---\n{src}", pytrace=False)


def test_random_graph_tvm(seed, device):
    fn, args, src = make_case(seed, device)
    try:
        compile_and_compare(fn, args, strategy="tvm")
    except Exception as e:  # noqa: BLE001
        _fail(seed, e, src)


def test_random_graph_plan_replay(seed, device):
    """The plan a compile produced, applied to a fresh trace, gives the same kernels and values."""
    fn, args, src = make_case(seed, device)
    try:
        first = compile_traced(fn, args, CompileOptions(strict=True, use_db=False))
        first(*args)
        (prog,) = first.compiled.programs.values()
        from autofuse.capture.trace import trace_aten
        from autofuse.compiler import compile_graph
        from autofuse.plan.apply import graph_key
        gm = trace_aten(fn, args)
        plan = None
        # rebuild the plan of the first compile from its artifacts
        art1 = compile_graph(first.graph, args, CompileOptions(strict=True, use_db=False))
        plan = art1.plan
        assert plan.graph_key == graph_key(gm, args)
        art2 = compile_graph(gm, args, CompileOptions(strict=True, use_db=False, plan=plan, poison=True))
        assert [k.source for k in art2.kernels] == [k.source for k in art1.kernels]
        out = art2.program(list(args))
        expected = fn(*args)
        assert_close(out if isinstance(expected, (list, tuple)) else out[0], expected)
    except Exception as e:  # noqa: BLE001
        _fail(seed, e, src)
