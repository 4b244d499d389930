"""flex attention's forward as one generated kernel, called where the op's extern step calls it.

Note: the object takes the op's own arguments (query, key, value, the bodies, the block mask, the
scale, the kernel options, the captured tensors), so the program calls it as it would call the op.
Its outputs are allocated in the layouts the op's fake rule gave at lowering: the attention output
in the query's dim order, the base-2 logsumexp and row maximum row-major, as many outputs as the
installed torch's op returns.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import torch
from torch._subclasses.fake_tensor import FakeTensor

from ..codegen.flex_attention import kernel_source
from ..codegen.prelude import prelude
from .launcher import FastLauncher
from .loader import load_kernel, warn_interpreter_once

KERNEL_NAME = "triton_flex_attention_fwd"


@dataclass(frozen=True)
class Launch:
    """Tile sizes and launch settings, fixed (not searched): on the GPU 128 queries by 64 keys, 4 warps
    and 3 stages for head dims up to 64, 8 warps for 128, narrower key steps in f32 and for 256
    (what a tile of each fits in shared memory); small tiles under the interpreter."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int

    @staticmethod
    def pick(head_dim: int, dtype: torch.dtype, interpret: bool) -> "Launch":
        if interpret:
            return Launch(32, 32, 4, 1)
        wide = dtype == torch.float32 or head_dim > 128
        return Launch(128 if head_dim <= 128 else 64, 32 if wide else 64, 4 if head_dim <= 64 else 8,
                      3 if head_dim <= 128 else 2)


class FlexForward:
    """Callable in the op's place: (query, key, value, score_mod, block_mask, scale, kernel_options,
    score_mod_other_buffers, mask_mod_other_buffers) -> the op's outputs."""

    kernel_name = KERNEL_NAME

    def __init__(self, score_mod: torch.fx.GraphModule, mask_mod: torch.fx.GraphModule | None,
                 query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, outputs: Sequence[torch.Tensor],
                 score_buffers: Sequence[torch.Tensor], mask_buffers: Sequence[torch.Tensor]) -> None:
        self.interpret = query.device.type == "cpu"
        self.buffer_layouts = [(tuple(b.shape), tuple(b.stride())) for b in (*score_buffers, *mask_buffers)]
        self._bodies = (score_mod, mask_mod, self.buffer_layouts[:len(score_buffers)],
                        self.buffer_layouts[len(score_buffers):], query.dtype)
        self.source = self.source_for(self.interpret)
        self.outputs = [(tuple(o.shape), tuple(o.stride()), o.dtype) for o in outputs]
        # shapes are static: the grid, the size arguments and the constexprs are fixed at lowering
        self.launch = lc = Launch.pick(query.shape[-1], query.dtype, self.interpret)
        b, h, m, d = query.shape
        self.grid = (math.ceil(m / lc.block_m), b * h)
        self.sizes = (h, m, h // key.shape[1], int(key.shape[0] == b))   # H, M, GROUP, KV_BATCH
        self.constexprs = {"N": key.shape[2], "BLOCK_M": lc.block_m, "BLOCK_N": lc.block_n, "D": d,
                           "DV": value.shape[-1]}
        self._launcher: FastLauncher | None = None

    def source_for(self, interpret: bool) -> str:
        """The kernel's module text for the interpreter or for the GPU (f32 products in TF32 where
        torch's matmul setting allows it, as eager's f32 matmul would)."""
        score_mod, mask_mod, score_layouts, mask_layouts, dtype = self._bodies
        precision = None
        if dtype == torch.float32 and not interpret:
            precision = "tf32" if torch.backends.cuda.matmul.allow_tf32 else "ieee"
        return kernel_source(KERNEL_NAME, prelude(interpret), score_mod, mask_mod, score_layouts, mask_layouts,
                             precision, dtype, interpret)

    @property
    def generated_source(self) -> str:
        """What explain and the tests see of the step: the kernel's module text."""
        return self.source

    def __repr__(self) -> str:   # the wrapper's comments and logs name the step by it
        return "flex_attention_fused"

    def _buffer(self, t: torch.Tensor, layout: tuple[tuple, tuple]) -> torch.Tensor:
        """A captured tensor in the layout its loads were written for (its strides are constants)."""
        if tuple(t.stride()) == layout[1]:
            return t
        out = torch.empty_strided(layout[0], layout[1], dtype=t.dtype, device=t.device)
        return out.copy_(t)

    def __call__(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, score_mod: Any, block_mask: Any,
                 scale: float, kernel_options: Any, score_mod_other_buffers: Sequence[torch.Tensor] = (),
                 mask_mod_other_buffers: Sequence[torch.Tensor] = ()) -> tuple[torch.Tensor, ...]:
        outs = tuple(torch.empty_strided(s, st, dtype=dt, device=query.device) for s, st, dt in self.outputs)
        if isinstance(query, FakeTensor):
            return outs
        if self._launcher is None:   # the project's launcher: the JIT once, then its compiled launcher
            if self.interpret:
                warn_interpreter_once()
            self._launcher = FastLauncher(load_kernel(KERNEL_NAME, self.source, self.interpret), query.device)
        out, lse = outs[0], outs[1]
        maxs = outs[2] if len(outs) > 2 else torch.empty_like(lse)
        buffers = [self._buffer(t, lay) for t, lay in zip((*score_mod_other_buffers, *mask_mod_other_buffers),
                                                           self.buffer_layouts)]
        args = (query, key, value, out, lse, maxs, *buffers, *query.stride(), *key.stride(), *value.stride(),
                *out.stride(), *self.sizes, float(scale))
        self._launcher.launch(self.grid, args, self.constexprs, self.launch.num_warps, self.launch.num_stages)
        return outs
