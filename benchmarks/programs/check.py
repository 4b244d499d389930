"""Compare a variant's outputs with eager's within a program's per-dtype tolerance."""
from __future__ import annotations

from typing import Any

from autofuse.measure.verify import compare

from .base import Program


def mismatch(program: Program, actual: Any, expected: Any) -> str | None:
    """None when actual matches expected (structure, shapes, dtypes, values within the program's
    tolerance), else why not."""
    return compare(actual, expected, "output", program.tolerance)
