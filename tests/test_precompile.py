"""Kernels compile ahead of the first call on host threads (runtime/precompile.py), each distinct
kernel once: identical kernels (a model's repeated layers) share one source and one compile."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from autofuse.runtime.precompile import (THREADS_ENV, async_compile_mode, compile_threads, compiling_ahead,
                                         precompile)
from tests import helpers
from tests.helpers import assert_close, rand


class FakeLaunch:
    device = None

    def __init__(self, key: tuple | None, fail: bool = False) -> None:
        self.key, self.fail, self.warmed_on = key, fail, []

    def warm_key(self) -> tuple | None:
        return self.key

    def warm(self) -> None:
        from triton.runtime._async_compile import active_mode
        self.warmed_on.append(active_mode.get() is not None)  # inside Triton's asynchronous compile mode
        if self.fail:
            raise RuntimeError("does not compile")


needs_async = pytest.mark.skipif(async_compile_mode() is None, reason="this Triton has no AsyncCompileMode")


@needs_async
def test_each_distinct_kernel_is_warmed_once_in_async_compile_mode():
    a, a_again, b, cpu = FakeLaunch(("a",)), FakeLaunch(("a",)), FakeLaunch(("b",)), FakeLaunch(None)
    assert precompile([a, a_again, b, cpu], threads=4) == 2
    assert len(a.warmed_on) == 1 and a_again.warmed_on == [] and len(b.warmed_on) == 1 and cpu.warmed_on == []
    assert a.warmed_on == [True] and b.warmed_on == [True]


@needs_async
def test_a_failing_compile_is_left_to_the_launch():
    bad, good = FakeLaunch(("bad",), fail=True), FakeLaunch(("good",))
    assert precompile([bad, good], threads=2) == 2
    assert good.warmed_on and bad.warmed_on


@needs_async
def test_compiles_overlap_the_block_and_do_not_nest():
    """The tuner times candidates inside the block while the rest compile; a block inside a
    block (Triton's mode does not nest) compiles on first launch."""
    a, b, c = FakeLaunch(("a",)), FakeLaunch(("b",)), FakeLaunch(("c",))
    with compiling_ahead([a, b], threads=2) as submitted:
        assert submitted == 2 and a.warmed_on == [True] and b.warmed_on == [True]
        with compiling_ahead([c], threads=2) as inner:
            assert inner == 0 and c.warmed_on == []
    with compiling_ahead([c], threads=2) as one:   # one kernel is worth compiling ahead in the tuner
        assert one == 1 and c.warmed_on == [True]


def test_one_thread_or_one_kernel_compiles_on_first_launch():
    a, b = FakeLaunch(("a",)), FakeLaunch(("b",))
    assert precompile([a, b], threads=1) == 0 and precompile([a], threads=8) == 0
    assert a.warmed_on == [] and b.warmed_on == []


def test_thread_count_from_the_environment(monkeypatch):
    monkeypatch.setenv(THREADS_ENV, "3")
    assert compile_threads() == 3
    monkeypatch.setenv(THREADS_ENV, "zero")
    assert compile_threads() == 0
    monkeypatch.delenv(THREADS_ENV)
    assert 1 <= compile_threads() <= 8


class Layers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lins = nn.ModuleList(nn.Linear(96, 96) for _ in range(3))
        self.norms = nn.ModuleList(nn.LayerNorm(96) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for lin, norm in zip(self.lins, self.norms):
            x = torch.nn.functional.gelu(norm(lin(x)))
        return x


def test_repeated_layers_share_one_kernel(device):
    import autofuse
    from autofuse.api import Recorder
    torch._dynamo.reset()
    model = Layers().to(device)
    for n in model.norms:
        nn.init.normal_(n.weight)
        nn.init.normal_(n.bias)
    rec = Recorder()
    f = autofuse.compile(model, strict=True, recorder=rec)
    x = rand((37, 96), device=device)
    with torch.no_grad():
        assert_close(f(x), model(x))
    kernels = [k for _, _, art in rec.graphs for k in art.kernels if k.kind != "fallback"]
    assert len({k.name for k in kernels}) == len(kernels)  # each site keeps its own name in reports
    by_source = {}
    for k in kernels:
        by_source.setdefault(k.source, []).append(k)
    assert any(len(ks) == 3 for ks in by_source.values()), [k.name for k in kernels]
    launches = [s for _, _, art in rec.graphs for s in art.program.steps if hasattr(s, "arg_dtypes")]
    assert len({id(s.fn) for s in launches}) == len(by_source)  # one loaded function per distinct source
    assert all(len(s.arg_dtypes) == len(s.arg_slots) for s in launches)


@pytest.mark.gpu
def test_first_call_finds_every_kernel_compiled(device, monkeypatch):
    """After the warm-up, the first call compiles nothing more: each JIT holds one kernel."""
    import autofuse
    from autofuse.api import Recorder
    monkeypatch.setenv(THREADS_ENV, "4")
    torch._dynamo.reset()
    model = Layers().to(device)
    rec = Recorder()
    f = autofuse.compile(model, strict=True, recorder=rec)
    x = rand((4096, 96), device=device)
    with torch.no_grad():
        assert_close(f(x), model(x))
    fns = {id(s.fn): s.fn for _, _, art in rec.graphs for s in art.program.steps if hasattr(s, "arg_dtypes")}
    for fn in fns.values():
        kernels = sum(len(c[0]) for c in fn.device_caches.values())
        assert kernels == 1, (fn.__name__, kernels)


class FakeCudaDriver:
    """Triton's driver for an sm_90 GPU that is not there: enough for the JIT to compile (ptxas
    runs on the host), never to launch."""

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_current_target(self) -> object:
        from triton.backends.compiler import GPUTarget
        return GPUTarget("cuda", 90, 32)

    def get_active_torch_device(self) -> torch.device:
        return torch.device("cpu")


def _programs():
    """Kernels of several kinds: persistent and looped rows, a column sum, a scan, a transpose, a
    reduction with a reordered consumer, pooling windows, a row sort, a scatter's atomic adds, float8
    conversions."""
    def norm(x, w):
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), w) * 2

    def wide(x):
        return torch.softmax(x, -1)

    def columns(x):
        return x.sum(0) + 1

    def scan(x):
        return torch.cumsum(x.exp(), 1)

    def transpose(x):
        return (x.t() * 3).contiguous()

    def softmax_first(x):   # the output's loops reordered into the statistics' kernel
        return torch.softmax(x, 0)

    def sort(x):            # a row sort's bitonic network over int64 keys, a median read from it, a 64-bit sort
        return torch.sort(x * 2, dim=-1, descending=True), torch.median(x, 1), torch.sort((x * 8).long(), dim=0)

    def pools(x):           # window loads masked at the padding (-inf, 0)
        return (torch.nn.functional.max_pool2d(torch.relu(x), 3, 2, 1),
                torch.nn.functional.avg_pool2d(x, 3, 2, 1, count_include_pad=False))

    def float8(x):           # conversions to both float8 formats and a load of one
        return (x * 3).to(torch.float8_e4m3fn), (x * 100).to(torch.float8_e5m2).float() + 1

    def scatter_mean(x, i):  # atomic adds of values and of a constant count
        return (x + 1).scatter_reduce(0, i, x * 2, "mean", include_self=False)
    return [(norm, (rand((33, 200)), rand((200,)))), (wide, (rand((5, 9000)),)), (columns, (rand((3000, 17)),)),
            (scan, (rand((6, 300)),)), (transpose, (rand((300, 70)),)), (softmax_first, (rand((37, 5, 9)),)),
            (pools, (rand((2, 3, 11, 9)),)), (sort, (rand((6, 300)),)),
            (scatter_mean, (rand((30, 7)), torch.randint(0, 30, (30, 7), device=helpers.DEFAULT_DEVICE))), (float8, (rand((9, 70)),))]


def compiling_module(name, source, folder):
    """The module of a kernel's source, imported so that its JITFunctions compile (not the
    interpreter's), whatever mode the suite runs Triton in."""
    import importlib.util
    from autofuse.runtime.loader import interpret_env
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"{name}_{folder.name}", path)
    mod = importlib.util.module_from_spec(spec)
    with interpret_env(False):
        spec.loader.exec_module(mod)
    return mod


def compiling_twin(step, info, folder, **changes):
    """The launch step with its kernel loaded from source as a JITFunction that compiles (not the
    interpreter's), for no device (a stand-in driver compiles it); `changes` replace step fields."""
    import dataclasses
    mod = compiling_module(info.fn_name, info.source, folder)
    twin = dataclasses.replace(step, fn=getattr(mod, info.fn_name), device=None, **changes)
    twin._launch.enabled = True
    return twin


@needs_async
def test_warm_up_compiles_every_generated_kernel_for_sm90(tmp_path, monkeypatch):
    """The warm-up's arguments (dtypes for tensors, sizes, constexprs, warps, stages) fit every
    generated kernel's signature: each compiles once in the asynchronous mode, on host threads."""
    import autofuse
    from autofuse.api import Recorder
    from autofuse.runtime.steps import KernelLaunch
    from triton.runtime import driver
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    twins = []
    for fn, args in _programs():
        torch._dynamo.reset()
        rec = Recorder()
        with torch.no_grad():
            autofuse.compile(fn, strict=True, recorder=rec)(*args)
        for _, _, art in rec.graphs:
            infos = {k.name: k for k in art.kernels}
            for step in art.program.steps:
                if not isinstance(step, KernelLaunch):
                    continue
                twins.append(compiling_twin(step, infos[step.name], tmp_path / f"k{len(twins)}"))
    assert len({t.warm_key() for t in twins}) == len(twins) >= 7
    assert any("_sort_rows(" in t.fn.src for t in twins)   # the row sort's network among them
    assert any("_sort_rows_by(tl.where" in t.fn.src for t in twins)
    assert any("tl.atomic_add(" in t.fn.src for t in twins)
    assert any("_to_f8e5(" in t.fn.src for t in twins)
    monkeypatch.setattr(driver, "_active", FakeCudaDriver())   # restored after the test
    assert precompile(twins, threads=4) == len(twins)
    import triton
    older = tuple(int(v) for v in triton.__version__.split(".")[:2]) < (3, 7)
    for t in twins:
        cache = t.fn.device_caches[0][0]
        if older and not cache:   # Triton 3.6's asynchronous mode at times leaves a warm-up uncompiled (the
            t.warm()              # first launch compiles it): the kernel compiling at all is what is checked
        assert len(cache) == 1, t.name
        assert "cubin" in next(iter(cache.values())).asm, t.name


def test_compiler_prints_are_dropped_while_the_tuner_compiles_candidates(capsys):
    """Triton prints a failing kernel's whole PTX before raising; the tuner reports the error instead."""
    import sys

    from autofuse.runtime.precompile import compiler_prints_dropped
    with compiler_prints_dropped():
        print("PTX of a kernel ptxas rejected")
        print("kept", file=sys.stderr)
    print("after")
    out, err = capsys.readouterr()
    assert out == "after\n" and err == "kept\n"


def test_flex_attention_kernel_compiles_for_sm90(tmp_path, monkeypatch):
    """The fused flex attention forward's GPU source (its bodies: a captured tensor indexed by head
    and by a negative position, floor division and remainder in the mask) compiles for sm_90, in
    bf16 and f32, with the tiles the GPU launch uses; and its loop over a causal block mask's
    listed blocks (bound loaded at run time)."""
    import warnings

    import autofuse
    from autofuse.runtime.flex_attention import FlexForward, Launch
    from autofuse.runtime.steps import ExternCall
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    from triton.runtime import driver
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    slopes, bias = torch.rand(4), torch.rand(40, 40)
    mask = create_block_mask(lambda b, h, qi, ki: (qi // 8 >= ki // 8) | ((qi - ki) % 5 == 0), None, None, 40, 40,
                             device="cpu")
    causal = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, 4, 256, 256, device="cpu")
    score = lambda s, b, h, qi, ki: s * slopes[h] + bias[qi % 40, ki - 39]  # noqa: E731
    steps = []
    for dtype, d, n, block_mask in ((torch.bfloat16, 64, 40, mask), (torch.float32, 32, 40, mask),
                                    (torch.bfloat16, 128, 256, causal)):
        q = torch.rand(2, 4, n, d, dtype=dtype)
        torch._dynamo.reset()
        rec = autofuse.api.Recorder()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            autofuse.compile(lambda q: flex_attention(q, q, q, score_mod=score, block_mask=block_mask), strict=True,
                             use_db=False, recorder=rec)(q)
        steps += [(s.op, dtype, d, n) for _, _, art in rec.graphs for s in art.program.steps
                  if isinstance(s, ExternCall) and isinstance(s.op, FlexForward)]
    assert len(steps) == 3 and steps[2][0].sparsity is not None   # the causal mask's blocks are followed
    monkeypatch.setattr(driver, "_active", FakeCudaDriver())   # restored after the test
    for k, (fwd, dtype, d, n) in enumerate(steps):
        fn = getattr(compiling_module(fwd.kernel_name, fwd.source_for(False), tmp_path / f"flex{k}"), fwd.kernel_name)
        sp = fwd.sparsity
        lc = Launch.pick(d, dtype, False, sp)
        tensors = [dtype] * 4 + [torch.float32] * 2 + [torch.float32] * 2   # q, k, v, out, lse, max; two tables
        strides = [n * 4 * d, n * d, d, 1] * 4
        constexprs = dict(N=n, BLOCK_M=lc.block_m, BLOCK_N=lc.block_n, D=d, DV=d)
        if sp is not None:   # counts and indices of partial and full blocks; their sizes and blocks'
            tensors += [torch.int32] * 4
            constexprs.update(sp.constexprs(lc.block_n))
        compiled = fn.warmup(*tensors, *strides, 4, n, 1, 1, 0.125, grid=(1, 8),
                             num_warps=lc.num_warps, num_stages=lc.num_stages, **constexprs)
        assert "cubin" in compiled.asm
