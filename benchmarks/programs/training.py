"""Training steps: the forward and backward of what training code runs (norms, softmaxes, losses,
activations, an MLP, attention, RoPE, an embedding, conv + batch norm in train mode, a pre-norm
transformer block), checked and timed as one step (`train.py`).

Note: a backward graph holds patterns the forward-only families never show: weight and bias
gradients reduced over the batch, an embedding's scatter-add, norm and softmax backward (a row
reduction feeding a pointwise), saved activations read again. Targets and RoPE tables take no
gradient, as in a training loop; nothing draws random numbers (no dropout).
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from .base import In, Program, Sizes, fn_program, short
from .layers import _rope_half
from .norms import ConvNorm, RMSNorm

F32, BF16 = torch.float32, torch.bfloat16
CAT = "training"
TOL = {F32: (1e-3, 1e-3), BF16: (5e-2, 5e-2)}    # gradients: sums over the batch in another order
GEMM = {F32: (1e-2, 1e-2), BF16: (6e-2, 6e-2)}   # GEMMs and convolutions (TF32 on GPU)
MEAN = {F32: (1e-3, 1e-7), BF16: (5e-2, 1e-5)}    # a mean's gradients, of order 1/numel: no wide atol
# rows of activations (134 MB of f32 per tensor; a step moves four or more) and their CPU twin
ROWS, TROWS = {"r": 8192, "c": 4096}, {"r": 17, "c": 129}
# tokens of a small language model (8 x 1024 tokens of width 768) and the CPU twin
TOKENS, TTOKENS = {"b": 8, "s": 1024, "d": 768, "h": 12}, {"b": 2, "s": 7, "d": 24, "h": 3}


def train_fn(name: str, fn: Callable[..., Any], inputs: tuple[In, ...], full: Sizes, tiny: Sizes,
             dtype: torch.dtype = F32, tolerances: Any = TOL) -> Program:
    """A train program without weights: the step differentiates fn with respect to its inputs."""
    return replace(fn_program(f"train_{name}_{short(dtype)}", CAT, fn, inputs, full, tiny, dtype,
                              tolerances=tolerances), train=True)


def train_module(name: str, module: Callable[[Sizes], nn.Module], inputs: tuple[In, ...], full: Sizes,
                 tiny: Sizes, dtype: torch.dtype = F32, tolerances: Any = TOL, batch_stats: bool = False) -> Program:
    """A train program with weights: the step differentiates its inputs and parameters."""
    return Program(f"train_{name}_{short(dtype)}", CAT, module, inputs, full, tiny, dtype, tolerances,
                   train=True, batch_stats=batch_stats)


class BiasAct(nn.Module):
    """A bias add and an activation (a GEMM's epilogue split off): the bias gradient sums the batch."""

    def __init__(self, c: int, act: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(c) * 0.1)
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(x + self.bias)


class MLP(nn.Module):
    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class Residual(nn.Module):
    """x + mlp(ln(x)): the residual stream's gradient joins the MLP's."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.ln, self.mlp = nn.LayerNorm(d), MLP(d, 4 * d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.ln(x))


class EmbeddingNorm(nn.Module):
    """Token embeddings and a layer norm (BERT's embeddings without dropout)."""

    def __init__(self, vocab: int, d: int) -> None:
        super().__init__()
        self.emb, self.ln = nn.Embedding(vocab, d), nn.LayerNorm(d)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.ln(self.emb(ids))


class ConvBNReLU(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)))


class Block(nn.Module):
    """A pre-norm transformer block (GPT-2's layout): causal attention through SDPA, then an MLP,
    each behind a layer norm and added to the residual stream."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = MLP(d, 4 * d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


def _attention_explicit(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(QK^T / sqrt(d)) V with a causal mask, as attention is written without SDPA."""
    s = q @ k.transpose(-1, -2) * (1.0 / math.sqrt(q.shape[-1]))
    n = s.shape[-1]
    mask = torch.ones(n, n, dtype=torch.bool, device=s.device).tril()
    return torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ v


def norms_and_softmaxes() -> list[Program]:
    x = (In(("r", "c")),)
    return [
        train_module("layernorm", lambda s: nn.LayerNorm(s["c"]), x, ROWS, TROWS),
        train_module("layernorm", lambda s: nn.LayerNorm(s["c"]), x, ROWS, TROWS, BF16),
        train_module("rmsnorm", lambda s: RMSNorm(s["c"]), x, ROWS, TROWS),
        train_module("rmsnorm", lambda s: RMSNorm(s["c"]), x, ROWS, TROWS, BF16),
        train_fn("softmax_last", lambda t: torch.softmax(t, -1), x, ROWS, TROWS),
        train_fn("log_softmax_last", lambda t: torch.log_softmax(t, -1), x, ROWS, TROWS),
    ]


def losses() -> list[Program]:
    logits, tlogits = {"r": 8192, "v": 32000}, {"r": 19, "v": 301}    # 1 GB of f32 logits
    ce = (In(("r", "v")), In(("r",), "int", high="v"))
    target = (In(("r", "c")), In(("r", "c"), grad=False))
    return [
        train_fn("cross_entropy_mean", lambda x, t: F.cross_entropy(x, t), ce, logits, tlogits, F32, MEAN),
        train_fn("cross_entropy_mean", lambda x, t: F.cross_entropy(x, t), ce, logits, tlogits, BF16, MEAN),
        train_fn("mse_mean", lambda x, y: F.mse_loss(x, y), target, ROWS, TROWS, F32, MEAN),
        train_fn("smooth_l1_mean", lambda x, y: F.smooth_l1_loss(x, y, beta=0.5), target, ROWS, TROWS, F32, MEAN),
    ]


def activations() -> list[Program]:
    x, two = (In(("r", "c")),), (In(("r", "c")), In(("r", "c")))
    gelu_tanh = lambda t: F.gelu(t, approximate="tanh")   # noqa: E731
    return [
        train_module("bias_gelu_erf", lambda s: BiasAct(s["c"], F.gelu), x, ROWS, TROWS),
        train_module("bias_gelu_tanh", lambda s: BiasAct(s["c"], gelu_tanh), x, ROWS, TROWS),
        train_module("bias_gelu_tanh", lambda s: BiasAct(s["c"], gelu_tanh), x, ROWS, TROWS, BF16),
        train_fn("silu", F.silu, x, ROWS, TROWS),
        train_fn("swiglu", lambda a, b: F.silu(a) * b, two, ROWS, TROWS),
        train_fn("swiglu", lambda a, b: F.silu(a) * b, two, ROWS, TROWS, BF16),
    ]


def reductions() -> list[Program]:
    return [
        train_fn("mean_middle", lambda t: t.mean(1), (In(("a", "b", "c")),),
                 {"a": 64, "b": 512, "c": 2050}, {"a": 3, "b": 37, "c": 29}, F32, MEAN),
        # a bias's gradient in the forward: many rows, few columns
        train_fn("sum_batch", lambda t: t.sum(0), (In(("r", "c")),), {"r": 262144, "c": 257}, {"r": 301, "c": 7}),
        train_module("bias_add_rows", lambda s: BiasAct(s["c"], lambda t: t), (In(("r", "c")),),
                     {"r": 262144, "c": 257}, {"r": 301, "c": 7}),
    ]


def layers() -> list[Program]:
    mlp, tmlp = {"t": 8192, "d": 1024}, {"t": 23, "d": 24}             # a 128 MB hidden activation
    qkv, tqkv = {"b": 8, "h": 16, "s": 1024, "d": 64}, {"b": 2, "h": 3, "s": 19, "d": 8}
    heads = (In(("b", "h", "s", "d")),) * 3
    rope, trope = {"b": 8, "h": 32, "s": 2048, "d": 128}, {"b": 2, "h": 3, "s": 7, "d": 16}
    tables = (In(("s", "d"), grad=False), In(("s", "d"), grad=False))
    emb, temb = {"t": 16384, "v": 32000, "d": 1024}, {"t": 37, "v": 53, "d": 24}
    img, timg = {"n": 32, "ci": 64, "co": 64, "h": 64, "w": 64}, {"n": 2, "ci": 3, "co": 8, "h": 7, "w": 9}
    sdpa = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)   # noqa: E731
    return [
        train_module("mlp_gelu", lambda s: MLP(s["d"], 4 * s["d"]), (In(("t", "d")),), mlp, tmlp, F32, GEMM),
        train_module("mlp_gelu", lambda s: MLP(s["d"], 4 * s["d"]), (In(("t", "d")),), mlp, tmlp, BF16, GEMM),
        train_module("residual_mlp", lambda s: Residual(s["d"]), (In(("t", "d")),), mlp, tmlp, F32, GEMM),
        train_fn("attn_sdpa_causal", sdpa, heads, qkv, tqkv, F32, GEMM),
        train_fn("attn_explicit_causal", _attention_explicit, heads, qkv, tqkv, F32, GEMM),
        train_fn("rope_qk", lambda q, k, c, s: (_rope_half(q, c, s), _rope_half(k, c, s)),
                 (In(("b", "h", "s", "d")), In(("b", "h", "s", "d"))) + tables, rope, trope, BF16),
        train_module("embedding_layernorm", lambda s: EmbeddingNorm(s["v"], s["d"]),
                     (In(("t",), "int", high="v"),), emb, temb),
        train_module("conv_batchnorm_relu", lambda s: ConvBNReLU(s["ci"], s["co"]), (In(("n", "ci", "h", "w")),),
                     img, timg, F32, GEMM, batch_stats=True),
        train_module("conv_groupnorm_silu", lambda s: ConvNorm(2, s["ci"], s["co"], "group"),
                     (In(("n", "ci", "h", "w")),), img, timg, F32, GEMM),
        train_module("transformer_block", lambda s: Block(s["d"], s["h"]), (In(("b", "s", "d")),),
                     TOKENS, TTOKENS, F32, GEMM),
        train_module("transformer_block", lambda s: Block(s["d"], s["h"]), (In(("b", "s", "d")),),
                     TOKENS, TTOKENS, BF16, GEMM),
    ]


def programs() -> list[Program]:
    return norms_and_softmaxes() + losses() + activations() + reductions() + layers()
