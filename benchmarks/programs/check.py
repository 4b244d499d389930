"""Compare a variant's outputs with eager's within a program's per-dtype tolerance."""
from __future__ import annotations

from typing import Any

import torch

from .base import Program


def mismatch(program: Program, actual: Any, expected: Any) -> str | None:
    """None when actual matches expected (shapes, dtypes, values within tolerance), else why not."""
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            return f"output structure differs: {type(actual).__name__} vs {type(expected).__name__}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            why = mismatch(program, a, e)
            if why:
                return f"output {i}: {why}"
        return None
    if not isinstance(expected, torch.Tensor):
        return None if actual == expected else f"{actual!r} != {expected!r}"
    if not isinstance(actual, torch.Tensor):
        return f"got {type(actual).__name__}, expected a tensor"
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return f"shape/dtype {tuple(actual.shape)} {actual.dtype} vs eager {tuple(expected.shape)} {expected.dtype}"
    rtol, atol = program.tolerance(expected.dtype)
    try:
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    except AssertionError as e:
        return " ".join(str(e).split())[:300]
    return None
