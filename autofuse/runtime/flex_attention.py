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
class Sparsity:
    """A block mask the kernel can follow: its query and key block sizes (powers of two of at
    least 16, so the kernel's tiles divide them), whether it lists full blocks apart from partial
    ones, and the sizes of its count tensors [SB, SH, QB] and index tensors [SB, SH, QB, KB]."""

    q_block: int
    kv_block: int
    has_full: bool
    sizes: tuple[int, int, int, int]

    @staticmethod
    def of(block_mask: Any, query: torch.Tensor, key: torch.Tensor) -> "Sparsity | None":
        """The block mask's sparsity (fake or real tensors, in the op's tuple: the sequence lengths,
        then counts and indices of partial and full key blocks, ..., the two block sizes, mask_mod),
        or None where the dense loop is as good (one key block) or the tuple is not as expected."""
        if not isinstance(block_mask, (tuple, list)) or len(block_mask) < 9:
            return None
        kv_num, kv_idx, full_num, full_idx = block_mask[2:6]
        q_block, kv_block = block_mask[-3], block_mask[-2]
        b, h, m, _ = query.shape
        n = key.shape[2]
        if not all(isinstance(x, int) and 16 <= x and x & (x - 1) == 0 for x in (q_block, kv_block)) \
                or kv_block >= n:
            return None
        pairs = [(kv_num, kv_idx)] + ([(full_num, full_idx)] if full_num is not None else [])
        for num, idx in pairs:
            if not (isinstance(num, torch.Tensor) and isinstance(idx, torch.Tensor) and num.dtype == idx.dtype == torch.int32
                    and num.dim() == 3 and idx.dim() == 4 and tuple(idx.shape[:3]) == tuple(num.shape)
                    and num.is_contiguous() and idx.is_contiguous() and tuple(num.shape) == tuple(kv_num.shape)
                    and tuple(idx.shape) == tuple(kv_idx.shape)):
                return None
        sb, sh, qb, kb = kv_idx.shape
        if b % sb or h % sh or qb * q_block < m:
            return None
        return Sparsity(q_block, kv_block, full_num is not None, (sb, sh, qb, kb))

    def constexprs(self, block_n: int) -> dict[str, int]:
        """The kernel's compile-time sizes for a key tile of block_n (MULT tiles a key block)."""
        sb, sh, qb, kb = self.sizes
        return dict(SPARSE_B=sb, SPARSE_H=sh, QB=qb, KB=kb, Q_BLOCK=self.q_block, KV_BLOCK=self.kv_block,
                    MULT=self.kv_block // block_n)


@dataclass(frozen=True)
class Launch:
    """Tile sizes and launch settings, fixed (not searched). On the GPU, 16-bit data with head dims up
    to 128: 64 queries by 64 keys, 4 warps, 3 stages, the fastest of twelve settings on each of six
    H100 cases (docs/design.md); f32 and head dims of 256: 128 (64) queries by 32 keys, 4 warps up to
    64 and 8 beyond, what a tile of each fits in shared memory (not measured). Small tiles under
    the interpreter. Under a block mask the tiles are at most its blocks."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int

    @staticmethod
    def pick(head_dim: int, dtype: torch.dtype, interpret: bool, sparsity: Sparsity | None = None) -> "Launch":
        if interpret:
            lc = Launch(32, 32, 4, 1)
        elif dtype == torch.float32 or head_dim > 128:
            lc = Launch(128 if head_dim <= 128 else 64, 32, 4 if head_dim <= 64 else 8, 3 if head_dim <= 128 else 2)
        else:
            lc = Launch(64, 64, 4, 3)
        if sparsity is None:
            return lc
        return Launch(min(lc.block_m, sparsity.q_block), min(lc.block_n, sparsity.kv_block), lc.num_warps,
                      lc.num_stages)


class FlexForward:
    """Callable in the op's place: (query, key, value, score_mod, block_mask, scale, kernel_options,
    score_mod_other_buffers, mask_mod_other_buffers) -> the op's outputs."""

    kernel_name = KERNEL_NAME

    def __init__(self, score_mod: torch.fx.GraphModule, mask_mod: torch.fx.GraphModule | None,
                 query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, outputs: Sequence[torch.Tensor],
                 score_buffers: Sequence[torch.Tensor], mask_buffers: Sequence[torch.Tensor],
                 block_mask: Any = None) -> None:
        self.interpret = query.device.type == "cpu"
        self.buffer_layouts = [(tuple(b.shape), tuple(b.stride())) for b in (*score_buffers, *mask_buffers)]
        self.sparsity = sp = Sparsity.of(block_mask, query, key)
        # shapes are static: the grid, the size arguments and the constexprs are fixed at lowering
        self.launch = lc = Launch.pick(query.shape[-1], query.dtype, self.interpret, sp)
        b, h, m, d = query.shape
        n = key.shape[2]
        self._bodies = (score_mod, mask_mod, self.buffer_layouts[:len(score_buffers)],
                        self.buffer_layouts[len(score_buffers):], query.dtype, d, n)
        self.source = self.source_for(self.interpret)
        self.outputs = [(tuple(o.shape), tuple(o.stride()), o.dtype) for o in outputs]
        self.grid = (math.ceil(m / lc.block_m), b * h)
        self.sizes = (h, m, h // key.shape[1], int(key.shape[0] == b))   # H, M, GROUP, KV_BATCH
        self.constexprs = {"N": n, "BLOCK_M": lc.block_m, "BLOCK_N": lc.block_n, "D": d, "DV": value.shape[-1]}
        if sp is not None:
            self.constexprs.update(sp.constexprs(lc.block_n))
        self._launcher: FastLauncher | None = None

    def source_for(self, interpret: bool) -> str:
        """The kernel's module text for the interpreter or for the GPU (f32 products in TF32 where
        torch's matmul setting allows it, as eager's f32 matmul would)."""
        score_mod, mask_mod, score_layouts, mask_layouts, dtype, head_dim, n = self._bodies
        n_divisible = n % Launch.pick(head_dim, dtype, interpret, self.sparsity).block_n == 0
        precision = None
        if dtype == torch.float32 and not interpret:
            precision = "tf32" if torch.backends.cuda.matmul.allow_tf32 else "ieee"
        sp = self.sparsity
        return kernel_source(KERNEL_NAME, prelude(interpret), score_mod, mask_mod, score_layouts, mask_layouts,
                             precision, dtype, interpret, sp is not None, sp is not None and sp.has_full,
                             n_divisible)

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
        sparse = ()
        if self.sparsity is not None:   # the counts and indices of partial blocks, then of full ones
            sparse = tuple(block_mask[2:6]) if self.sparsity.has_full else (*block_mask[2:4], *block_mask[2:4])
        args = (query, key, value, out, lse, maxs, *buffers, *sparse, *query.stride(), *key.stride(),
                *value.stride(), *out.stride(), *self.sizes, float(scale))
        self._launcher.launch(self.grid, args, self.constexprs, self.launch.num_warps, self.launch.num_stages)
        return outs
