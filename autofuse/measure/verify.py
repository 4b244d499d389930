"""Compare a candidate's outputs with the reference (eager, or a kernel's default config)."""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils._pytree import tree_leaves


# (rtol, atol) per dtype: reduction order may differ from eager's
TOLERANCES = {
    torch.float32: (1e-4, 1e-4),
    torch.float64: (1e-7, 1e-7),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (4e-2, 4e-2),
    # float8: one step of the format (3 and 2 mantissa bits; its smallest subnormal), where an f32
    # value one ulp apart from eager's lands on the other side of a rounding boundary
    torch.float8_e4m3fn: (0.125, 2.0 ** -9),
    torch.float8_e5m2: (0.25, 2.0 ** -16),
}


def compare(actual: Any, expected: Any, where: str = "output",
            tolerance: Callable[[torch.dtype], tuple[float, float]] | None = None) -> str | None:
    """None when equal within the dtype's tolerance (`tolerance(dtype)` -> (rtol, atol), default
    TOLERANCES), else a one-line reason."""
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            return f"{where}: {len(expected)} values expected"
        for i, (a, e) in enumerate(zip(actual, expected)):
            why = compare(a, e, f"{where}[{i}]", tolerance)
            if why:
                return why
        return None
    if not isinstance(expected, torch.Tensor):
        return None if actual == expected else f"{where}: {actual!r} != {expected!r}"
    if not isinstance(actual, torch.Tensor):
        return f"{where}: got {type(actual).__name__}, expected a tensor"
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return f"{where}: {tuple(actual.shape)} {actual.dtype} != {tuple(expected.shape)} {expected.dtype}"
    rtol, atol = tolerance(expected.dtype) if tolerance else TOLERANCES.get(expected.dtype, (0.0, 0.0))
    a, e = actual.detach(), expected.detach()
    if a.device != e.device:
        a = a.to(e.device)
    if not torch.allclose(a.double() if a.is_floating_point() else a, e.double() if e.is_floating_point() else e,
                          rtol=rtol, atol=atol, equal_nan=True):
        if a.is_floating_point():
            err = (a.double() - e.double()).abs().nan_to_num(float("inf")).max().item()
            return f"{where}: wrong values (max abs error {err:.3g}, tolerance rtol={rtol} atol={atol})"
        return f"{where}: wrong values ({int((a != e).sum())} elements differ)"
    return None


def as_close_as_eager(actual: Any, expected: Any, reference: Any,
                      tolerance: Callable[[torch.dtype], tuple[float, float]] | None = None) -> bool:
    """Every floating output's RMS error against `reference` (the computation in float64) is at most
    twice eager's plus a tenth of the dtype's atol. Why: eager rounds every intermediate of a bf16 or
    f16 graph to that dtype, a compiled kernel keeps them in f32, and a long chain can take eager's
    result further from the exact one than any tolerance for the dtype allows; torch's own
    benchmarks judge compiled models against a float64 reference the same way."""
    for a, e, r in zip(tree_leaves(actual), tree_leaves(expected), tree_leaves(reference)):
        if not (isinstance(a, torch.Tensor) and a.is_floating_point()):
            continue
        if not isinstance(r, torch.Tensor) or r.shape != a.shape:
            return False
        r = r.to(device=a.device, dtype=torch.float64)
        atol = (tolerance(e.dtype) if tolerance else TOLERANCES.get(e.dtype, (0.0, 0.0)))[1]
        rmse_a = (a.double() - r).pow(2).mean().sqrt().item()
        rmse_e = (e.double() - r).pow(2).mean().sqrt().item()
        if not rmse_a <= 2 * rmse_e + atol / 10:
            return False
    return True


def check_outputs(actual: Any, expected: Any, reference: Callable[[], Any] | None = None, where: str = "output",
                  tolerance: Callable[[torch.dtype], tuple[float, float]] | None = None) -> str | None:
    """`compare`, and where values differ beyond the dtype's tolerance, `as_close_as_eager` against
    `reference()` (float64 outputs) before calling them wrong."""
    why = compare(actual, expected, where, tolerance)
    if why is None or reference is None or "wrong values" not in why:
        return why
    try:
        ref = reference()
    except Exception:  # noqa: BLE001 - a graph that cannot run in float64 keeps the plain check
        return why
    return None if as_close_as_eager(actual, expected, ref, tolerance) else f"{why}; further from the float64 result than eager"
