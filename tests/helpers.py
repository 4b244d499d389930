"""Shared test helpers: random inputs, per-dtype tolerances, compile-and-compare against eager."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from autofuse import CompileOptions
from autofuse.capture.trace import compile_traced

DEFAULT_DEVICE = "cpu"  # set from pytest's --device option (conftest.py)

TOLERANCES = {
    torch.float32: (1e-4, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (4e-2, 4e-2),
}


def seed_fn(x: torch.Tensor, bias: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """The seed document's 10-op example (examples/seed_model.py as a function)."""
    t = x * 1.1 + bias
    a = torch.relu(t)
    p = a * a
    q = a * 0.1
    s = p + q
    m = s.mean(dim=1, keepdim=True)
    return (s - m) * gamma + beta


def rand(shape: Sequence[int], dtype: torch.dtype = torch.float32, device: str | None = None, *,
         noncontig: bool = False, low: float = -3.0, high: float = 3.0, gen: torch.Generator | None = None) -> torch.Tensor:
    """Random values (never zeros only); noncontig gives a transposed/strided view of the same shape."""
    shape = tuple(shape)
    device = device or DEFAULT_DEVICE
    if noncontig and len(shape) >= 2:
        base_shape = shape[:-2] + (shape[-1], shape[-2])
        return rand(base_shape, dtype, device, low=low, high=high, gen=gen).transpose(-1, -2)
    if noncontig and len(shape) == 1:
        return rand((shape[0] * 2,), dtype, device, low=low, high=high, gen=gen)[::2]
    if dtype == torch.bool:
        return (torch.rand(shape, generator=gen) > 0.5).to(device)
    if not dtype.is_floating_point:
        return torch.randint(int(low) - 3, int(high) + 4, shape, generator=gen).to(dtype).to(device)
    return (torch.rand(shape, generator=gen, dtype=torch.float32) * (high - low) + low).to(dtype).to(device)


def assert_close(actual: Any, expected: Any, *, check_stride: bool = True, atol: float | None = None,
                 rtol: float | None = None) -> None:
    if isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected), (actual, expected)
        for a, e in zip(actual, expected):
            assert_close(a, e, check_stride=check_stride, atol=atol, rtol=rtol)
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected
        return
    assert isinstance(actual, torch.Tensor), type(actual)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    if check_stride and expected.numel() > 1:
        sa = [s for s, n in zip(actual.stride(), actual.shape) if n > 1]
        se = [s for s, n in zip(expected.stride(), expected.shape) if n > 1]
        assert sa == se, f"strides {tuple(actual.stride())} != eager {tuple(expected.stride())}"
    r, a = TOLERANCES.get(expected.dtype, (0, 0))
    torch.testing.assert_close(actual.cpu(), expected.cpu(), rtol=rtol if rtol is not None else r,
                               atol=atol if atol is not None else a, equal_nan=True)


def compile_and_compare(fn: Callable[..., Any], args: Sequence[Any], *, strategy: str = "inductor",
                        check_stride: bool = True, atol: float | None = None, rtol: float | None = None) -> Any:
    """Trace fn to ATen, compile with poisoned buffers (unwritten elements fail), compare with eager."""
    options = CompileOptions(strategy=strategy, poison=True, strict=True, use_db=False)
    compiled = compile_traced(fn, args, options)
    expected = fn(*args)
    actual = compiled(*args)
    if not isinstance(expected, (list, tuple)):
        assert len(actual) == 1
        actual = actual[0]
    assert_close(actual, expected, check_stride=check_stride, atol=atol, rtol=rtol)
    return compiled


def writes_over_operand(program: Any) -> bool:
    """Does a launch of the program pass one buffer twice (an operand, and the output stored over it)?"""
    from autofuse.runtime.program import KernelLaunch
    return any(isinstance(s, KernelLaunch) and len(set(s.arg_slots)) < len(s.arg_slots) for s in program.steps)


def kernels_of(compiled: Any) -> list:
    """KernelInfo list of the (single) specialization a traced compile built."""
    progs = list(compiled.compiled.programs.values())
    assert len(progs) == 1
    return progs[0].kernels


def reduction_candidates(fn: Callable[..., Any], args: Sequence[Any]) -> list:
    """The search's candidate configs (up to 500) for fn's first reduction kernel, around its default."""
    from autofuse.capture.trace import trace_aten
    from autofuse.compiler import schedule
    from autofuse.schedule.heuristics import Heuristics
    from autofuse.search.candidates import candidate_configs
    groups = schedule(trace_aten(fn, args), args, CompileOptions(strict=True, use_db=False)).groups
    group = next(g for g in groups if g.is_reduction)
    default = Heuristics().launch_config("reduction", group.numel, group.rnumel, False)
    return candidate_configs(group, default, interpret=False, limit=500)
