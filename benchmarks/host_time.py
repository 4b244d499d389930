"""Host time per call of a many-kernel graph: autofuse's step interpreter, its generated wrapper,
its whole call (Dynamo guards, AOTAutograd, CompiledGraph), and Inductor's.

The graph: a tiny transformer (`--layers` layers, hidden 32, 2×8 tokens), ~15 kernels and ~6 ATen
matmuls per layer. On the GPU, each variant runs back to back with one synchronize at the end
(wall per call), next to the profiler's GPU total per call; host time shows where wall exceeds the
GPU total. On the CPU, autofuse's launches are stubbed (a fake compiled kernel whose `run` does
nothing, through the same FastLauncher path the GPU takes), so the figures are host time of the
runtime itself: allocation, argument binding, the launch path, the ATen matmuls (tiny CPU ops).
Inductor on the CPU runs its real C++ kernels (tiny), so its figure is an upper bound of its host
time. `interpreter_with_scans` is the step interpreter plus a scan of the live buffers before each
storage reuse: the cost of a runtime that checks aliasing per call instead of at compile time.
Each figure is the fastest of 7 runs of `--calls` calls (a shared host disturbs the others).

    python -m benchmarks.host_time [--layers 12] [--calls 200] [--no-inductor] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import time
import warnings
from types import SimpleNamespace
from typing import Any, Callable

import torch
from torch import nn


class Layer(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, -1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax(q @ k.transpose(-1, -2) * (d // self.heads) ** -0.5, -1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


def model(layers: int, d: int = 32, heads: int = 4) -> nn.Module:
    return nn.Sequential(*[Layer(d, heads) for _ in range(layers)]).eval()


def per_call_us(fn: Callable[[], Any], calls: int, sync: Callable[[], None]) -> float:
    for _ in range(3):
        fn()
    sync()
    runs = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        runs.append((time.perf_counter() - t0) / calls * 1e6)
    return min(runs)


def gpu_us(fn: Callable[[], Any], calls: int) -> float:
    """The profiler's total of device kernel time per call."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return sum(e.self_device_time_total for e in prof.key_averages()) / calls


class _StubKernel:
    """A compiled kernel whose launch does nothing (the CPU stand-in for a GPU launch)."""

    function, packed_metadata = 0, 0

    @staticmethod
    def run(*args: Any) -> None:
        return None


class _StubJit:
    def run(self) -> None:  # marks a JIT function for FastLauncher
        raise AssertionError

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return lambda *a, **k: _StubKernel


def stub_launches(program: Any) -> None:
    """Route every kernel of `program` through FastLauncher's GPU path to a launch that does nothing,
    and rewrite its wrapper with those launchers."""
    from autofuse.runtime.launcher import FastLauncher
    from autofuse.runtime.program import KernelLaunch
    for step in program.steps:
        if isinstance(step, KernelLaunch):
            step._launch = FastLauncher(_StubJit(), torch.device("cuda", 0))
            step._launch._stream = lambda index: 0
    program._wrapper = None


def old_call(program: Any, args: list) -> list:
    """The step interpreter with a scan of the live slots before each storage reuse."""
    from autofuse.runtime.program import Alloc
    env = program.new_env(args)
    for step in program.steps:
        if isinstance(step, Alloc) and step.reuse is not None and env[step.reuse] is not None:
            ptr = env[step.reuse].untyped_storage().data_ptr()
            any(isinstance(e, torch.Tensor) and e.untyped_storage().data_ptr() == ptr for e in env)
        step.run(env)
    return [o(env) for o in program.outputs]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--no-inductor", action="store_true")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    warnings.filterwarnings("ignore", message="autofuse: running Triton kernels on the CPU")
    import autofuse
    from autofuse.api import Recorder
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float32
    m = model(a.layers).to(dev, dtype)
    x = torch.randn(2, 8, 32, device=dev, dtype=dtype)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if not cuda:
        torch.set_num_threads(1)  # tiny CPU matmuls: thread hand-offs would dominate them
    rec = Recorder()
    torch._dynamo.reset()
    f = autofuse.compile(m, recorder=rec, strategy="inductor")
    captured: dict[str, Any] = {}
    with torch.no_grad():
        f(x)
        (_, _, art), = rec.graphs
        prog = art.program
        inner = prog.wrapper.fn
        prog._wrapper = SimpleNamespace(
            fn=lambda args, steal=False: captured.setdefault("args", list(args)) and inner(args, steal))
        f(x)
        prog._wrapper = None
        if not cuda:
            stub_launches(prog)
        args = captured["args"]
        n_kernels = sum(1 for s in prog.steps if type(s).__name__ == "KernelLaunch")
        n_extern = sum(1 for s in prog.steps if type(s).__name__ == "ExternCall")
        res: dict[str, Any] = {"device": torch.cuda.get_device_name() if cuda else "cpu (launches stubbed)",
                               "layers": a.layers, "kernels": n_kernels, "aten_fallbacks": n_extern}
        res["interpreter_with_scans_us"] = per_call_us(lambda: old_call(prog, args), a.calls, sync)
        res["interpreter_us"] = per_call_us(lambda: prog.interpret(args), a.calls, sync)
        res["wrapper_us"] = per_call_us(lambda: prog(args), a.calls, sync)
        res["autofuse_call_us"] = per_call_us(lambda: f(x), a.calls, sync)
        res["above_program_us"] = res["autofuse_call_us"] - res["wrapper_us"]
        if cuda:
            res["autofuse_gpu_us"] = gpu_us(lambda: f(x), 20)
        if not a.no_inductor:
            torch._dynamo.reset()
            g = torch.compile(m, backend="inductor")
            g(x)
            res["inductor_call_us"] = per_call_us(lambda: g(x), a.calls, sync)
            if cuda:
                res["inductor_gpu_us"] = gpu_us(lambda: g(x), 20)
    for k, v in res.items():
        print(f"{k:>28}: {v:.1f}" if isinstance(v, float) else f"{k:>28}: {v}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(res, fh, indent=2)
    return res


if __name__ == "__main__":
    main()
