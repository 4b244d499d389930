"""Scan codegen: a scan node's value in a persistent or looped kernel, through tl.associative_scan.

Note: a persistent kernel scans each row's [XBLOCK, RBLOCK] block in one tl.associative_scan. A
looped kernel scans each RBLOCK chunk on its own and combines it with a carry, the prefix of the
chunks before it in scan order (a reverse scan's loop walks the chunks from the last, see
`reverse_loop`); the carry then becomes the result's last lane in scan order. Lanes outside the
row hold the combine's identity, so the padding a reverse scan meets first adds nothing. Values
are combined in the scan's accumulation dtype (f32 for half inputs, int64 for integers).
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

from .printer import tl_dtype

COMBINE_FNS = {"sum": "_sum_combine", "prod": "_prod_combine", "logaddexp": "_logaddexp_combine",
               "max": "_max_combine", "min": "_min_combine"}

# jit helpers a scan kernel needs beyond the prelude (only scan kernels carry them, so every other
# kernel's source, and the measurements keyed by it, stay as they are)
SCAN_HELPERS = '''

@triton.jit
def _logaddexp_combine(a, b):
    # log(exp(a) + exp(b)); equal infinities give themselves, a NaN gives NaN
    m = tl.maximum(a, b)
    d = tl.where(a == b, 0.0, tl.abs(a - b))
    return m + _log1p(tl.exp(-d))
'''


def is_scan_kernel(members: Sequence[tuple[Any, Any]]) -> bool:
    return any(n.kind == "scan" for n, _ in members)


def identity(combine: str, dtype: torch.dtype) -> str:
    """The combine's identity as Triton source: a lane holding it leaves every prefix unchanged."""
    if combine == "sum":
        return "0.0" if dtype.is_floating_point else "0"
    if combine == "prod":
        return "1.0" if dtype.is_floating_point else "1"
    low = combine in ("max", "logaddexp")
    if dtype.is_floating_point:
        return 'float("-inf")' if low else 'float("inf")'
    info = torch.iinfo(dtype)
    return str(info.min if low else info.max)


def carry_name(node: Any) -> str:
    return f"carry_{node.name}"


def carry_init(node: Any) -> str:
    """The line that starts a looped scan's carry at the identity, before the r loop."""
    body = node.buffer.body
    return (f"{carry_name(node)} = tl.full([XBLOCK, 1], {identity(body.combine, body.acc_dtype)}, "
            f"{tl_dtype(body.acc_dtype)})")


def reverse_loop(members: Sequence[tuple[Any, Any]]) -> bool:
    """Does the kernel's r loop walk its chunks from the last (its scans run in reverse)?"""
    return any(n.kind == "scan" and n.buffer.body.reverse for n, _ in members)


def scan_value(w: Any, node: Any) -> Any:
    """Emit node's scan into the KernelWriter `w` (its current node is `node`); the [XBLOCK, RBLOCK]
    value of the scan at this block's r positions."""
    body = node.buffer.body
    acc, fn = body.acc_dtype, COMBINE_FNS[body.combine]
    v = w.to_dtype(node.run_body(w), acc)
    v = w.cse(f"tl.where(xrmask, tl.broadcast_to({v}, [XBLOCK, RBLOCK]), {identity(body.combine, acc)})", acc)
    s = w.cse(f"tl.associative_scan({v}, 1, {fn}{', reverse=True' if body.reverse else ''})", acc)
    if w.persistent:
        return s
    carry = carry_name(node)
    r = w.cse(f"{fn}({carry}, {s})", acc)
    lane = "0" if body.reverse else "RBLOCK - 1"
    w.emit(f"{carry} = tl.reduce(tl.where(tl.arange(0, RBLOCK)[None, :] == {lane}, {r}, 0), 1, _fast_sum)[:, None]")
    return r
