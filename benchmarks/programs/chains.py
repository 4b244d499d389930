"""Convolutions (2-D, 3-D, transposed 2-D/3-D, depthwise) and GEMMs (linear, matmul, bmm) followed
by a chain of two to five ops, in the style of KernelBench's level 2: activations, constant and
per-channel arithmetic, residual adds, group/batch/instance/layer/L2 norms, softmax and logsumexp
over channels, min/max/sum/mean over channels or the spatial dims, and pooling.

Note: a program is one row of CHAINS: the head (`2d`, `3d`, `t2d`, `t3d`, `dw` depthwise, `linear`,
`matmul` x @ W, `bmm`) with its keyword arguments, and its steps as `op` or `op:args` (see
`Chain._step`). Reductions keep their dims. A name with `noncontig` takes a transposed view as the
head's last input; `addin`/`mulin` steps take one more input shaped like the head's output.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .base import Fn, In, Program, Sizes

F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: (5e-3, 5e-3), BF16: (5e-2, 5e-2)}   # cuDNN/cuBLAS may pick other algorithms (TF32 for conv)
REDUCE = {"sum", "mean", "max", "min", "lse", "softmax", "logsoftmax", "meansub"}   # their args are dims
# by the number of spatial dims after the channels (0: a GEMM's [m, n], 1: a bmm's [b, m, n])
BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
INSTANCE_NORMS = (None, nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d)
CONVS = {"2d": nn.Conv2d, "dw": nn.Conv2d, "3d": nn.Conv3d, "t2d": nn.ConvTranspose2d, "t3d": nn.ConvTranspose3d}


class MatMul(nn.Module):
    """x @ W, W a [k, n] parameter (no bias)."""

    def __init__(self, k: int, n: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(k, n) / k ** 0.5)

    def forward(self, x):
        return x @ self.weight


def _conv_len(n: int, kind: str, kw: dict[str, Any]) -> int:
    """Length of one spatial dim of the convolution's output."""
    k, st, p = kw["kernel_size"], kw.get("stride", 1), kw.get("padding", 0)
    if kind.startswith("t"):
        return (n - 1) * st - 2 * p + k + kw.get("output_padding", 0)
    return (n + 2 * p - k) // st + 1


def _head(kind: str, s: Sizes, kw: dict[str, Any]) -> tuple[nn.Module, int, int, int]:
    """The head, its channel count (dim 1), its number of spatial dims after dim 1, its last dim's length."""
    if kind in CONVS:
        groups = {"groups": s["ci"]} if kind == "dw" else {}
        dims = 3 if kind.endswith("3d") else 2
        return CONVS[kind](s["ci"], s["co"], **kw, **groups), s["co"], dims, _conv_len(s["w"], kind, kw)
    if kind == "linear":
        return nn.Linear(s["k"], s["n"]), s["n"], 0, s["n"]
    if kind == "matmul":
        return MatMul(s["k"], s["n"]), s["n"], 0, s["n"]
    if kind == "bmm":
        return Fn(torch.bmm), s["m"], 1, s["n"]
    raise ValueError(kind)


def _affine(norm: nn.Module) -> nn.Module:
    """Random affine weights (and running statistics) instead of the initial ones and zeros."""
    with torch.no_grad():
        if getattr(norm, "weight", None) is not None:
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
        if getattr(norm, "running_mean", None) is not None:
            norm.running_mean.uniform_(-0.5, 0.5)
            norm.running_var.uniform_(0.5, 1.5)
    return norm


class Chain(nn.Module):
    """A convolution or a GEMM followed by a chain of steps; steps with weights own them (by position)."""

    def __init__(self, kind: str, s: Sizes, kw: dict[str, Any], steps: tuple[str, ...]) -> None:
        super().__init__()
        self.head, c, self.dims, last = _head(kind, s, kw)
        self.n_head = 2 if kind == "bmm" else 1
        self.steps = tuple(self._parse(st) for st in steps)
        self.parts, self.params = nn.ModuleDict(), nn.ParameterDict()
        per_channel = (c,) + (1,) * self.dims
        for i, (op, args) in enumerate(self.steps):
            key = str(i)
            if op == "gn":
                self.parts[key] = _affine(nn.GroupNorm(s["ng"], c))
            elif op == "bn":
                self.parts[key] = _affine(BATCH_NORMS[self.dims](c))
            elif op == "in":
                self.parts[key] = INSTANCE_NORMS[self.dims](c)
            elif op == "ln":
                self.parts[key] = _affine(nn.LayerNorm(last))
            elif op == "dropout":
                self.parts[key] = nn.Dropout(0.2)
            elif op == "scale":
                self.params[key] = nn.Parameter(torch.rand(per_channel) + 0.5)
            elif op == "bias":
                self.params[key] = nn.Parameter(torch.randn(per_channel) * 0.5)
            elif op in ("addp", "minp"):
                self.params[key] = nn.Parameter(torch.tensor(args[0] if args else 1.0))

    @staticmethod
    def _parse(step: str) -> tuple[str, tuple]:
        op, _, arg = step.partition(":")
        conv = int if op in REDUCE or op.endswith("pool") else float
        return op, tuple(conv(a) for a in arg.split(",")) if arg else ()

    def forward(self, *xs):
        h = y = self.head(*xs[:self.n_head])
        for i, (op, args) in enumerate(self.steps):
            y = self._step(str(i), op, args, y, h, xs)
        return y

    def _step(self, key: str, op: str, a: tuple, y, h, xs):
        # activations
        if op in ("relu", "tanh", "sigmoid"):
            return getattr(torch, op)(y)
        if op in ("gelu", "mish", "hardswish", "relu6"):
            return getattr(F, op)(y)
        if op == "swish":
            return y * torch.sigmoid(y)
        if op == "leaky":
            return F.leaky_relu(y, a[0])
        if op == "xmish":
            return y * F.mish(y)
        # constants, parameters, residuals
        if op == "add":
            return y + a[0]
        if op == "sub":
            return y - a[0]
        if op == "mul":
            return y * a[0]
        if op == "div":
            return y / a[0]
        if op == "clamp":
            return torch.clamp(y, a[0], a[1])
        if op == "minc":     # against a 0-d tensor made in forward
            return torch.min(y, torch.tensor(a[0], device=y.device, dtype=y.dtype))
        if op == "minp":     # against a 0-d parameter
            return torch.min(y, self.params[key])
        if op == "scale":
            return y * self.params[key]
        if op in ("bias", "addp"):
            return y + self.params[key]
        if op == "res":
            return y + h
        if op == "double":
            return y + y
        if op == "resx":
            return y + xs[0]
        if op == "addin":
            return y + xs[-1]
        if op == "mulin":
            return y * xs[-1]
        # norms, dropout
        if op in ("gn", "bn", "in", "ln", "dropout"):
            return self.parts[key](y)
        if op == "l2n":
            return F.normalize(y, dim=1)
        # reductions over dims (kept), pooling
        if op == "sum":
            return y.sum(a, keepdim=True)
        if op == "mean":
            return y.mean(a, keepdim=True)
        if op == "max":
            return torch.max(y, a[0], keepdim=True).values
        if op == "min":
            return torch.min(y, a[0], keepdim=True)[0]
        if op == "lse":
            return torch.logsumexp(y, a[0], keepdim=True)
        if op == "softmax":
            return torch.softmax(y, a[0])
        if op == "logsoftmax":
            return torch.log_softmax(y, a[0])
        if op == "meansub":
            return y - y.mean(a, keepdim=True)
        if op == "flatten":
            return y.flatten(1)
        if op == "maxpool":
            return (F.max_pool2d if self.dims == 2 else F.max_pool3d)(y, a[0])
        if op == "avgpool":
            return (F.avg_pool2d if self.dims == 2 else F.avg_pool3d)(y, a[0])
        raise ValueError(op)


K3, K3P1, K4S2 = {"kernel_size": 3}, {"kernel_size": 3, "padding": 1}, {"kernel_size": 4, "stride": 2, "padding": 1}
K3S2 = {"kernel_size": 3, "stride": 2, "padding": 1}
K3UP = {**K3S2, "output_padding": 1}   # a transposed conv doubling each spatial dim

CHAINS = (   # name, head, head kwargs, steps, full sizes, tiny sizes, dtype
    # 2-D convolutions
    ("conv2d_gn_tanh_hswish_res_lse_f32", "2d", K3, ("gn", "tanh", "hardswish", "res", "lse:1"),
     {"n": 128, "ci": 8, "co": 64, "h": 64, "w": 64, "ng": 8},
     {"n": 2, "ci": 3, "co": 6, "h": 7, "w": 9, "ng": 3}, F32),
    ("conv2d_sub_tanh_sub_avgpool_f32", "2d", K3, ("sub:0.5", "tanh", "sub:0.2", "avgpool:2"),
     {"n": 128, "ci": 3, "co": 16, "h": 128, "w": 128}, {"n": 2, "ci": 3, "co": 5, "h": 9, "w": 11}, F32),
    ("conv2d_min_tanh_tanh_f32", "2d", K3, ("min:1", "tanh", "tanh"),
     {"n": 128, "ci": 3, "co": 17, "h": 126, "w": 126}, {"n": 2, "ci": 3, "co": 7, "h": 10, "w": 13}, F32),
    ("conv2d_scale_max_mish_bf16", "2d", K3P1, ("scale", "max:1", "mish"),
     {"n": 128, "ci": 16, "co": 64, "h": 64, "w": 64}, {"n": 2, "ci": 4, "co": 6, "h": 8, "w": 9}, BF16),
    ("conv2d_instnorm_div_noncontig_f32", "2d", K3, ("in", "div:2.0"),
     {"n": 128, "ci": 8, "co": 128, "h": 64, "w": 64}, {"n": 2, "ci": 3, "co": 4, "h": 9, "w": 10}, F32),
    ("conv2d_bn_relu_gap_softmax_f32", "2d", K3P1, ("bn", "relu", "mean:2,3", "flatten", "softmax:1"),
     {"n": 128, "ci": 32, "co": 128, "h": 64, "w": 64}, {"n": 2, "ci": 3, "co": 7, "h": 8, "w": 9}, F32),
    ("conv2d_stride2_hswish_relu_bf16", "2d", K3S2, ("hardswish", "relu"),
     {"n": 128, "ci": 64, "co": 128, "h": 128, "w": 128}, {"n": 2, "ci": 4, "co": 5, "h": 11, "w": 13}, BF16),
    ("conv2d_mish_mish_f32", "2d", K3, ("mish", "mish"),   # odd channels and images, as in KernelBench
     {"n": 512, "ci": 3, "co": 33, "h": 30, "w": 30}, {"n": 2, "ci": 3, "co": 5, "h": 9, "w": 8}, F32),
    ("conv2d_maxpool_sigmoid_sum_f32", "2d", K3, ("maxpool:2", "sigmoid", "sum:1,2,3"),
     {"n": 128, "ci": 8, "co": 64, "h": 96, "w": 96}, {"n": 2, "ci": 3, "co": 5, "h": 10, "w": 11}, F32),
    ("conv2d_k5_leaky_gelu_bias_scale_f32", "2d", {"kernel_size": 5, "padding": 2},
     ("leaky:0.2", "gelu", "bias", "mul:2.0"),
     {"n": 128, "ci": 16, "co": 32, "h": 96, "w": 96}, {"n": 2, "ci": 3, "co": 4, "h": 9, "w": 9}, F32),
    ("dwconv_bn_relu6_f32", "dw", K3P1, ("bn", "relu6"),
     {"n": 64, "ci": 96, "co": 96, "h": 112, "w": 112}, {"n": 2, "ci": 5, "co": 5, "h": 9, "w": 11}, F32),
    ("dwconv_mult2_stride2_bn_hswish_bf16", "dw", K3S2, ("bn", "hardswish"),   # a channel multiplier of 2
     {"n": 128, "ci": 32, "co": 64, "h": 128, "w": 128}, {"n": 2, "ci": 3, "co": 6, "h": 11, "w": 10}, BF16),
    # transposed 2-D convolutions
    ("conv_t2d_bias_clamp_scale_clamp_div_f32", "t2d", K3UP,
     ("bias", "clamp:0,1", "mul:2.0", "clamp:0,1", "div:2.0"),
     {"n": 128, "ci": 32, "co": 16, "h": 64, "w": 64}, {"n": 2, "ci": 3, "co": 4, "h": 5, "w": 6}, F32),
    ("conv_t2d_gap_bias_lse_sum_mul_f32", "t2d", K3, ("mean:2,3", "bias", "lse:1", "sum:2,3", "mul:10.0"),
     {"n": 128, "ci": 32, "co": 64, "h": 64, "w": 64}, {"n": 2, "ci": 3, "co": 5, "h": 6, "w": 7}, F32),
    ("conv_t2d_softmax_bias_scale_sigmoid_f32", "t2d", K4S2, ("softmax:1", "bias", "mul:2.0", "sigmoid"),
     {"n": 128, "ci": 32, "co": 64, "h": 32, "w": 32}, {"n": 2, "ci": 3, "co": 5, "h": 5, "w": 6}, F32),
    ("conv_t2d_maxpool_hardtanh_mean_tanh_f32", "t2d", K4S2, ("maxpool:2", "clamp:-1,1", "mean:2,3", "tanh"),
     {"n": 128, "ci": 64, "co": 64, "h": 48, "w": 48}, {"n": 2, "ci": 4, "co": 3, "h": 5, "w": 7}, F32),
    ("conv_t2d_mish_add_hardtanh_scale_bf16", "t2d", K3UP, ("mish", "add:0.5", "clamp:-1,1", "mul:2.0"),
     {"n": 128, "ci": 64, "co": 64, "h": 64, "w": 64}, {"n": 2, "ci": 3, "co": 4, "h": 6, "w": 5}, BF16),
    # 3-D convolutions
    ("conv3d_gn_min_clamp_dropout_f32", "3d", K3, ("gn", "minc:0.5", "clamp:0,1", "dropout"),
     {"n": 16, "ci": 16, "co": 32, "d": 32, "h": 64, "w": 64, "ng": 8},
     {"n": 2, "ci": 3, "co": 4, "d": 5, "h": 6, "w": 7, "ng": 2}, F32),
    ("conv3d_softmax_maxpool_maxpool_f32", "3d", K3, ("softmax:1", "maxpool:2", "maxpool:2"),
     {"n": 32, "ci": 8, "co": 16, "d": 16, "h": 64, "w": 64}, {"n": 2, "ci": 3, "co": 4, "d": 6, "h": 9, "w": 10}, F32),
    ("conv3d_div_maxpool_gap_bias_sum_f32", "3d", K3, ("div:2.0", "maxpool:2", "mean:2,3,4", "bias", "sum:1"),
     {"n": 32, "ci": 16, "co": 32, "d": 16, "h": 64, "w": 64}, {"n": 2, "ci": 3, "co": 5, "d": 5, "h": 7, "w": 8}, F32),
    ("conv3d_relu_leaky_gelu_sigmoid_bias_f32", "3d", K3, ("relu", "leaky:0.01", "gelu", "sigmoid", "bias"),
     {"n": 16, "ci": 3, "co": 16, "d": 32, "h": 64, "w": 64}, {"n": 2, "ci": 3, "co": 4, "d": 5, "h": 6, "w": 7}, F32),
    ("conv3d_hswish_relu_softmax_mean_bf16", "3d", K3P1, ("hardswish", "relu", "softmax:1", "mean:2,3,4"),
     {"n": 32, "ci": 8, "co": 32, "d": 16, "h": 64, "w": 64}, {"n": 2, "ci": 3, "co": 5, "d": 4, "h": 5, "w": 6}, BF16),
    ("conv3d_scale_instnorm_clamp_scale_max_f32", "3d", K3, ("scale", "in", "clamp:-1,1", "scale", "max:1"),
     {"n": 16, "ci": 16, "co": 32, "d": 16, "h": 64, "w": 64}, {"n": 2, "ci": 3, "co": 4, "d": 5, "h": 6, "w": 7}, F32),
    # transposed 3-D convolutions
    ("conv_t3d_addp_layernorm_avgpool_gelu_f32", "t3d", K3UP, ("addp", "ln", "avgpool:2", "gelu"),
     {"n": 16, "ci": 32, "co": 16, "d": 16, "h": 32, "w": 32}, {"n": 2, "ci": 3, "co": 4, "d": 3, "h": 4, "w": 5}, F32),
    ("conv_t3d_bn_meansub_noncontig_f32", "t3d", K3S2, ("bn", "meansub:2,3,4"),
     {"n": 16, "ci": 32, "co": 32, "d": 16, "h": 32, "w": 32}, {"n": 2, "ci": 3, "co": 4, "d": 3, "h": 5, "w": 4}, F32),
    ("conv_t3d_maxpool_maxpool_sum_bf16", "t3d", K3S2, ("maxpool:2", "maxpool:3", "sum:1"),
     {"n": 16, "ci": 32, "co": 64, "d": 16, "h": 32, "w": 32},
     {"n": 2, "ci": 3, "co": 3, "d": 4, "h": 5, "w": 7}, BF16),
    ("conv_t3d_scale_avgpool_bias_scale_f32", "t3d", K3S2, ("scale", "avgpool:2", "bias", "mul:1.5"),
     {"n": 16, "ci": 16, "co": 32, "d": 16, "h": 32, "w": 32}, {"n": 2, "ci": 3, "co": 4, "d": 3, "h": 5, "w": 6}, F32),
    ("conv_t3d_softmax_sigmoid_bf16", "t3d", K3UP, ("softmax:1", "sigmoid"),
     {"n": 16, "ci": 32, "co": 64, "d": 16, "h": 32, "w": 32},
     {"n": 2, "ci": 3, "co": 3, "d": 3, "h": 4, "w": 5}, BF16),
    # GEMMs: linear (x @ W^T + b), matmul (x @ W), bmm
    ("linear_dropout_mean_softmax_f32", "linear", {}, ("dropout", "mean:1", "softmax:1"),   # softmax of one value
     {"m": 16384, "k": 1024, "n": 4096}, {"m": 19, "k": 24, "n": 37}, F32),
    ("linear_bn_gelu_gn_mean_relu_f32", "linear", {}, ("bn", "gelu", "gn", "mean:1", "relu"),
     {"m": 8192, "k": 1024, "n": 4096, "ng": 16}, {"m": 19, "k": 24, "n": 33, "ng": 3}, F32),
    ("linear_sigmoid_sum_f32", "linear", {}, ("sigmoid", "sum:1"),
     {"m": 16384, "k": 2048, "n": 2048}, {"m": 19, "k": 24, "n": 37}, F32),
    ("linear_scale_double_clamp_lse_xmish_f32", "linear", {}, ("mul:2.0", "double", "clamp:-10,10", "lse:1", "xmish"),
     {"m": 8192, "k": 4096, "n": 4096}, {"m": 19, "k": 24, "n": 37}, F32),
    ("linear_swish_div_clamp_tanh_clamp_bf16", "linear", {}, ("swish", "div:2.0", "clamp:-1,1", "tanh", "clamp:-1,1"),
     {"m": 16384, "k": 4096, "n": 4096}, {"m": 19, "k": 24, "n": 37}, BF16),
    ("linear_gn_leaky_double_f32", "linear", {}, ("gn", "leaky:0.01", "double"),
     {"m": 16384, "k": 1024, "n": 2048, "ng": 8}, {"m": 19, "k": 24, "n": 30, "ng": 5}, F32),
    ("matmul_colmax_meansub_gelu_f32", "matmul", {}, ("max:0", "meansub:1", "gelu"),   # max over the batch
     {"m": 16384, "k": 1024, "n": 4096}, {"m": 19, "k": 24, "n": 37}, F32),
    ("bmm_instnorm_addin_mulin_f32", "bmm", {}, ("in", "addin", "mulin"),
     {"b": 128, "m": 512, "k": 256, "n": 1024}, {"b": 2, "m": 7, "k": 8, "n": 13}, F32),
    ("linear_layernorm_gelu_scale_bf16", "linear", {}, ("ln", "gelu", "mul:1.5"),
     {"m": 16384, "k": 1024, "n": 8192}, {"m": 19, "k": 24, "n": 37}, BF16),
    ("linear_minp_sub_f32", "linear", {}, ("minp:0.5", "sub:0.5"),
     {"m": 16384, "k": 1024, "n": 4096}, {"m": 19, "k": 24, "n": 37}, F32),
    ("linear_bias_hardtanh_mish_gn_bf16", "linear", {}, ("bias", "clamp:-1,1", "mish", "gn"),
     {"m": 8192, "k": 2048, "n": 4096, "ng": 32}, {"m": 19, "k": 24, "n": 35, "ng": 5}, BF16),
    ("linear_bias_gap_lse_gelu_resx_f32", "linear", {}, ("bias", "mean:1", "lse:1", "gelu", "resx"),
     {"m": 16384, "k": 4096, "n": 4096}, {"m": 19, "k": 24, "n": 37}, F32),
    ("bmm_scale_softmax_colsum_noncontig_f32", "bmm", {}, ("mul:0.125", "softmax:2", "sum:1"),
     {"b": 64, "m": 1024, "k": 128, "n": 1024}, {"b": 2, "m": 11, "k": 8, "n": 13}, F32),
    ("linear_relu_l2norm_scale_noncontig_f32", "linear", {}, ("relu", "l2n", "scale"),
     {"m": 16384, "k": 2048, "n": 2048}, {"m": 19, "k": 24, "n": 37}, F32),
    ("linear_tanh_logsoftmax_max_bf16", "linear", {}, ("tanh", "logsoftmax:1", "max:1"),
     {"m": 16384, "k": 2048, "n": 8192}, {"m": 19, "k": 24, "n": 37}, BF16),
)


def _inputs(head: str, steps: tuple[str, ...], noncontig: bool) -> tuple[In, ...]:
    if head in ("2d", "dw", "t2d"):
        shapes = [("n", "ci", "h", "w")]
    elif head in ("3d", "t3d"):
        shapes = [("n", "ci", "d", "h", "w")]
    elif head == "bmm":
        shapes = [("b", "m", "k"), ("b", "k", "n")]
    else:
        shapes = [("m", "k")]
    ins = [In(s) for s in shapes[:-1]] + [In(shapes[-1], noncontig=noncontig)]
    if any(st in ("addin", "mulin") for st in steps):
        ins.append(In(("b", "m", "n")))
    return tuple(ins)


def programs() -> list[Program]:
    out = []
    for name, head, kw, steps, full, tiny, dtype in CHAINS:
        category = "gemm_chain" if head in ("linear", "matmul", "bmm") else "conv_chain"
        module = (lambda head, kw, steps: lambda s: Chain(head, s, kw, steps))(head, kw, steps)
        out.append(Program(name, category, module, _inputs(head, steps, "noncontig" in name), full, tiny, dtype, TOL))
    return out


__all__ = ["Chain", "CHAINS", "programs"]
