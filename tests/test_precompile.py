"""Kernels compile ahead of the first call on host threads (runtime/precompile.py), each distinct
kernel once: identical kernels (a model's repeated layers) share one source and one compile."""
from __future__ import annotations

import threading

import pytest
import torch
import torch.nn as nn

from autofuse.runtime.precompile import THREADS_ENV, compile_threads, precompile
from tests.helpers import assert_close, rand


class FakeLaunch:
    device = None

    def __init__(self, key: tuple | None, fail: bool = False) -> None:
        self.key, self.fail, self.warmed_on = key, fail, []

    def warm_key(self) -> tuple | None:
        return self.key

    def warm(self) -> None:
        self.warmed_on.append(threading.current_thread().name)
        if self.fail:
            raise RuntimeError("does not compile")


def test_each_distinct_kernel_is_warmed_once_on_pool_threads():
    a, a_again, b, cpu = FakeLaunch(("a",)), FakeLaunch(("a",)), FakeLaunch(("b",)), FakeLaunch(None)
    assert precompile([a, a_again, b, cpu], threads=4) == 2
    assert len(a.warmed_on) == 1 and a_again.warmed_on == [] and len(b.warmed_on) == 1 and cpu.warmed_on == []
    assert all(name.startswith("autofuse-compile") for name in a.warmed_on + b.warmed_on)


def test_a_failing_compile_is_left_to_the_launch():
    bad, good = FakeLaunch(("bad",), fail=True), FakeLaunch(("good",))
    assert precompile([bad, good], threads=2) == 2
    assert good.warmed_on and bad.warmed_on


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
