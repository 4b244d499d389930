"""fast_tanh: tanh through the hardware's tanh.approx.f32 instead of libdevice's polynomial.

Note: libdevice's tanh costs some twenty instructions an element, enough to make a bf16
bias + GELU(tanh) kernel compute-bound (measured on the H200: 71% of copy bandwidth with
libdevice, 85% with tanh.approx, 90% with no tanh at all; benchmarks/tanh_probe.py). The
approximation's relative error (about 2^-11) is below the rounding of a 16-bit float (2^-8 for
bf16, 2^-11 for f16), so it is legal only in a kernel whose every value is 16-bit: each member
buffer (what the kernel may store) is bf16 or f16. The search measures it; it is never a default.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from ..ir.ops import OpsHandler
from ..schedule.loops import Placement
from ..schedule.nodes import SchedulerNode

HALF = (torch.bfloat16, torch.float16)


class _OpNames(OpsHandler):
    """Collects the math ops a body uses."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def load(self, name: str, index: Any) -> None:
        return None

    def constant(self, value: Any, dtype: torch.dtype) -> None:
        return None

    def index_expr(self, expr: Any, dtype: torch.dtype) -> None:
        return None

    def to_dtype(self, value: Any, dtype: torch.dtype) -> None:
        return None

    def masked(self, mask: Any, body: Callable[[], Any], other: Any) -> None:
        body()
        return None

    def indirect(self, value: Any, size: int) -> Any:
        import sympy
        return sympy.Symbol("indirect", integer=True)

    def op(self, name: str, *args: Any) -> None:
        self.names.add(name)
        return None


def why_not_fast_tanh(members: Sequence[tuple[SchedulerNode, Placement]]) -> str | None:
    """None when the kernel uses tanh and every member buffer is 16-bit, else why not — the one rule
    plan checks, the search and codegen ask."""
    wide = [n.name for n, _ in members if n.buffer is not None and n.buffer.dtype not in HALF]
    if wide:
        return f"{wide[0]} is not a 16-bit float buffer (tanh.approx would show in its values)"
    ops = _OpNames()
    for node, _ in members:
        node.run_body(ops)
    if "tanh" not in ops.names:
        return "the kernel has no tanh"
    return None
