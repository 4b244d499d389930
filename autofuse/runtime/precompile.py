"""Compile a program's Triton kernels on several host threads before its first call.

Note: a kernel compiles on its first launch, inside the call, one after another: a model of a
hundred kernels waits for a hundred compiles in a row. Triton's compile runs its MLIR and LLVM
passes and ptxas outside the GIL, so threads overlap most of it. Each distinct kernel is compiled
once through `JITFunction.warmup`, with dtypes standing for tensors (Triton then assumes 16-byte
aligned pointers, as the program's own buffers are); the first launch finds the compiled kernel in
the JIT's cache. A launch whose arguments specialize otherwise (an unaligned input) compiles then,
as before; a compile that fails here is left for the launch to report.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

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


def precompile(launches: Sequence[Any], threads: int | None = None) -> int:
    """Compile the distinct kernels of `launches` (runtime.steps.KernelLaunch) on `threads` threads;
    returns how many were submitted (0 when nothing runs on a GPU or threads ≤ 1)."""
    threads = compile_threads() if threads is None else threads
    jobs: dict[tuple, Any] = {}
    for launch in launches:
        key = launch.warm_key()
        if key is not None:
            jobs.setdefault(key, launch)
    if threads <= 1 or len(jobs) < 2:
        return 0
    with ThreadPoolExecutor(min(threads, len(jobs)), thread_name_prefix="autofuse-compile") as pool:
        for f in [pool.submit(_warm, launch) for launch in jobs.values()]:
            f.result()
    return len(jobs)


def _warm(launch: Any) -> None:
    try:
        if launch.device is not None and torch.device(launch.device).type == "cuda":
            torch.cuda.set_device(torch.device(launch.device))  # the JIT caches per current device
        launch.warm()
    except Exception:  # noqa: BLE001 - the first launch compiles again and reports the error
        pass
