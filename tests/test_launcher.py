"""The direct launch path (runtime/launcher.py) launches the same compiled kernels the JIT would:
repeated calls, views whose data pointers lose 16-byte alignment, split reductions, and a kernel
launched while a launch hook is set all compute eager's values."""
from __future__ import annotations

import pytest
import torch

from autofuse.runtime.launcher import FastLauncher
from tests.helpers import assert_close, compile_and_compare, rand


def test_cpu_kernels_take_the_jit_path():
    assert not FastLauncher(object(), torch.device("cpu")).enabled
    assert not FastLauncher(object(), None).enabled


def test_compiled_stats_read_the_loaded_kernel():
    """What the GPU loader reports (registers, spill words, shared) is handed out in bytes; nothing
    before a compiled launch or for a kernel without those attributes."""
    from types import SimpleNamespace
    launcher = FastLauncher(object(), torch.device("cpu"))
    assert launcher.compiled_stats() is None
    launcher.kernels[(True,)] = SimpleNamespace(n_regs=40, n_spills=3, metadata=SimpleNamespace(shared=1024))
    assert launcher.compiled_stats() == {"registers": 40.0, "local_bytes": 12.0, "shared_bytes": 1024.0}
    launcher.kernels[(True,)] = object()
    assert launcher.compiled_stats() is None


@pytest.mark.gpu
def test_compiled_stats_after_a_gpu_launch(device):
    from autofuse.api import Recorder
    from tests.helpers import seed_fn
    import autofuse
    torch._dynamo.reset()
    rec = Recorder()
    f = autofuse.compile(seed_fn, strategy="inductor", recorder=rec)
    args = (rand((64, 100), device=device), rand((100,), device=device), rand((100,), device=device),
            rand((100,), device=device))
    with torch.no_grad():
        f(*args)
    launches = [s for s in rec.graphs[0][2].program.steps if hasattr(s, "_launch")]
    stats = [s.compiled_stats() for s in launches]
    assert stats and all(st is not None and 0 < st["registers"] <= 255 and st["local_bytes"] >= 0 for st in stats)


@pytest.mark.gpu
def test_repeated_and_misaligned_launches(device):
    fn = lambda x, y: torch.relu(x * y + 1).sum(-1)  # noqa: E731
    base = rand((65, 257), device=device)
    y = rand((257,), device=device)
    compiled = compile_and_compare(fn, (base[1:], y))
    for k in range(4):  # the same specialization (shape, strides) at different alignments, many times
        x = base[k % 2:][:64]
        for _ in range(3):
            assert_close(compiled(x, y)[0], fn(x, y))


@pytest.mark.gpu
def test_split_reduction_launches(device):
    import dataclasses

    import autofuse
    from autofuse.api import Recorder
    from autofuse.plan.plan import KernelPlan
    x = rand((4099, 33), device=device)
    rec = Recorder()
    torch._dynamo.reset()
    autofuse.compile(lambda t: t.sum(0), strategy="inductor", recorder=rec)(x)
    plan = rec.graphs[0][2].plan
    k = plan.kernels[0]
    cfg = dataclasses.replace(k.config, split=8, persistent=False, RBLOCK=64, XBLOCK=32)
    torch._dynamo.reset()
    f = autofuse.compile(lambda t: t.sum(0), plan=dataclasses.replace(plan, kernels=(KernelPlan(k.nodes, cfg),)))
    for _ in range(3):
        assert_close(f(x), x.sum(0), atol=1e-3, rtol=1e-4)


@pytest.mark.gpu
def test_launch_hook_takes_the_jit_path(device):
    from triton import knobs
    seen = []
    fn = lambda x: torch.exp(x) * 2  # noqa: E731
    x = rand((1000,), device=device)
    compiled = compile_and_compare(fn, (x,))
    old = knobs.runtime.launch_enter_hook
    knobs.runtime.launch_enter_hook = lambda *a: seen.append(1)
    try:
        assert_close(compiled(x)[0], fn(x))
    finally:
        knobs.runtime.launch_enter_hook = old
    assert seen


@pytest.mark.gpu
def test_cudagraphs_option_replays_correctly(device):
    import autofuse
    from tests.helpers import seed_fn
    torch._dynamo.reset()
    f = autofuse.compile(seed_fn, strategy="inductor", cudagraphs=True)
    for k in range(3):
        args = (rand((64, 100), device=device), rand((100,), device=device), rand((100,), device=device),
                rand((100,), device=device))
        with torch.no_grad():
            assert_close(f(*args).clone(), seed_fn(*args))


def test_hook_chains_count_as_set_only_when_not_empty():
    from types import SimpleNamespace

    from autofuse.runtime.launcher import _hooked
    assert not _hooked(None)
    assert not _hooked(SimpleNamespace(calls=[]))  # Triton >= 3.5: an empty HookChain, never None
    assert _hooked(SimpleNamespace(calls=[print]))
    assert _hooked(print)  # older Triton: the hook itself


@pytest.mark.gpu
def test_fast_path_is_taken_after_the_first_launch(device):
    """Steady-state calls launch the compiled kernel directly: Triton's JIT `run` is not called."""
    from autofuse.api import Recorder
    from tests.helpers import seed_fn
    import autofuse
    torch._dynamo.reset()
    rec = Recorder()
    f = autofuse.compile(seed_fn, strategy="inductor", recorder=rec)
    make = lambda: (rand((64, 100), device=device), rand((100,), device=device), rand((100,), device=device),  # noqa: E731
                    rand((100,), device=device))
    with torch.no_grad():
        f(*make())
        launches = [s for s in rec.graphs[0][2].program.steps if hasattr(s, "_launch")]
        assert launches and all(s._launch.enabled and s._launch.cached >= 1 for s in launches)
        jit_calls = []
        for s in launches:
            real = s._launch.fn.run
            s._launch.fn.run = lambda *a, _real=real, **k: (jit_calls.append(1), _real(*a, **k))[1]
        try:
            for _ in range(4):
                args = make()
                assert_close(f(*args), seed_fn(*args))
        finally:
            for s in launches:
                del s._launch.fn.run
    assert jit_calls == []


def test_allocator_gives_the_layout(device):
    """runtime.program.allocator: CUDA buffers through torch's C++ fast path, others through
    empty_strided; either way the size, stride, dtype and device the program was compiled for."""
    from autofuse.ir.values import Layout
    from autofuse.runtime.program import allocator
    for lay in (Layout(torch.device(device), torch.bfloat16, (3, 5), (1, 3)),
                Layout.contiguous(torch.device(device), torch.float32, (7, 2, 4))):
        t = allocator(lay)()
        assert (tuple(t.shape), tuple(t.stride()), t.dtype, t.device.type) == (lay.size, lay.stride, lay.dtype,
                                                                                 lay.device.type)
