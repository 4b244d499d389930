"""Input updates kept in the graph (BatchNorm's running statistics, a buffer a model writes): all
of a graph's updates run as one multi-tensor copy at its end, and the caller's tensors hold eager's
values after every call."""
from __future__ import annotations

import copy

import pytest
import torch

from autofuse import CompileOptions
from autofuse.api import Recorder
from autofuse.capture.backend import make_backend
from autofuse.capture.fresh import compile_fresh

from .helpers import assert_close, rand


def _compiled(model: torch.nn.Module, **kw):
    recorder = Recorder()
    options = CompileOptions(strict=True, use_db=False, recorder=recorder, **kw)
    return compile_fresh(model, make_backend(options), dynamic=False), recorder


def _updates(recorder: Recorder, label: str) -> list:
    arts = [a for lab, _, a in recorder.graphs if lab == label]
    assert arts, [lab for lab, _, _ in recorder.graphs]
    return [k for a in arts for k in a.kernels if k.kind == "fallback" and "copy_" in k.aten_ops]


def _matches_eager(model: torch.nn.Module, shape: tuple, calls: int = 3, **kw) -> Recorder:
    """Run the compiled model and a copy of it eagerly on `calls` random inputs of `shape` (no grad):
    outputs and buffers equal after each call. Returns the compile's recorder."""
    ref = copy.deepcopy(model)
    compiled, recorder = _compiled(model, **kw)
    with torch.no_grad():
        for _ in range(calls):
            x = rand(shape)
            assert_close(compiled(x), ref(x))
            for b, c in zip(model.buffers(), ref.buffers()):
                assert_close(b, c)
    return recorder


def test_batchnorm_training_statistics_in_one_copy():
    """Three BatchNorms in training mode: nine running-statistics updates. The f32 means and variances,
    computed by reduction kernels, run as one multi-tensor copy; the int64 batch counts are stored by
    the kernels that increment them;
    statistics, outputs and grads equal eager's after three steps (non-power-of-two channels)."""
    torch.manual_seed(0)
    x = rand((6, 3, 9, 7))
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 5, 3), torch.nn.BatchNorm2d(5), torch.nn.ReLU(),
        torch.nn.Conv2d(5, 7, 3), torch.nn.BatchNorm2d(7), torch.nn.SiLU(),
        torch.nn.Flatten(), torch.nn.BatchNorm1d(7 * 5 * 3)).to(x.device).train()
    ref = copy.deepcopy(model)
    compiled, recorder = _compiled(model)
    for _ in range(3):
        out = compiled(x)
        out.square().mean().backward()
        expected = ref(x)
        expected.square().mean().backward()
        assert_close(out, expected, atol=1e-4, rtol=1e-4)
    for b, c in zip(model.buffers(), ref.buffers()):
        torch.testing.assert_close(b, c, rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4)
    updates = _updates(recorder, "forward")
    assert len(updates) == 1 and all(k.aten_ops == ("copy_",) for k in updates)


class _Cache(torch.nn.Module):
    """A buffer written through a slice, then read: the output sees the update."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cache", torch.ones(5, 11) * 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.cache[1:3] = x * 2
        return self.cache.sum(0) + x[0]


@pytest.mark.parametrize("cudagraphs", [False, True], ids=["plain", "cudagraphs"])
def test_buffer_written_in_inference(cudagraphs, device):
    if cudagraphs and device != "cuda":
        pytest.skip("CUDA graphs need the GPU")
    recorder = _matches_eager(_Cache().to(device), (2, 11), cudagraphs=cudagraphs)
    # the sum reads the cache again (the new value, recomputed from the old): the update stays a copy
    assert len(_updates(recorder, "inference")) == 1


class _Average(torch.nn.Module):
    """A running average updated in place and an output that does not read it."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("ema", torch.linspace(-1.0, 1.0, 3 * 29).view(3, 29))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.ema.mul_(0.9).add_(x, alpha=0.1)
        return x * 2


@pytest.mark.parametrize("cudagraphs", [False, True], ids=["plain", "cudagraphs"])
def test_an_update_is_stored_by_its_kernel(cudagraphs, device):
    if cudagraphs and device != "cuda":
        pytest.skip("CUDA graphs need the GPU")
    recorder = _matches_eager(_Average().to(device), (3, 29), cudagraphs=cudagraphs)
    assert not _updates(recorder, "inference")
    assert all(a.program.mutates_inputs for _, _, a in recorder.graphs)  # never replayed as a CUDA graph


class _Transposed(torch.nn.Module):
    """A square buffer rewritten from its own transpose: a kernel storing into it would read elements
    another block already overwrote, so the update stays a copy after the kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.arange(37 * 37, dtype=torch.float32).view(37, 37) / 100)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.state.copy_(self.state.t() * 0.5 + x)
        return x.sum(0)


def test_an_update_read_at_other_elements_stays_a_copy(device):
    recorder = _matches_eager(_Transposed().to(device), (37, 37))
    assert len(_updates(recorder, "inference")) == 1


def test_a_read_of_the_old_value_runs_before_the_update():
    """The graph returns a value computed from a buffer's old contents through a reduction (a group
    that becomes ready late) and updates the buffer: the update runs after that read."""
    class Running(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("state", torch.linspace(-1.0, 2.0, 13))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            old = (self.state * x).sum(-1, keepdim=True).softmax(0) * self.state
            self.state.mul_(0.5).add_(x.mean(0))
            return old + 1
    model = Running().to(rand((1,)).device)
    ref = copy.deepcopy(model)
    compiled, _ = _compiled(model)
    with torch.no_grad():
        for _ in range(3):
            x = rand((7, 13))
            assert_close(compiled(x), ref(x))
            assert_close(model.state, ref.state)


class _RandomUpdates(torch.nn.Module):
    """Buffers updated in place in a random order: from themselves (same element, transposed,
    flipped, reduced), from other buffers before or after their own updates, and read after."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.g = torch.Generator().manual_seed(seed)
        for k in range(3):
            self.register_buffer(f"b{k}", torch.randn(13, 13, generator=self.g))
        self.steps = [int(torch.randint(0, 7, (1,), generator=self.g)) for _ in range(5)]
        self.picks = [[int(v) for v in torch.randint(0, 3, (2,), generator=self.g)] for _ in range(5)]

    def forward(self, x: torch.Tensor) -> tuple:
        bufs = [self.b0, self.b1, self.b2]
        outs = []
        for step, (i, j) in zip(self.steps, self.picks):
            a, b = bufs[i], bufs[j]
            if step == 0:
                a.mul_(0.5).add_(x)
            elif step == 1:
                a.copy_(a.t() * 0.9 + 0.1)
            elif step == 2:
                a.copy_(a.flip(0) - b)
            elif step == 3:
                outs.append(a.sum(0) + b[0])
            elif step == 4:
                a.add_(b.mean(1, keepdim=True))
            elif step == 5:
                outs.append(a * 2)
                a.sub_(x.sigmoid())
            else:
                a.copy_(torch.where(b > 0, a, b))
        outs.append(x + 1)
        return tuple(outs)


@pytest.mark.parametrize("seed", range(12))
def test_random_buffer_updates_match_eager(seed, device):
    """Whichever updates the kernels store into the buffers themselves, the buffers and outputs
    equal eager's over three calls."""
    _matches_eager(_RandomUpdates(seed).to(device), (13, 13), poison=True)


def test_a_buffer_is_written_over_only_after_its_every_read():
    """The rule that lets a kernel store over a buffer it reads (an input's update, an operand that
    dies in the kernel): a node after the one that stores may read the old element only through the
    load made before the store (the kernel issues a load once per element), not under a mask of
    its own, and no node may read another element."""
    from autofuse.ir.index import make_vars
    from autofuse.ir.values import Layout
    from autofuse.schedule.fusion import FusionGroup
    from autofuse.schedule.in_place import reads_only_written_element
    from autofuse.schedule.nodes import MemoryDep, SchedulerNode

    lay = Layout.contiguous(torch.device("cpu"), torch.float32, (6, 5))
    i0, i1 = make_vars("i", 2)
    ranges = ((i0, 6), (i1, 5))
    at_element, elsewhere = MemoryDep("d", 5 * i0 + i1, ranges), MemoryDep("d", 5 * i0 + 4 - i1, ranges)

    def node(name: str, order: int, dep: MemoryDep | None = None, masked: bool = False) -> SchedulerNode:
        n = SchedulerNode(name, order, "pointwise", sizes=(6, 5), reads=(dep,) if dep else ())
        if dep:
            n.read_names = frozenset({"d"})
            n.masked_read_names = frozenset({"d"}) if masked else frozenset()
            n.unmasked_read_names = frozenset() if masked else frozenset({"d"})
        return n

    def legal(*nodes: SchedulerNode) -> bool:
        return reads_only_written_element(FusionGroup(list(nodes), 30, 1, False), "w", "d", lay)

    assert legal(node("w", 0, at_element), node("v", 1, at_element))
    assert legal(node("u", 0, at_element), node("w", 1), node("v", 2, at_element))
    assert not legal(node("w", 0), node("v", 1, at_element))                     # loaded after the store
    assert not legal(node("w", 0, at_element), node("v", 1, at_element, masked=True))
    assert not legal(node("w", 0, at_element), node("v", 1, elsewhere))
    assert not legal(node("u", 0, elsewhere), node("w", 1, at_element))
