"""Launching a compiled Triton kernel without JITFunction's per-call argument binding.

Note: `fn[grid](...)` binds and specializes every argument in Python on each call (tens of µs),
which shows on small graphs, where a whole program is a few µs of GPU work. After the first
launch through the JIT (which compiles), later launches call the compiled kernel's launcher
directly with the same argument order the JIT uses (all parameters, constexprs included). The
compiled kernel is specialized on 16-byte pointer alignment, so it is cached per alignment
pattern; a launch hook that is set (Triton >= 3.5 keeps hooks in a HookChain, never None: an
empty chain counts as unset), a CPU (interpreted) kernel, a Triton whose launcher differs, or
AUTOFUSE_JIT_LAUNCH=1 in the environment takes the JIT path.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import torch


class FastLauncher:
    def __init__(self, fn: Any, device: torch.device | None) -> None:
        self.fn = fn
        self.enabled = (device is not None and device.type == "cuda" and hasattr(fn, "run")
                        and not os.environ.get("AUTOFUSE_JIT_LAUNCH"))
        self.device_index = None if device is None else (device.index if device.index is not None else 0)
        self.kernels: dict[tuple, Any] = {}
        self._stream = None
        self._knobs: Any = None

    def launch(self, grid: tuple[int, ...], args: Sequence[Any], constexprs: dict[str, int], num_warps: int,
               num_stages: int) -> None:
        if not self.enabled:
            self.fn[grid](*args, **constexprs, num_warps=num_warps, num_stages=num_stages)
            return
        key = tuple(a.data_ptr() % 16 == 0 if isinstance(a, torch.Tensor) else a for a in args)
        kernel = self.kernels.get(key)
        if kernel is None:
            kernel = _resolved(self.fn[grid](*args, **constexprs, num_warps=num_warps, num_stages=num_stages))
            if not self._usable(kernel):
                self.enabled = False
                return
            from triton import knobs
            self._knobs = knobs
            self.kernels[key] = kernel
            return
        rt = self._knobs.runtime
        if _hooked(rt.launch_enter_hook) or _hooked(rt.launch_exit_hook):
            self.fn[grid](*args, **constexprs, num_warps=num_warps, num_stages=num_stages)
            return
        if self._stream is None:
            from triton.runtime import driver
            self._stream = driver.active.get_current_stream
        g1 = grid[1] if len(grid) > 1 else 1
        kernel.run(grid[0], g1, 1, self._stream(self.device_index), kernel.function, kernel.packed_metadata, None,
                   None, None, *args, *constexprs.values())

    def bind(self, grid: tuple[int, ...], tail: tuple, constexprs: dict[str, int], num_warps: int, num_stages: int,
             static_aligned: Sequence[bool]) -> Callable[..., None]:
        """A launch of one site with everything but its tensor arguments fixed: `go(stream, *tensors)`.

        `tail` (workspaces, sizes) and the constexprs are fixed per site, and a tensor whose position
        is marked in `static_aligned` is 16-byte aligned on every call (a buffer the program
        allocates), so the compiled kernel is cached by the alignment of the other tensors only
        (none for most launches: one dict lookup). The caller checks launch hooks once per program
        call (`hooks_set`); with one set it runs `launch` instead. On the CPU (or without the fast
        path) `go` launches through the JIT."""
        fn = self.fn
        kw = dict(constexprs, num_warps=num_warps, num_stages=num_stages)
        if not self.enabled:
            def jit(stream: Any, *args: Any) -> None:
                fn[grid](*args, *tail, **kw)
            return jit
        dyn = tuple(i for i, aligned in enumerate(static_aligned) if not aligned)
        g0, g1 = grid[0], (grid[1] if len(grid) > 1 else 1)
        cvals = tuple(constexprs.values())
        cache: dict[tuple, Any] = {}

        def first(key: tuple, args: tuple) -> None:
            kernel = _resolved(fn[grid](*args, *tail, **kw))
            if self._usable(kernel):
                cache[key] = kernel
                self.kernels.setdefault(("bound", key), kernel)

        def go(stream: Any, *args: Any) -> None:
            key = 1  # one bit per tensor of unknown alignment: set when 16-byte aligned
            for i in dyn:
                key = key + key + (args[i].data_ptr() % 16 == 0)
            kernel = cache.get(key)
            if kernel is None:
                first(key, args)
                return
            kernel.run(g0, g1, 1, stream, kernel.function, kernel.packed_metadata, None, None, None, *args, *tail,
                       *cvals)

        def go_aligned(stream: Any, *args: Any) -> None:
            kernel = cache.get(1)
            if kernel is None:
                first(1, args)
                return
            kernel.run(g0, g1, 1, stream, kernel.function, kernel.packed_metadata, None, None, None, *args, *tail,
                       *cvals)
        return go if dyn else go_aligned

    def warm(self, grid: tuple[int, ...], dtypes: Sequence[torch.dtype], tail: tuple, constexprs: dict[str, int],
             num_warps: int, num_stages: int) -> None:
        """Compile (not launch) the kernel for 16-byte aligned tensors of `dtypes` followed by `tail`,
        into the JIT's cache, where the first launch finds it."""
        if self.enabled:
            self.fn.warmup(*dtypes, *tail, grid=grid, **constexprs, num_warps=num_warps, num_stages=num_stages)

    def stream_getter(self) -> Callable[[int], Any]:
        """The current raw stream of a device index (what a compiled kernel's launcher takes)."""
        if self._stream is None:
            from triton.runtime import driver
            self._stream = driver.active.get_current_stream
        return self._stream

    def compiled_stats(self) -> dict[str, float] | None:
        """Registers per thread, local memory (spill/stack) bytes per thread and shared bytes of the
        kernel this launcher compiled, as the GPU's own loader reports them (Triton's n_regs, n_spills
        in 4-byte words, metadata.shared); None before a compiled launch or on the CPU. Why: the cost
        model's compiled features come from a separate sm_90 compile; this is the ground truth to
        check them against, free once the kernel ran."""
        for kernel in self.kernels.values():
            try:
                return {"registers": float(kernel.n_regs), "local_bytes": 4.0 * float(kernel.n_spills),
                        "shared_bytes": float(kernel.metadata.shared)}
            except (AttributeError, TypeError, ValueError):
                return None
        return None

    @property
    def cached(self) -> int:
        """Compiled kernels the fast path holds (one per alignment pattern seen)."""
        return len(self.kernels)

    @staticmethod
    def _usable(kernel: Any) -> bool:
        try:
            from triton import knobs  # noqa: F401 - the launcher signature this path assumes (triton >= 3.3)
        except ImportError:
            return False
        return all(hasattr(kernel, a) for a in ("run", "function", "packed_metadata"))


def _resolved(kernel: Any) -> Any:
    """The compiled kernel of a launch made while Triton's asynchronous compile mode was on (the
    JIT then hands out a future kernel; it has finished compiling once the launch returned)."""
    return kernel.result() if callable(getattr(type(kernel), "result", None)) else kernel


def hooks_set() -> bool:
    """A Triton launch enter or exit hook is set (then launches take the JIT path, which calls it)."""
    try:
        from triton import knobs
    except ImportError:
        return False
    rt = knobs.runtime
    return _hooked(rt.launch_enter_hook) or _hooked(rt.launch_exit_hook)


def _hooked(hook: Any) -> bool:
    """A launch hook is set: not None and, for Triton's HookChain, with something in the chain."""
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)
    return calls is None or bool(calls)
