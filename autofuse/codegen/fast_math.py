"""fast_tanh: tanh through the hardware's tanh.approx.f32 instead of libdevice's polynomial.

Note: libdevice's tanh costs some twenty instructions an element, enough to make a bf16
bias + GELU(tanh) kernel compute-bound (measured on the H200: 71% of copy bandwidth with
libdevice, 85% with tanh.approx, 90% with no tanh at all; docs/defaults.md). The
approximation's relative error (about 2^-11) is below the rounding of a 16-bit float (2^-8 for
bf16, 2^-11 for f16), so it is legal only in a kernel whose every value is 16-bit: each member
buffer (what the kernel may store) is bf16 or f16. The search measures it; it is never a default.
"""
from __future__ import annotations

from typing import Sequence

import torch

from ..ir.ops import AnalysisHandler
from ..schedule.loops import Placement
from ..schedule.nodes import SchedulerNode

HALF = (torch.bfloat16, torch.float16)


def fast_tanh(arg: str) -> str:
    """The Triton text of tanh of an f32 value through the approximation (prelude's `_tanh_approx`)."""
    return f"_tanh_approx({arg})"


def why_not_fast_tanh(members: Sequence[tuple[SchedulerNode, Placement]]) -> str | None:
    """None when the kernel uses tanh and every member buffer is 16-bit, else why not — the one rule
    plan checks, the search and codegen ask."""
    wide = [n.name for n, _ in members if n.buffer is not None and n.buffer.dtype not in HALF]
    if wide:
        return f"{wide[0]} is not a 16-bit float buffer (tanh.approx would show in its values)"
    ops = AnalysisHandler()
    for node, _ in members:
        node.run_body(ops)
    if "tanh" not in ops.op_names:
        return "the kernel has no tanh"
    return None
