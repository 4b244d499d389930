"""Convolutions (2-D, 3-D, transposed) and GEMMs followed by pointwise and reduction epilogues."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .base import In, Program

F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: (5e-3, 5e-3), BF16: (5e-2, 5e-2)}   # cuDNN/cuBLAS may pick other algorithms (TF32 for conv)


class ConvEpilogue(nn.Module):
    def __init__(self, kind: str, cin: int, cout: int, epilogue: str, groups: int = 1) -> None:
        super().__init__()
        self.conv = {"2d": nn.Conv2d, "3d": nn.Conv3d, "t2d": nn.ConvTranspose2d, "t3d": nn.ConvTranspose3d}[kind](
            cin, cout, 3, stride=2 if kind.startswith("t") else 1, padding=1, groups=groups)
        self.bn = nn.BatchNorm2d(cout) if epilogue == "bn_silu" else None
        self.epilogue = epilogue

    def forward(self, x, *rest):
        y = self.conv(x)
        e = self.epilogue
        if e == "relu":
            return torch.relu(y)
        if e == "bn_silu":
            return F.silu(self.bn(y))
        if e == "gelu":
            return F.gelu(y)
        if e == "tanh":
            return torch.tanh(y) * 0.5 + 0.5
        if e == "sigmoid_mul":
            return torch.sigmoid(y) * y
        if e == "hardswish":
            return F.hardswish(y)
        if e == "residual":
            return torch.relu(y + rest[0])
        if e == "scale_clamp":
            return torch.clamp(y * 0.5 + 0.1, -1.0, 1.0)
        raise ValueError(e)


CONV = (   # name, kind, epilogue, groups, full sizes, tiny sizes, rank, dtype
    ("conv2d_relu_f32", "2d", "relu", 1, {"n": 32, "ci": 64, "co": 64, "h": 112, "w": 112}, 2, F32),
    ("conv2d_bn_silu_f32", "2d", "bn_silu", 1, {"n": 32, "ci": 64, "co": 128, "h": 56, "w": 56}, 2, F32),
    ("conv2d_residual_relu_f32", "2d", "residual", 1, {"n": 32, "ci": 64, "co": 64, "h": 56, "w": 56}, 2, F32),
    ("conv2d_depthwise_hardswish_f32", "2d", "hardswish", 64, {"n": 32, "ci": 64, "co": 64, "h": 112, "w": 112}, 2, F32),
    ("conv2d_gelu_bf16", "2d", "gelu", 1, {"n": 64, "ci": 64, "co": 128, "h": 64, "w": 64}, 2, BF16),
    ("conv3d_gelu_f32", "3d", "gelu", 1, {"n": 4, "ci": 32, "co": 32, "d": 32, "h": 64, "w": 64}, 3, F32),
    ("conv3d_scale_clamp_f32", "3d", "scale_clamp", 1, {"n": 4, "ci": 16, "co": 32, "d": 32, "h": 64, "w": 64}, 3, F32),
    ("conv_t2d_tanh_f32", "t2d", "tanh", 1, {"n": 32, "ci": 64, "co": 32, "h": 64, "w": 64}, 2, F32),
    ("conv_t2d_sigmoid_mul_f32", "t2d", "sigmoid_mul", 1, {"n": 64, "ci": 128, "co": 64, "h": 32, "w": 32}, 2, F32),
    ("conv_t3d_relu_f32", "t3d", "relu", 1, {"n": 8, "ci": 32, "co": 16, "d": 16, "h": 32, "w": 32}, 3, F32),
)
TINY = {2: {"n": 2, "ci": 4, "co": 4, "h": 7, "w": 9}, 3: {"n": 2, "ci": 4, "co": 4, "d": 3, "h": 5, "w": 6}}


def convs() -> list[Program]:
    out = []
    for name, kind, epi, groups, full, rank, dtype in CONV:
        shape = ("n", "ci", "h", "w") if rank == 2 else ("n", "ci", "d", "h", "w")
        tiny = dict(TINY[rank])
        if groups > 1:
            full, tiny = {**full, "g": groups}, {**tiny, "g": tiny["ci"]}
        inputs = (In(shape),) + ((In(("n", "co", "h", "w")),) if epi == "residual" else ())
        module = (lambda kind, epi, grouped: lambda s: ConvEpilogue(kind, s["ci"], s["co"], epi,
                                                                     s["g"] if grouped else 1))(kind, epi, groups > 1)
        out.append(Program(name, "conv_epilogue", module, inputs, full, tiny, dtype, TOL))
    return out


class GemmEpilogue(nn.Module):
    def __init__(self, k: int, n: int, epilogue: str) -> None:
        super().__init__()
        self.lin = nn.Linear(k, n)
        self.norm = nn.LayerNorm(n) if epilogue == "layernorm" else None
        self.epilogue = epilogue

    def forward(self, x, *rest):
        y = self.lin(x)
        e = self.epilogue
        if e == "gelu":
            return F.gelu(y)
        if e == "relu_residual":
            return torch.relu(y) + rest[0]
        if e == "layernorm":
            return self.norm(y)
        if e == "softmax":
            return torch.softmax(y, -1)
        if e == "logsumexp":
            return torch.logsumexp(y, -1)
        if e == "sigmoid_gate":
            return torch.sigmoid(y) * rest[0]
        if e == "row_sum_sq":
            return (y * y).sum(-1)
        if e == "silu_bf16":
            return F.silu(y)
        raise ValueError(e)


GEMM = (   # name, epilogue, full sizes, dtype
    ("linear_gelu_f32", "gelu", {"m": 16384, "k": 1024, "n": 4096}, F32),
    ("linear_relu_residual_f32", "relu_residual", {"m": 16384, "k": 1024, "n": 2048}, F32),
    ("linear_layernorm_f32", "layernorm", {"m": 16384, "k": 1024, "n": 2048}, F32),
    ("linear_softmax_f32", "softmax", {"m": 8192, "k": 512, "n": 8192}, F32),
    ("linear_logsumexp_f32", "logsumexp", {"m": 8192, "k": 1024, "n": 8192}, F32),
    ("linear_sigmoid_gate_bf16", "sigmoid_gate", {"m": 16384, "k": 2048, "n": 4096}, BF16),
    ("linear_row_sum_sq_f32", "row_sum_sq", {"m": 16384, "k": 1024, "n": 4096}, F32),
    ("linear_silu_bf16", "silu_bf16", {"m": 32768, "k": 1024, "n": 4096}, BF16),
)


def _bmm_scale_sum(a, b):
    return (torch.bmm(a, b) * 0.125).sum(-1)


def gemms() -> list[Program]:
    tiny = {"m": 19, "k": 24, "n": 37}
    out = []
    for name, epi, full, dtype in GEMM:
        inputs = (In(("m", "k")),) + ((In(("m", "n")),) if epi in ("relu_residual", "sigmoid_gate") else ())
        out.append(Program(name, "gemm_epilogue", (lambda epi: lambda s: GemmEpilogue(s["k"], s["n"], epi))(epi),
                           inputs, full, tiny, dtype, TOL))
    from .base import fn_program
    out.append(fn_program("bmm_scale_rowsum_f32", "gemm_epilogue", _bmm_scale_sum,
                          (In(("b", "m", "k")), In(("b", "k", "n"))), {"b": 64, "m": 1024, "k": 256, "n": 1024},
                          {"b": 2, "m": 13, "k": 8, "n": 17}, tolerances={F32: (2e-3, 2e-2)}))
    return out


def programs() -> list[Program]:
    return convs() + gemms()
