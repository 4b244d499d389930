"""Normalizations (layer norm over several trailing dims; batch, layer, group, instance, RMS norms;
group/instance norm after 2-D and 3-D convolutions), softmax/log-softmax over any dim, and
attention-score blocks (QK^T, scale, mask, softmax)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .base import In, Program, fn_program

F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: (1e-3, 1e-3), BF16: (5e-2, 5e-2)}


class RMSNorm(nn.Module):
    def __init__(self, n: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.rand(n) + 0.5)
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


class ConvNorm(nn.Module):
    """A convolution followed by a group or instance norm and an activation."""

    def __init__(self, dims: int, cin: int, cout: int, norm: str, groups: int = 8) -> None:
        super().__init__()
        conv = nn.Conv2d if dims == 2 else nn.Conv3d
        self.conv = conv(cin, cout, 3, padding=1)
        if norm == "group":
            self.norm = nn.GroupNorm(groups, cout)
        else:
            self.norm = (nn.InstanceNorm2d if dims == 2 else nn.InstanceNorm3d)(cout, affine=True)

    def forward(self, x):
        return F.silu(self.norm(self.conv(x)))


def layer_norms_multi() -> list[Program]:
    """Layer norm over [C, H, W] (tens of thousands of elements per row)."""
    out = []
    cases = (("c64_h32_w32_f32", (1024, 64, 32, 32), (3, 5, 7, 9), F32),
             ("c256_h16_w16_f32", (1024, 256, 16, 16), (2, 6, 5, 11), F32),
             ("c96_h56_w56_bf16", (256, 96, 56, 56), (3, 4, 9, 7), BF16),
             ("c3_h224_w224_f32", (512, 3, 224, 224), (2, 3, 13, 17), F32))
    for name, full_shape, tiny_shape, dtype in cases:
        full, tiny = dict(zip("nchw", full_shape)), dict(zip("nchw", tiny_shape))
        out.append(Program(f"layernorm_chw_{name}", "layernorm_multi",
                           lambda s: nn.LayerNorm((s["c"], s["h"], s["w"])), (In(("n", "c", "h", "w")),),
                           full, tiny, dtype, TOL))
    out.append(fn_program("layernorm_hw_noaffine_f32", "layernorm_multi",
                          lambda x: F.layer_norm(x, x.shape[-2:]), (In(("n", "h", "w")),),
                          {"n": 4096, "h": 128, "w": 130}, {"n": 5, "h": 9, "w": 13}, tolerances=TOL))
    return out


def plain_norms() -> list[Program]:
    rows, trows = {"r": 32768, "c": 4096}, {"r": 17, "c": 129}
    img, timg = {"n": 64, "c": 128, "h": 64, "w": 64}, {"n": 3, "c": 8, "h": 5, "w": 7}
    out = [
        Program("layernorm_last_f32", "norm", lambda s: nn.LayerNorm(s["c"]), (In(("r", "c")),), rows, trows, F32, TOL),
        Program("layernorm_last_bf16", "norm", lambda s: nn.LayerNorm(s["c"]), (In(("r", "c")),), rows, trows, BF16, TOL),
        Program("rmsnorm_last_f32", "norm", lambda s: RMSNorm(s["c"]), (In(("r", "c")),), rows, trows, F32, TOL),
        Program("rmsnorm_last_bf16", "norm", lambda s: RMSNorm(s["c"]), (In(("r", "c")),), rows, trows, BF16, TOL),
        Program("batchnorm2d_eval_f32", "norm", lambda s: _bn_eval(s["c"]), (In(("n", "c", "h", "w")),), img, timg, F32, TOL),
        fn_program("batchnorm2d_batchstats_f32", "norm",
                   lambda x: F.batch_norm(x, None, None, training=True), (In(("n", "c", "h", "w")),), img, timg,
                   tolerances=TOL),
        fn_program("batchnorm1d_batchstats_f32", "norm",
                   lambda x: F.batch_norm(x, None, None, training=True), (In(("r", "c")),), rows, trows,
                   tolerances=TOL),
        Program("groupnorm_f32", "norm", lambda s: nn.GroupNorm(8, s["c"]), (In(("n", "c", "h", "w")),), img, timg, F32, TOL),
        Program("instancenorm2d_f32", "norm", lambda s: nn.InstanceNorm2d(s["c"], affine=True),
                (In(("n", "c", "h", "w")),), img, timg, F32, TOL),
        Program("groupnorm_bf16", "norm", lambda s: nn.GroupNorm(4, s["c"]), (In(("n", "c", "h", "w")),), img, timg, BF16, TOL),
    ]
    return out


def _bn_eval(c: int) -> nn.Module:
    bn = nn.BatchNorm2d(c)
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 1.5)
    return bn


def conv_norms() -> list[Program]:
    out = []
    for dims, norm in ((2, "group"), (2, "instance"), (3, "group"), (3, "instance")):
        if dims == 2:
            full, tiny, shape = {"n": 32, "ci": 64, "co": 64, "h": 112, "w": 112}, \
                {"n": 2, "ci": 3, "co": 8, "h": 7, "w": 9}, ("n", "ci", "h", "w")
        else:
            full, tiny, shape = {"n": 4, "ci": 32, "co": 32, "d": 32, "h": 64, "w": 64}, \
                {"n": 2, "ci": 3, "co": 8, "d": 3, "h": 5, "w": 6}, ("n", "ci", "d", "h", "w")
        out.append(Program(f"conv{dims}d_{norm}norm_silu_f32", "conv_norm",
                           (lambda dims, norm: lambda s: ConvNorm(dims, s["ci"], s["co"], norm))(dims, norm),
                           (In(shape),), full, tiny, F32, TOL))
    out.append(Program("conv2d_groupnorm_silu_bf16", "conv_norm", lambda s: ConvNorm(2, s["ci"], s["co"], "group", 16),
                       (In(("n", "ci", "h", "w")),), {"n": 32, "ci": 64, "co": 128, "h": 64, "w": 64},
                       {"n": 2, "ci": 3, "co": 16, "h": 6, "w": 5}, BF16, TOL))
    return out


def softmaxes() -> list[Program]:
    full, tiny = {"a": 64, "b": 512, "c": 2050}, {"a": 3, "b": 7, "c": 33}
    out = []
    for op in ("softmax", "log_softmax"):
        for dn, d in (("first", 0), ("middle", 1), ("last", 2)):
            f = (lambda op, d: lambda x: getattr(torch, op)(x, d))(op, d)
            out.append(fn_program(f"{op}_{dn}_f32", "softmax", f, (In(("a", "b", "c")),), full, tiny, tolerances=TOL))
    out.append(fn_program("softmax_last_bf16", "softmax", lambda x: torch.softmax(x, -1), (In(("a", "b", "c")),),
                          full, tiny, BF16, tolerances=TOL))
    out.append(fn_program("softmax_last_f32_upcast_bf16", "softmax", lambda x: torch.softmax(x.float(), -1).to(x.dtype),
                          (In(("a", "b", "c")),), full, tiny, BF16, tolerances=TOL))
    out.append(fn_program("softmax_vocab_rows_f32", "softmax", lambda x: torch.softmax(x, -1), (In(("r", "v")),),
                          {"r": 4096, "v": 50257}, {"r": 5, "v": 1001}, tolerances=TOL))
    out.append(fn_program("log_softmax_noncontig_f32", "softmax", lambda x: torch.log_softmax(x, -1),
                          (In(("r", "v"), noncontig=True),), {"r": 8192, "v": 4096}, {"r": 13, "v": 37}, tolerances=TOL))
    return out


def _scores(causal: bool, with_v: bool):
    def f(q, k, *rest):
        s = q @ k.transpose(-1, -2) * (1.0 / math.sqrt(q.shape[-1]))
        if causal:
            n = s.shape[-1]
            mask = torch.ones(n, n, dtype=torch.bool, device=s.device).tril()
            s = s.masked_fill(~mask, float("-inf"))
        else:
            s = s + rest[0]
        p = torch.softmax(s.float(), -1).to(q.dtype)
        return p @ rest[-1] if with_v else p
    return f


class FlexAlibiCausal(nn.Module):
    """flex_attention with a score_mod (ALiBi's per-head slope times the distance, causal by -inf):
    the attention PyTorch generates a fused kernel for under torch.compile."""

    def __init__(self, heads: int) -> None:
        super().__init__()
        self.register_buffer("slopes", torch.exp2(-8.0 * torch.arange(1, heads + 1) / heads))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        from torch.nn.attention.flex_attention import flex_attention
        slopes = self.slopes

        def score_mod(score, b, h, qi, ki):
            return torch.where(qi >= ki, score + slopes[h] * (ki - qi), float("-inf"))
        return flex_attention(q, k, v, score_mod=score_mod)


class FlexCausalBlockMask(nn.Module):
    """flex_attention under a causal block mask built in the forward (128-token blocks; 16 for the
    CPU's short sequences): the key blocks above the diagonal are skipped, the diagonal's masked."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        block = 128 if q.shape[2] >= 256 else 16
        mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, q.shape[2], k.shape[2],
                                 device=q.device, BLOCK_SIZE=block)
        return flex_attention(q, k, v, block_mask=mask)


def attention() -> list[Program]:
    full, tiny = {"b": 8, "h": 16, "s": 1024, "d": 64}, {"b": 2, "h": 3, "s": 19, "d": 8}
    qk = (In(("b", "h", "s", "d")), In(("b", "h", "s", "d")))
    tol = {F32: (2e-3, 2e-3), BF16: (5e-2, 5e-2)}
    return [
        fn_program("attn_scores_causal_f32", "attention", _scores(True, False), qk, full, tiny, tolerances=tol),
        fn_program("attn_scores_causal_bf16", "attention", _scores(True, False), qk, full, tiny, BF16, tolerances=tol),
        fn_program("attn_scores_additive_mask_f32", "attention", _scores(False, False),
                   qk + (In(("b", "one", "one2", "s")),), {**full, "one": 1, "one2": 1}, {**tiny, "one": 1, "one2": 1},
                   tolerances=tol),
        fn_program("attn_causal_pv_bf16", "attention", _scores(True, True), qk + (In(("b", "h", "s", "d")),),
                   full, tiny, BF16, tolerances=tol),
        Program("flex_attn_alibi_causal_bf16", "attention", lambda s: FlexAlibiCausal(s["h"]), qk + (In(("b", "h", "s", "d")),),
                full, {**tiny, "s": 32, "d": 16}, BF16, tolerances=tol),
        Program("flex_attn_causal_block_mask_bf16", "attention", lambda s: FlexCausalBlockMask(),
                qk + (In(("b", "h", "s", "d")),), full, {**tiny, "s": 40, "d": 16}, BF16, tolerances=tol),
    ]


def programs() -> list[Program]:
    return layer_norms_multi() + plain_norms() + conv_norms() + softmaxes() + attention()
