"""Compile a program's Triton kernels on several host threads before its first call.

Note: a kernel compiles on its first launch, inside the call, one after another: a model of a
hundred kernels waits for a hundred compiles in a row. Triton's compile runs its MLIR and LLVM
passes and ptxas outside the GIL, and Triton's own asynchronous compile mode hands each compile to
an executor: each distinct kernel is warmed up (`JITFunction.warmup`, with dtypes standing for
tensors, so Triton assumes 16-byte aligned pointers, as the program's own buffers are) inside that
mode on a thread pool, and the first launch finds the compiled kernel in the JIT's cache. A launch
whose arguments specialize otherwise (an unaligned input) compiles at that launch; a compile that
fails here is left for the launch to report. A Triton without that mode compiles on first launch.
"""
from __future__ import annotations

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator, Sequence

import torch

THREADS_ENV = "AUTOFUSE_COMPILE_THREADS"


def compile_threads() -> int:
    """Host threads for compiling: $AUTOFUSE_COMPILE_THREADS, else up to 8 of the host's cores
    (0 or 1: compile on first launch, one kernel after another)."""
    env = os.environ.get(THREADS_ENV)
    if env is not None and env.strip():
        try:
            return max(0, int(env))
        except ValueError:
            return 0
    return min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def async_compile_mode() -> Any:
    """Triton's AsyncCompileMode class, or None on a Triton without it."""
    try:
        from triton.runtime._async_compile import AsyncCompileMode
    except ImportError:
        return None
    return AsyncCompileMode


def precompile(launches: Sequence[Any], threads: int | None = None) -> int:
    """Compile the distinct kernels of `launches` (runtime.steps.KernelLaunch) on `threads` threads
    and wait for them; returns how many were submitted (0 when nothing runs on a GPU, threads ≤ 1,
    or no async mode)."""
    with compiling_ahead(launches, threads, min_jobs=2) as submitted:
        pass
    return submitted


@contextlib.contextmanager
def compiler_prints_dropped() -> Iterator[None]:
    """Standard output dropped within the block. Triton prints a kernel's whole PTX (thousands of
    lines) before it raises PTXASError; the error's own message keeps ptxas's log. The tuner expects
    some candidates to fail and reports each reason, so it drops those prints while it compiles them."""
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        yield


@contextlib.contextmanager
def compiling_ahead(launches: Sequence[Any], threads: int | None = None, min_jobs: int = 1) -> Iterator[int]:
    """Within the block, the distinct kernels of `launches` compile on `threads` host threads; a
    launch of one of them waits for its own compile only (the tuner times the first candidates
    while the others compile). Leaving the block waits for the rest. Yields how many were submitted."""
    threads = compile_threads() if threads is None else threads
    jobs: dict[tuple, Any] = {}
    for launch in launches:
        key = launch.warm_key()
        if key is not None:
            jobs.setdefault(key, launch)
    mode = async_compile_mode()
    if threads <= 1 or len(jobs) < min_jobs or mode is None or mode_active():
        yield 0
        return
    with ThreadPoolExecutor(min(threads, len(jobs)), thread_name_prefix="autofuse-compile") as pool:
        with mode(pool, ignore_errors=True):   # on leaving: every compile done, its kernel in the JIT's cache
            for launch in jobs.values():
                _warm(launch)
            yield len(jobs)


def mode_active() -> bool:
    """Triton's asynchronous compile mode is already on (it does not nest)."""
    try:
        from triton.runtime._async_compile import active_mode
    except ImportError:
        return False
    return active_mode.get() is not None


def _warm(launch: Any) -> None:
    device = torch.device(launch.device) if launch.device is not None else None
    on = torch.cuda.device(device) if device is not None and device.type == "cuda" else contextlib.nullcontext()
    try:
        with on:   # the JIT caches per current device
            launch.warm()
    except Exception:  # noqa: BLE001 - the first launch compiles again and reports the error
        pass
