"""The generated wrapper (runtime/wrapper.py) computes what the step interpreter and eager compute,
frees each buffer once, reuses storage only as the compiler planned, never reuses a buffer an ATen
fallback may alias, and keeps poisoned buffers poisoned."""
from __future__ import annotations

import re
from types import SimpleNamespace

import torch
import torch.fx
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from autofuse import CompileOptions
from autofuse.capture.trace import trace_aten
from autofuse.compiler import compile_graph
from autofuse.runtime.aliasing import may_alias
from autofuse.runtime.launcher import FastLauncher
from autofuse.runtime.program import Alloc, ExternCall
from tests.helpers import assert_close, rand, writes_over_operand

OPTS = CompileOptions(strict=True, use_db=False)


def _compile(gm, args, **kw):
    art = compile_graph(gm, args, OPTS.with_(**kw))
    assert art.program.wrapper is not None, "the program runs interpreted"
    return art.program


def _check(prog, gm, args):
    """Wrapper == interpreter == eager, twice (the second call runs on reused storage)."""
    expected = gm(*args)
    expected = list(expected) if isinstance(expected, (list, tuple)) else [expected]
    for _ in range(2):
        assert_close(prog(args), expected)
    assert_close(prog.interpret(args), expected)


def _lifetimes(source: str) -> tuple[set[str], set[str], set[str], dict[str, str]]:
    """(assigned, deleted, returned, donor of each reusing buffer) of a wrapper's locals."""
    assigned = set(re.findall(r"^\s+(b\d+) = ", source, re.M))
    deleted = {b for line in re.findall(r"^\s+del (.+)$", source, re.M) for b in re.findall(r"b\d+", line)}
    returned = set(re.findall(r"b\d+", re.search(r"return \[(.*)\]", source).group(1)))
    donors = dict(re.findall(r"^\s+(b\d+) = (?:_rt\()?(b\d+)\b", source, re.M))
    return assigned, deleted, returned, donors


def test_frees_and_reuses_as_planned():
    def fn(x, w):   # the softmax takes the relu's storage (the others write over their operands; the softmax
        h = torch.relu(x) @ w   # reads its row reversed, so it cannot)
        h = torch.softmax(h.flip(-1), -1) @ w
        h = torch.tanh(h) @ w
        return h * 2
    x, w = rand((16, 24)), rand((24, 24))
    gm = trace_aten(fn, [x, w])
    prog = _compile(gm, [x, w])
    planned = {(s.slot, s.reuse) for s in prog.steps if isinstance(s, Alloc) and s.reuse is not None}
    assert planned, "the chain should let a buffer take a freed one's storage"
    assigned, deleted, returned, donors = _lifetimes(prog.source)
    inputs = {f"b{s}" for s in prog.input_slots if s is not None}
    donors = {k: v for k, v in donors.items() if v not in inputs}
    assert {(int(r[1:]), int(d[1:])) for r, d in donors.items()} == planned
    for b in assigned - inputs - returned:
        assert b in deleted, f"{b} is never freed"
    assert not (deleted & returned)
    assert all(d in deleted for d in donors.values()), "a donor dies where its storage is taken"
    _check(prog, gm, [x, w])


def test_in_place_fallback_keeps_its_buffer_out_of_reuse():
    """add_ on an intermediate returns that buffer: it is an output, so a later kernel's buffer of the
    same size must not take its storage."""
    def fn(x):
        y = torch.relu(x) * 2
        y.add_(1)
        z = torch.exp(x) + 3
        return y, z
    x = rand((9, 33))
    gm = make_fx(fn)(x)
    assert any(n.target is torch.ops.aten.add_.Tensor for n in gm.graph.nodes)
    prog = _compile(gm, [x], strategy="none")  # separate kernels: the second could take the first's buffer
    assert not any(isinstance(s, Alloc) and s.reuse is not None for s in prog.steps)
    _check(prog, gm, [x])


def take_rows(t: torch.Tensor) -> torch.Tensor:
    """A fallback without a schema that returns a view of its argument."""
    return t[1:]


def _view_graph() -> torch.fx.GraphModule:
    g = torch.fx.Graph()
    x = g.placeholder("x")
    m = g.call_function(torch.ops.aten.mul.Tensor, (g.call_function(torch.ops.aten.relu.default, (x,)), 2.0))
    v = g.call_function(take_rows, (m,))
    e = g.call_function(torch.ops.aten.add.Tensor, (g.call_function(torch.ops.aten.exp.default, (x,)), 3.0))
    g.output((v, e, x))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def test_view_returned_by_a_fallback_and_an_input_as_outputs():
    x = rand((10, 7), noncontig=True)
    gm = _view_graph()
    prog = _compile(gm, [x], strategy="none")
    assert any(isinstance(s, ExternCall) and s.op is take_rows for s in prog.steps)
    assert not any(isinstance(s, Alloc) and s.reuse is not None for s in prog.steps)
    _check(prog, gm, [x])
    out = prog([x])
    assert out[2] is x
    assert out[0].untyped_storage().data_ptr() != out[1].untyped_storage().data_ptr()


def test_multiple_outputs_of_a_fallback():
    def fn(x, y):
        vals, idx = torch.sort((x * y) > 0, dim=-1, stable=True)   # bool: ATen's sort (lower/sort.py)
        return vals * 2 + idx, idx
    x, y = rand((5, 19)), rand((5, 19), noncontig=True)
    gm = trace_aten(fn, [x, y])
    prog = _compile(gm, [x, y])
    assert "r[1]" in prog.source
    _check(prog, gm, [x, y])


def test_poison_fills_fresh_buffers_and_reuses_nothing():
    def fn(x, w):
        h = torch.relu(x) @ w
        return (torch.sigmoid(h) @ w).sum(0) + 1
    x, w = rand((12, 20)), rand((20, 20))
    gm = trace_aten(fn, [x, w])
    prog = _compile(gm, [x, w], poison=True)
    allocs = [s for s in prog.steps if isinstance(s, Alloc)]
    assert allocs and all(s.poison and s.reuse is None for s in allocs)
    assert prog.source.count("_poison(") == len(allocs)
    _check(prog, gm, [x, w])


def test_schemas_say_which_ops_may_alias():
    aten = torch.ops.aten
    assert may_alias(aten.add_.Tensor) and may_alias(aten.t.default) and may_alias(aten._unsafe_view.default)
    assert may_alias(take_rows)
    assert not may_alias(aten.mm.default) and not may_alias(aten.clone.default)


class _FakeJit:
    """A Triton JIT function stand-in: `fn[grid](...)` 'compiles' and returns the compiled kernel."""

    def __init__(self) -> None:
        self.jit_calls: list[tuple] = []
        self.kernel = SimpleNamespace(function="f", packed_metadata="m", runs=[])
        self.kernel.run = lambda *a: self.kernel.runs.append(a)

    def run(self) -> None:  # marks the object as a JIT function for FastLauncher
        raise AssertionError

    def __getitem__(self, grid):
        def call(*args, **kw):
            self.jit_calls.append((grid, args, kw))
            return self.kernel
        return call


def test_bound_launch_compiles_once_per_alignment_of_the_unplanned_tensors():
    fake = _FakeJit()
    launcher = FastLauncher(fake, torch.device("cuda", 0))
    assert launcher.enabled
    go = launcher.bind((3, 2), ("ws", 10), {"XBLOCK": 4}, 4, 1, static_aligned=[True, False])
    base = torch.zeros(64)
    a, b = torch.zeros(8), base[1:9]  # b: 4 bytes past a 16-byte boundary
    go("s", a, base[:8])
    go("s", a, base[:8])
    go("s", a, b)
    go("s", a, b)
    assert len(fake.jit_calls) == 2, "one compile per alignment pattern of the unplanned tensor"
    grid, args, kw = fake.jit_calls[0]
    assert grid == (3, 2) and args[2:] == ("ws", 10) and kw == {"XBLOCK": 4, "num_warps": 4, "num_stages": 1}
    assert len(fake.kernel.runs) == 2
    run = fake.kernel.runs[-1]
    assert run[:9] == (3, 2, 1, "s", "f", "m", None, None, None)
    assert run[9] is a and run[10] is b and run[11:] == ("ws", 10, 4)
    assert launcher.compiled_stats() is None  # the fake kernel has no register counts


def test_gpu_launch_path_with_stub_kernels():
    """The wrapper a GPU program gets (stream once per call, bound launchers), run on the CPU with
    kernels whose launch only records: each call launches every kernel once, with the interpreter's
    tensors (shapes and strides) in the same order."""
    from autofuse.runtime.program import KernelLaunch
    def fn(x, w):
        return (torch.relu(x) @ w).softmax(-1) * 2
    x, w = rand((6, 10)), rand((10, 12))
    prog = _compile(trace_aten(fn, [x, w]), [x, w])
    launches = [s for s in prog.steps if isinstance(s, KernelLaunch)]
    fakes = []
    for step in launches:
        fakes.append(_FakeJit())
        step._launch = FastLauncher(fakes[-1], torch.device("cuda", 0))
        step._launch._stream = lambda index: f"stream{index}"
    prog._wrapper = None
    assert "st0 = " in prog.source and "_hooks_set()" in prog.source
    prog([x, w])  # compiles: one JIT call per kernel
    prog([x, w])
    assert [len(f.jit_calls) for f in fakes] == [1] * len(launches)
    for step, fake in zip(launches, fakes):
        (run,) = fake.kernel.runs
        assert run[3] == "stream0" and run[:2] == (step._grid[0], 1)
        _, jit_args, _ = fake.jit_calls[0]
        tensors = run[9:9 + len(step.arg_slots)]
        assert [(t.shape, t.stride()) for t in tensors] == [(t.shape, t.stride()) for t in jit_args[:len(tensors)]]


def test_explain_reports_the_wrapper_source():
    import autofuse
    from tests.helpers import seed_fn
    args = (rand((8, 12)), rand((12,)), rand((12,)), rand((12,)))
    report = autofuse.explain(seed_fn, args, strategy="inductor")
    (src,) = report.wrapper_sources
    assert src.startswith("def wrapper(args, steal=False):") and report.kernels[0].name in src


def test_a_program_without_a_wrapper_runs_its_steps(monkeypatch):
    import pytest

    import autofuse.runtime.wrapper as wrapper

    def broken(program):
        raise ValueError("cannot write this step")
    monkeypatch.setattr(wrapper, "generate", broken)
    x, w = rand((6, 10)), rand((10, 12))
    gm = trace_aten(lambda x, w: torch.relu(x @ w) + 1, [x, w])
    with pytest.warns(UserWarning, match="no wrapper"):
        art = compile_graph(gm, [x, w], OPTS)
    assert art.program.wrapper is None and art.program.source == ""
    assert_close(art.program([x, w]), [gm(x, w)])


def test_cuda_allocations_inline_behind_one_device_check_per_call(monkeypatch):
    """A buffer on a CUDA device is allocated by the C++ call written into the wrapper, behind one
    current-device check per call; on another current device each allocation takes its own path
    (which names the device). Run on the CPU with both calls stubbed."""
    import autofuse.runtime.wrapper as wrapper
    from autofuse.ir.values import Layout

    def fn(x):
        return (x * 2).sum(-1)
    x = rand((6, 10), device="cpu")  # the CUDA calls are stubbed with CPU tensors, on any test device
    prog = _compile(trace_aten(fn, [x]), [x])
    allocs = [s for s in prog.steps if isinstance(s, Alloc) and s.reuse is None]
    assert allocs
    made = []

    def fake_cuda(size, stride, dtype):
        made.append(("inline", size))
        return torch.empty_strided(size, stride, dtype=dtype)
    current = {"device": 0}
    monkeypatch.setattr(wrapper, "_empty_strided_cuda", fake_cuda)
    monkeypatch.setattr(wrapper, "_current_device", lambda: current["device"])
    for s in allocs:
        lay = s.layout
        s.layout = Layout(torch.device("cuda", 0), lay.dtype, lay.size, lay.stride, lay.offset)
        own = s._new
        s._new = (lambda own=own, size=tuple(lay.size): made.append(("own", size)) or own())
    prog._wrapper = None
    src = prog.source
    assert src.count("ondev0 = _getdev() == 0") == 1 and src.count("_esc(") == len(allocs)
    expected = fn(x)
    assert_close(prog([x])[0], expected)
    assert [k for k, _ in made] == ["inline"] * len(allocs)
    made.clear()
    current["device"] = 1
    assert_close(prog([x])[0], expected)
    assert [k for k, _ in made] == ["own"] * len(allocs)


def test_a_buffer_calls_view_one_way_is_allocated_in_that_view():
    """Channels-last convolutions: the activation between them is computed in NHWC memory order and
    handed to the next convolution as an NCHW view with channels-last strides; the wrapper allocates
    it in that view's layout, so the call takes the buffer itself, with no view made per call."""
    import autofuse
    from autofuse.api import Recorder
    from autofuse.runtime.wrapper import viewed_layouts
    from autofuse.schedule.heuristics import Heuristics
    torch.manual_seed(0)
    c1, c2 = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(8, 4, 3)

    def fn(x):
        return c2(torch.relu(c1(x)) * 2)
    x = rand((2, 3, 9, 11), device="cpu")
    torch._dynamo.reset()
    rec = Recorder()
    f = autofuse.compile(fn, strict=True, use_db=False, poison=True, recorder=rec,
                         heuristics=Heuristics(conv_layout="channels_last"))
    with torch.no_grad():
        assert_close(f(x), fn(x))
    program = rec.graphs[0][2].program
    viewed = viewed_layouts(program)
    assert viewed and all(not lay.is_contiguous() for lay in viewed.values())
    calls = [line for line in program.source.splitlines() if "# extern" in line]
    assert calls and not any(f"_rt(b{slot}," in line for line in calls for slot in viewed)


def test_outputs_that_view_one_value_share_its_storage(device):
    """y with y[0] and y.view(-1), or two views of an intermediate: eager returns views of one
    buffer, and an in-place update of one returned tensor shows in the others; so here."""
    import autofuse

    def base_and_views(x):
        y = x * 2 + 1
        return y, y[0], y.view(-1), y[:, 1:4]

    def two_views(x):
        y = torch.sigmoid(x) - 0.5
        return y.t(), y.unsqueeze(0)

    def pieces(x):   # unbind and split return several views, taken apart by getitem
        y = torch.cos(x) * 3
        a, *_ = y.unbind(0)
        _, c = y.split([4, 5], dim=1)
        return y, a, c

    for fn in (base_and_views, two_views, pieces):
        torch._dynamo.reset()
        x = rand((6, 9), device=device)
        got = autofuse.compile(fn, strict=True, poison=True)(x)
        want = fn(x)
        for g, w in zip(got, want):
            assert_close(g, w)
            assert g.stride() == w.stride()
        assert len({g.untyped_storage().data_ptr() for g in got}) == 1
        got[0].mul_(0)
        want[0].mul_(0)
        for g, w in zip(got, want):
            assert_close(g, w)


def test_overloads_taking_dimension_names_leave_the_binding_to_the_default():
    """Overloads that take a Dimname (torch 2.11's `cat.names`) are chosen by string dims only, which
    a traced graph never holds; an overload of other argument types could be chosen instead."""
    from types import SimpleNamespace

    from autofuse.runtime.wrapper import binding_resolves_to_default

    def schema(*types, optional=False):
        return SimpleNamespace(_schema=SimpleNamespace(arguments=[
            SimpleNamespace(type=t, has_default_value=lambda: optional and t.startswith("Dimname")) for t in types]))

    def packet(**overloads):
        return SimpleNamespace(overloads=lambda: ["default", *overloads], **overloads)
    names, ints = schema("Tensor[]", "Dimname"), schema("Tensor", "int[1]?")
    assert binding_resolves_to_default(packet(out=ints, names=names, names_out=names))
    assert not binding_resolves_to_default(packet(names=names, dim_IntList=ints))
    # names that default to None: a call without them could resolve to that overload
    assert not binding_resolves_to_default(packet(names=schema("Tensor", "Dimname[]?", optional=True)))
    assert binding_resolves_to_default(torch.ops.aten.mm)
    assert not binding_resolves_to_default(torch.ops.aten.sum)   # sum.dim_IntList


def test_aten_calls_take_the_torch_binding_where_it_resolves_to_the_same_overload():
    from autofuse.runtime.wrapper import direct_callable
    aten = torch.ops.aten
    assert direct_callable(aten.convolution.default) is torch._C._VariableFunctions.convolution
    assert direct_callable(aten.mm.default) is torch._C._VariableFunctions.mm   # its dtype overload needs out_dtype
    # several overloads a binding could pick between by argument types: the overload's own callable
    assert direct_callable(aten.add.Tensor) is aten.add.Tensor._op
    assert direct_callable(aten.sort.default) is aten.sort.default._op
    x, w = torch.randn(2, 3, 5, 4), torch.randn(6, 3, 3, 3)
    args = (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    torch.testing.assert_close(direct_callable(aten.convolution.default)(*args), aten.convolution.default(*args),
                               rtol=0, atol=0)


def _extern_ops(prog) -> list:
    return [s.op for s in prog.steps if isinstance(s, ExternCall)]


def test_a_scatter_into_a_buffer_nothing_else_reads_updates_it_in_place():
    """scatters run as ATen calls into a fresh buffer call the in-place form (no copy of
    the buffer); a buffer also read elsewhere, returned, or an input keeps the functional form."""
    aten = torch.ops.aten
    src, x = rand((5, 9)), rand((7, 9))
    # distinct rows in each column: which of two writes to one element lands is undefined
    idx = torch.rand(7, 9, generator=torch.Generator().manual_seed(0)).argsort(0)[:5].to(src.device)

    # (scatter_reduce's prod has no atomic form: it runs as the ATen call)
    def fresh(src, idx):
        return torch.zeros(7, 9, device=src.device).scatter_reduce(0, idx, src, "prod") * 2

    def read_twice(src, idx):
        z = torch.zeros(7, 9, device=src.device) + 1
        return z.scatter_reduce(0, idx, src, "prod") + z

    def returned(src, idx):
        z = torch.zeros(7, 9, device=src.device) + 1
        return z.scatter_reduce(0, idx, src, "prod"), z

    def of_input(x, src, idx):
        return x.scatter_reduce(0, idx, src, "prod")

    def overwrite(x, src, idx):
        return torch.relu(x).scatter_reduce(0, idx, src, "prod")

    for fn, args, op in [(fresh, [src, idx], aten.scatter_reduce_.two),
                         (read_twice, [src, idx], aten.scatter_reduce.two),
                         (returned, [src, idx], aten.scatter_reduce.two),
                         (of_input, [x, src, idx], aten.scatter_reduce.two),
                         (overwrite, [x, src, idx], aten.scatter_reduce_.two)]:
        gm = trace_aten(fn, args)
        prog = _compile(gm, args)
        assert _extern_ops(prog) == [op], (fn.__name__, _extern_ops(prog))
        _check(prog, gm, args)


_ALIVE: list = []   # (the weak reference to watch, what each call of the op below saw)


@torch.library.custom_op("autofuse_tests::input_alive", mutates_args=())
def _input_alive(x: torch.Tensor) -> torch.Tensor:
    _ALIVE[1].append(_ALIVE[0]() is not None)
    return x * 2


@_input_alive.register_fake
def _(x):
    return torch.empty_like(x)


def test_a_handed_over_input_is_freed_after_its_last_use():
    """AOTAutograd hands a graph its argument list (a backward graph's saved activations): the
    wrapper empties it and drops each input after its last read, so an input is gone while the
    steps after that read run, as with Inductor."""
    import weakref

    from autofuse.capture.backend import CompiledGraph

    def fn(a, b):
        return _input_alive(torch.sin(a) + b) + b

    a, b = rand((5, 7)), rand((5, 7))
    expected = torch.sin(a) * 2 + 3 * b
    cg = CompiledGraph(trace_aten(fn, [a, b]), OPTS, "backward")
    _ALIVE[:] = [weakref.ref(a), []]
    handed = [a, b]
    del a
    out = cg(handed)
    assert handed == [] and _ALIVE[1] == [False], "the first input outlived its last read"
    assert_close(out[0], expected)
    kept = [rand((5, 7)), rand((5, 7))]   # a caller that keeps its list (the search, probes)
    _ALIVE[:] = [weakref.ref(kept[0]), []]
    prog = next(iter(cg.programs.values()))
    assert_close(prog(kept)[0], torch.sin(kept[0]) * 2 + 3 * kept[1])
    assert len(kept) == 2 and _ALIVE[1] == [True]


def test_a_training_step_calls_its_graphs_boxed():
    """Dynamo wraps the backward compiler; the boxed-call mark must survive the wrapping, or
    AOTAutograd warns and calls the backward with its saved activations held to the end."""
    import warnings

    x = rand((3, 8))
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).to(x.device)
    compiled = torch.compile(m, backend="autofuse")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled(x).sum().backward()
    assert not [w for w in caught if "boxed" in str(w.message)]
    grads = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    m(x).sum().backward()
    for g, p in zip(grads, m.parameters()):
        assert_close(g, p.grad)


def _held_beside_aten_results(prog) -> list[str]:
    """Buffers held for a later taker across an ATen call whose result they could hold."""
    from autofuse.compiler import SMALL_BLOCK_BYTES
    from autofuse.runtime.wrapper import reads_of
    from autofuse.schedule.nodes import itemsize
    steps, found = prog.steps, []
    layouts = {s.slot: s.layout for s in steps if isinstance(s, Alloc)}
    for at, s in enumerate(steps):
        if not (isinstance(s, Alloc) and s.reuse is not None):
            continue
        last_read = max(i for i, t in enumerate(steps[:at]) if s.reuse in reads_of(t) and not isinstance(t, Alloc))
        held = layouts[s.reuse].storage_span() * itemsize(layouts[s.reuse].dtype)
        for t in steps[last_read + 1:at]:
            if isinstance(t, ExternCall) and held > SMALL_BLOCK_BYTES and held >= max(
                    lay.storage_span() * itemsize(lay.dtype) for lay in t.out_layouts.values()):
                found.append(f"slot {s.reuse} beside {t.name}")
    return found


def test_no_dead_buffer_waits_for_its_taker_beside_an_aten_result_it_could_hold():
    """A freed buffer an allocation will take later is held until then; an ATen call in between
    allocates its own result, so a held buffer that could hold that result is freed before it (a
    transformer MLP: one layer's activation beside the next layer's first product, ConvNeXt's
    peak at twice torch.compile's; a softmax of reversed rows here, since a GELU or a plain
    softmax writes over its product). A held
    buffer smaller than the results in between is still taken, as is one the allocator would keep
    among its small blocks."""
    def mlp(x, w1, w2):
        h = torch.softmax((x @ w1).flip(-1), -1)
        y = h @ w2 + x
        return torch.softmax((y @ w1).flip(-1), -1) @ w2

    def narrow(x, w1, w2):
        h = torch.sigmoid(x) * x
        a = h @ w1
        return (torch.tanh(a[:, :16]) * 2) @ w1

    for rows, fn, reused in ((2048, mlp, False), (2048, narrow, True), (64, mlp, True)):
        x, w1, w2 = rand((rows, 16)), rand((16, 192)) / 4, rand((192, 16)) / 14   # 2048 rows: 1.5 MiB per GELU
        gm = trace_aten(fn, [x, w1, w2])
        prog = _compile(gm, [x, w1, w2])
        assert not _held_beside_aten_results(prog), fn.__name__
        assert any(isinstance(s, Alloc) and s.reuse is not None for s in prog.steps) == reused, (rows, fn.__name__)
        _check(prog, gm, [x, w1, w2])


def test_no_dead_buffer_is_held_across_the_peak_or_to_the_end():
    """A dead buffer waits for a later allocation of its size only where the program's peak does
    not fall inside the wait, and one that nothing takes is freed when it dies, not at the end:
    ConvNeXt's channels-last input copy, held for a stage-2 activation of its size, sat beside
    every MLP expansion of stage 1."""
    from autofuse.compiler import SMALL_BLOCK_BYTES, live_bytes
    from autofuse.runtime.program import Free
    from autofuse.runtime.wrapper import reads_of
    from autofuse.schedule.nodes import itemsize

    def fn(x, w1, w3):
        z = torch.exp(x[:, :16]) @ w3                  # a value no allocation of its size follows
        a = torch.sigmoid(x) * x                       # [2048, 192]: 1.5 MiB, dead after the product
        k = torch.softmax((a @ w1).flip(-1), -1)       # its statistics beside the 8 MiB product: the peak
        return k[:, :192] * 2, z                       # [2048, 192] again: could take a's storage

    x, w1, w3 = rand((2048, 192)), rand((192, 1024)) / 14, rand((16, 8))
    gm = trace_aten(fn, [x, w1, w3])
    prog = _compile(gm, [x, w1, w3])
    steps = prog.steps
    live = live_bytes(steps)
    peak = max(range(len(steps)), key=live.__getitem__)
    freed = {slot for s in steps if isinstance(s, Free) for slot in s.slots}
    for at, s in enumerate(steps):
        if isinstance(s, Alloc) and s.reuse is not None:
            died = max(i for i, t in enumerate(steps[:at]) if s.reuse in reads_of(t) and not isinstance(t, Alloc))
            held = s.layout.storage_span() * itemsize(s.layout.dtype)
            assert not (died < peak < at and held > SMALL_BLOCK_BYTES), (s.reuse, died, peak, at)
    allocated = {s.slot for s in steps if isinstance(s, Alloc)}
    taken = {s.reuse for s in steps if isinstance(s, Alloc) and s.reuse is not None}
    returned = {o.slot for o in prog.outputs if hasattr(o, "slot")}
    assert allocated - taken - returned <= freed, allocated - taken - returned - freed
    _check(prog, gm, [x, w1, w3])


class _LayerNorm2d(torch.nn.LayerNorm):
    def forward(self, x):
        return F.layer_norm(x.permute(0, 2, 3, 1), self.normalized_shape, self.weight, self.bias).permute(0, 3, 1, 2)


class _ConvNeXtBlock(torch.nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.dw = torch.nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = torch.nn.LayerNorm(c)
        self.up, self.down = torch.nn.Linear(c, 4 * c), torch.nn.Linear(4 * c, c)
        self.scale = torch.nn.Parameter(torch.rand(c, 1, 1))

    def forward(self, x):
        y = self.down(F.gelu(self.up(self.norm(self.dw(x).permute(0, 2, 3, 1))))).permute(0, 3, 1, 2)
        return x + self.scale * y


def test_a_value_stored_channels_last_is_read_from_its_buffer():
    """A lazy value stored channels-last for a convolution is read from that buffer by the graph's
    other kernels: a ConvNeXt block's output, stored for the next block's depthwise convolution,
    was recomputed in the next block's residual add from the block's input and its MLP's output,
    which kept both alive across the next MLP's expansion."""
    from autofuse.schedule.heuristics import Heuristics

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 4, 4), _LayerNorm2d(8), _ConvNeXtBlock(8), _ConvNeXtBlock(8),
                            _LayerNorm2d(8), torch.nn.Conv2d(8, 16, 2, 2), _ConvNeXtBlock(16), _ConvNeXtBlock(16),
                            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10))
    x = rand((2, 3, 32, 32))
    m = m.to(x.device)
    params = dict(m.named_parameters())
    names = list(params)

    def fn(*flat):
        return torch.func.functional_call(m, dict(zip(names, flat[:-1])), (flat[-1],))

    args = [p.detach() for p in params.values()] + [x]
    gm = trace_aten(fn, args)
    prog = _compile(gm, args, heuristics=Heuristics(conv_layout="channels_last"))
    stem_norm = next(k for k in prog.kernels if k.kind == "reduction").writes[0]
    readers = [k.name for k in prog.kernels if stem_norm in k.reads]
    assert len(readers) <= 2, readers   # the first block's depthwise convolution and its residual add
    _check(prog, gm, args)


def test_a_pointwise_kernel_writes_over_an_operand_that_dies_in_it(device):
    """A GELU after the product that made its input stores over that input instead of into a new
    buffer (as torch.compile's wrappers reuse it): nothing is allocated beside the products'
    results. Not where the kernel reads the operand at another element than the one it writes, nor
    where the operand is read after it or returned."""
    def mlp(x, w1, w2):
        return F.gelu(x @ w1) @ w2 + x

    def viewed(x, w1, w2):   # the GELU's output has the shape of a view of the product
        return F.gelu((x @ w1).view(67, 4, 13)) @ w2[:13]

    def shifted(x, w1, w2):
        y = x @ w1
        return (torch.tanh(y) + y.flip(0)) @ w2

    def returned(x, w1, w2):
        y = x @ w1
        return torch.tanh(y) @ w2, y

    def read_later(x, w1, w2):
        y = x @ w1
        return torch.tanh(y) @ w2, y @ w2

    x, w1, w2 = rand((67, 16), device=device), rand((16, 52), device=device) / 4, rand((52, 16), device=device) / 7
    for fn, over in ((mlp, True), (viewed, True), (shifted, False), (returned, False), (read_later, False)):
        gm = trace_aten(fn, [x, w1, w2])
        prog = _compile(gm, [x, w1, w2])
        assert writes_over_operand(prog) == over, fn.__name__
        if fn is mlp:
            assert not any(isinstance(s, Alloc) for s in prog.steps), prog.source
        _check(prog, gm, [x, w1, w2])
