"""flex_attention's forward lowered to one fused kernel (codegen/flex_attention.py) where its
shapes and bodies allow; otherwise the op runs as ATen's implementation, which writes the whole
score matrix out (43x torch.compile's time on a causal ALiBi attention of 8 x 16 heads x 1024
tokens on an H100)."""
from __future__ import annotations

from typing import Any

import torch

from ..codegen.flex_attention import BodyUnsupported
from ..runtime.flex_attention import FlexForward
from .registry import Unsupported, register

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _pow2_head(d: int) -> bool:
    return 16 <= d <= 256 and d & (d - 1) == 0


def check(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, outputs: Any) -> None:
    """Raise Unsupported for what the kernel does not take: other dtypes or ranks, head dims that
    are not powers of two in [16, 256] (tl.dot's tiles; f32 up to 128), heads or batches that do
    not broadcast as grouped-query attention does, outputs not laid out as the kernel writes them."""
    if not all(isinstance(t, torch.Tensor) and t.dim() == 4 and t.dtype == query.dtype for t in (query, key, value)):
        raise Unsupported("flex attention operands")
    if query.dtype not in _DTYPES or not (_pow2_head(query.shape[-1]) and _pow2_head(value.shape[-1])):
        raise Unsupported("flex attention dtype or head dims")
    if query.dtype == torch.float32 and max(query.shape[-1], value.shape[-1]) > 128:
        raise Unsupported("f32 flex attention over heads past 128 (its tiles outgrow shared memory)")
    b, h, m, d = query.shape
    bk, hk, n, dk = key.shape
    if dk != d or tuple(value.shape[:3]) != (bk, hk, n) or h % hk or bk not in (b, 1):
        raise Unsupported("flex attention shapes")
    if not isinstance(outputs, (tuple, list)) or len(outputs) not in (2, 3):
        raise Unsupported("flex attention outputs")
    for o in outputs[1:]:
        if tuple(o.shape) != (b, h, m) or o.dtype != torch.float32 or o.stride() != (h * m, m, 1):
            raise Unsupported("flex attention statistics layout")


@register(torch.ops.higher_order.flex_attention)
def _flex_attention(g: Any, query: Any, key: Any, value: Any, score_mod: Any, block_mask: Any, scale: Any,
                    kernel_options: Any, score_mod_other_buffers: Any = (), mask_mod_other_buffers: Any = ()) -> Any:
    fargs = g._fake_args
    fq, fk, fv = fargs[0], fargs[1], fargs[2]
    check(fq, fk, fv, g.out)
    mask_mod = block_mask[-1] if isinstance(block_mask, (tuple, list)) and block_mask else None
    if not isinstance(score_mod, torch.fx.GraphModule) or not isinstance(mask_mod, (torch.fx.GraphModule, type(None))):
        raise Unsupported("flex attention bodies")
    fsb = tuple(fargs[7]) if len(fargs) > 7 else ()
    fmb = tuple(fargs[8]) if len(fargs) > 8 else ()
    if not all(isinstance(t, torch.Tensor) for t in (*fsb, *fmb)):
        raise Unsupported("flex attention captured values")
    try:
        fwd = FlexForward(score_mod, mask_mod, fq, fk, fv, g.out, fsb, fmb, fargs[4])
    except BodyUnsupported as e:
        raise Unsupported(str(e)) from e
    args = (query, key, value, score_mod, block_mask, scale, kernel_options,
            tuple(score_mod_other_buffers), tuple(mask_mod_other_buffers))
    return g.fallback(fwd, args, {}, g.out)
