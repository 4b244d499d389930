"""Compare a candidate's outputs with the reference (eager, or a kernel's default config)."""
from __future__ import annotations

from typing import Any, Callable

import torch

# (rtol, atol) per dtype: reduction order may differ from eager's
TOLERANCES = {
    torch.float32: (1e-4, 1e-4),
    torch.float64: (1e-7, 1e-7),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (4e-2, 4e-2),
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
