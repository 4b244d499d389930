"""The steps of a compiled program: allocations, kernel launches, ATen calls, frees, and the
values a program returns.

Note: every step runs on a list of slots (`run(env)`, the step interpreter) and is also what the
generated wrapper (runtime/wrapper.py) writes out as straight-line code; this module knows nothing
of either, so both import it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
from torch.utils._pytree import tree_map

from ..ir.values import Layout
from .launcher import FastLauncher


try:  # torch's C++ fast path for a CUDA allocation on the current device (what Inductor's wrappers call)
    from torch._C._dynamo.guards import _empty_strided_cuda
except ImportError:  # pragma: no cover - older torch
    _empty_strided_cuda = None


def allocator(lay: Layout) -> Callable[[], torch.Tensor]:
    """A new tensor of the layout. torch.empty_strided parses its arguments in Python each call
    (3-4 µs on the H200's host, per buffer, per call); a CUDA buffer on
    the current device goes through the C++ fast path instead."""
    size, stride, dtype, device = tuple(lay.size), tuple(lay.stride), lay.dtype, lay.device
    dev = torch.device(device)
    if _empty_strided_cuda is None or dev.type != "cuda":
        return lambda: torch.empty_strided(size, stride, dtype=dtype, device=device)
    index = dev.index if dev.index is not None else 0

    def alloc() -> torch.Tensor:
        if torch._C._cuda_getDevice() != index:
            return torch.empty_strided(size, stride, dtype=dtype, device=dev)
        return _empty_strided_cuda(size, stride, dtype)
    return alloc


@dataclass
class Alloc:
    slot: int
    layout: Layout
    reuse: int | None = None  # slot whose storage this allocation takes over
    poison: bool = False
    _new: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._new = allocator(self.layout)

    def run(self, env: list) -> None:
        lay = self.layout
        base = None
        if self.reuse is not None:
            base = env[self.reuse]
            env[self.reuse] = None
        if base is not None:
            t = base.as_strided(lay.size, lay.stride, 0)
        else:
            t = self._new()
        if self.poison:
            poison(t)
        env[self.slot] = t


def poison(t: torch.Tensor) -> None:
    """Fill a fresh buffer with values no kernel writes (NaN, True, a large integer): an element a
    kernel forgets to write shows up in the comparison with eager."""
    if t.dtype.is_floating_point:
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(torch.iinfo(t.dtype).max // 3)


@dataclass
class KernelLaunch:
    """One generated kernel. With `split` > 1 (a split reduction, codegen/split.py) the grid is
    (x blocks, split) and the kernel also takes its workspaces [split, numel] and a counter per x
    block: both allocated once here (the counters zeroed; the kernel leaves them at zero), so a
    split costs no host time per call beyond its launch. With `yblock` > 0 (a 2-D tiled pointwise
    kernel, codegen/tiling.py) the grid is (x tiles, y tiles) over (numel / ynumel, ynumel) and the
    kernel takes both extents. With `programs` > 0 (a row kernel with column partials,
    codegen/columns.py) the grid is that many programs, each walking its share of the rows."""

    name: str
    fn: Any
    arg_slots: tuple[int, ...]
    numel: int
    rnumel: int
    xblock: int
    rblock: int
    num_warps: int
    num_stages: int
    is_reduction: bool
    split: int = 1
    device: Any = None
    workspace_dtypes: tuple[torch.dtype, ...] = ()
    ynumel: int = 1
    yblock: int = 0
    programs: int = 0  # > 0: a row kernel with column partials, one program per share of rows (codegen/columns.py)
    arg_dtypes: tuple[torch.dtype, ...] = ()  # of the tensors at arg_slots (what a warm-up compiles for)
    _launch: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._launch = FastLauncher(self.fn, self.device)
        # fixed per launch site: computed once, not on every call (host time shows on small graphs)
        self._grid = ((self.numel + self.xblock - 1) // self.xblock,)
        self._sizes = (self.numel, self.rnumel) if self.is_reduction else (self.numel,)
        self._consts = {"XBLOCK": self.xblock, "RBLOCK": self.rblock} if self.is_reduction else {"XBLOCK": self.xblock}
        self._extra: tuple = ()
        if self.programs:
            self._grid = (self.programs,)
        if self.yblock:
            xnumel = self.numel // self.ynumel
            self._grid = ((xnumel + self.xblock - 1) // self.xblock, (self.ynumel + self.yblock - 1) // self.yblock)
            self._sizes = (self.ynumel, xnumel)
            self._consts = {"YBLOCK": self.yblock, "XBLOCK": self.xblock}
        if self.split > 1:
            dev = torch.device(self.device or "cpu")
            ws = [torch.empty((self.split, self.numel), dtype=dt, device=dev) for dt in self.workspace_dtypes]
            self._extra = (*ws, torch.zeros(self._grid[0], dtype=torch.int32, device=dev))
            self._grid = (self._grid[0], self.split)

    def compiled_stats(self) -> dict[str, float] | None:
        """The GPU compile's registers, local and shared bytes (FastLauncher.compiled_stats)."""
        return self._launch.compiled_stats()

    def bind(self, static_aligned: Sequence[bool]) -> Callable[..., None]:
        """This launch with all but its tensors bound: `go(stream, *tensors)` (FastLauncher.bind)."""
        return self._launch.bind(self._grid, (*self._extra, *self._sizes), self._consts, self.num_warps,
                                 self.num_stages, static_aligned)

    def warm_key(self) -> tuple | None:
        """What the compiled kernel depends on (runtime/precompile.py); None where a warm-up cannot
        compile it ahead (on the CPU, without dtypes, nothing to launch)."""
        if not (self.numel and self._launch.enabled and len(self.arg_dtypes) == len(self.arg_slots)):
            return None
        tail = tuple(a.dtype if isinstance(a, torch.Tensor) else a for a in (*self._extra, *self._sizes))
        return (id(self.fn), self.arg_dtypes, tail, tuple(self._consts.items()), self.num_warps, self.num_stages,
                self._launch.device_index)

    def warm(self) -> None:
        """Compile this launch's kernel for aligned tensors of its dtypes, without launching it."""
        self._launch.warm(self._grid, self.arg_dtypes, (*self._extra, *self._sizes), self._consts, self.num_warps,
                          self.num_stages)

    def run(self, env: list) -> None:
        if self.numel == 0:
            return
        args = [env[s] for s in self.arg_slots]
        self._launch.launch(self._grid, (*args, *self._extra, *self._sizes), self._consts, self.num_warps,
                            self.num_stages)


@dataclass
class StridedArg:
    slot: int
    layout: Layout

    def get(self, env: list) -> torch.Tensor:
        base = env[self.slot]
        lay = self.layout
        return base.as_strided(lay.size, lay.stride, base.storage_offset() + lay.offset)

    __call__ = get  # as a program output


@dataclass(frozen=True)
class SlotOutput:
    """A program output that is a slot's tensor itself."""

    slot: int

    def __call__(self, env: list) -> Any:
        return env[self.slot]


@dataclass(frozen=True)
class ConstOutput:
    """A program output that is not a tensor of the program (a Python value)."""

    value: Any

    def __call__(self, env: list) -> Any:
        return self.value


@dataclass
class ExternCall:
    name: str
    op: Any
    args: Any
    kwargs: Any
    out_slots: Any  # same structure as the op's result, with slot ints / None
    out_layouts: dict[int, Layout]

    def run(self, env: list) -> None:
        def get(a: Any) -> Any:
            return a.get(env) if isinstance(a, StridedArg) else a
        result = self.op(*tree_map(get, self.args, is_leaf=lambda x: isinstance(x, StridedArg)),
                         **tree_map(get, self.kwargs, is_leaf=lambda x: isinstance(x, StridedArg)))
        _assign(self.out_slots, result, env, self.out_layouts)


def _assign(slots: Any, result: Any, env: list, layouts: dict[int, Layout]) -> None:
    if isinstance(slots, int):
        lay = layouts[slots]
        t = result
        if t is not None and (tuple(t.stride()) != lay.stride or tuple(t.shape) != lay.size):
            # keep the layout the rest of the program was compiled for
            t2 = torch.empty_strided(lay.size, lay.stride, dtype=lay.dtype, device=t.device)
            t2.copy_(t)
            t = t2
        env[slots] = t
    elif isinstance(slots, (list, tuple)):
        for s, r in zip(slots, result):
            _assign(s, r, env, layouts)


@dataclass
class Free:
    slots: tuple[int, ...]

    def run(self, env: list) -> None:
        for s in self.slots:
            env[s] = None
