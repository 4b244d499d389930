"""Pointwise programs: activations, tanh-approximated GELU written out in pointwise ops, broadcasts,
and gathers/embeddings."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .base import In, Program, fn_program

F32, BF16 = torch.float32, torch.bfloat16
ROWS, TROWS = {"r": 16384, "c": 4096}, {"r": 19, "c": 131}   # 268 MB of f32
NHWC, TNHWC = {"n": 32, "h": 112, "w": 112, "c": 64}, {"n": 2, "h": 7, "w": 9, "c": 35}   # 103 MB of f32

ACTIVATIONS = {
    "relu": torch.relu, "silu": F.silu, "gelu_erf": F.gelu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
    "mish": F.mish, "hardswish": F.hardswish, "leaky_relu": lambda x: F.leaky_relu(x, 0.1), "elu": F.elu,
    "softplus": F.softplus, "selu": F.selu, "hardtanh": F.hardtanh,
}


def _zero_negatives(x: torch.Tensor) -> torch.Tensor:
    """`y[y < 0] = 0`: an index_put with a bool mask and a scalar."""
    y = x * 2
    y[y < 0] = 0
    return y


def activations() -> list[Program]:
    x = (In(("r", "c")),)
    out = [fn_program(f"act_{n}_f32", "activation", f, x, ROWS, TROWS) for n, f in ACTIVATIONS.items()]
    out += [fn_program(f"act_{n}_bf16", "activation", ACTIVATIONS[n], x, ROWS, TROWS, BF16) for n in ("silu", "gelu_erf")]
    out.append(fn_program("act_swiglu_bf16", "activation", lambda a, b: F.silu(a) * b, (In(("r", "c")), In(("r", "c"))),
                          ROWS, TROWS, BF16))
    out.append(fn_program("act_silu_noncontig_f32", "activation", F.silu, (In(("r", "c"), noncontig=True),), ROWS, TROWS))
    # a channels-last convolution's epilogue writing eager's NCHW output: loads contiguous along C,
    # stores along W (a 2-D tiled kernel's case)
    out.append(fn_program("act_relu_nhwc_to_nchw_f32", "activation",
                          lambda x, b: torch.relu(x.permute(0, 3, 1, 2).contiguous() + b),
                          (In(("n", "h", "w", "c")), In(("c", 1, 1))), NHWC, TNHWC))
    out.append(fn_program("setitem_bool_mask_f32", "activation", _zero_negatives, x, ROWS, TROWS))
    return out


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def _gelu_tanh_bias(x, b):
    return _gelu_tanh(x + b)


def _gelu_tanh_mul(x):
    u = x * 0.7978845608 * (1.0 + 0.044715 * x * x)
    return x * 0.5 * (1.0 + torch.tanh(u))


def gelu_tanh() -> list[Program]:
    x = (In(("r", "c")),)
    return [
        fn_program("gelu_tanh_written_f32", "gelu_tanh", _gelu_tanh, x, ROWS, TROWS),
        fn_program("gelu_tanh_written_bf16", "gelu_tanh", _gelu_tanh, x, ROWS, TROWS, BF16),
        fn_program("gelu_tanh_bias_f32", "gelu_tanh", _gelu_tanh_bias, (In(("r", "c")), In(("c",))), ROWS, TROWS),
        fn_program("gelu_tanh_factored_f32", "gelu_tanh", _gelu_tanh_mul, x, ROWS, TROWS),
        fn_program("gelu_tanh_builtin_f32", "gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), x, ROWS, TROWS),
    ]


def broadcasts() -> list[Program]:
    three, tthree = {"a": 128, "b": 512, "c": 1000}, {"a": 3, "b": 11, "c": 29}
    return [
        fn_program("bcast_row_bias_f32", "broadcast", lambda x, b: x + b, (In(("r", "c")), In(("c",))), ROWS, TROWS),
        fn_program("bcast_col_scale_f32", "broadcast", lambda x, s: x * s, (In(("r", "c")), In(("r", 1))), ROWS, TROWS),
        fn_program("bcast_outer_f32", "broadcast", lambda a, b: torch.sigmoid(a[:, None] * b[None, :]),
                   (In(("r",)), In(("c",))), ROWS, TROWS),
        fn_program("bcast_three_way_f32", "broadcast", lambda x, a, b, c: (x - a) * b + c,
                   (In(("a", "b", "c")), In(("a", 1, 1)), In((1, "b", 1)), In((1, 1, "c"))), three, tthree),
        fn_program("bcast_affine_bf16", "broadcast", lambda x, w, b: x * w + b,
                   (In(("r", "c")), In(("c",)), In(("c",))), ROWS, TROWS, BF16),
        fn_program("bcast_noncontig_add_f32", "broadcast", lambda x, b: torch.relu(x + b),
                   (In(("r", "c"), noncontig=True), In(("c",))), ROWS, TROWS),
        fn_program("bcast_transposed_add_f32", "broadcast", lambda x, y: x.t() + y,
                   (In(("c", "r")), In(("r", "c"))), ROWS, TROWS),
        fn_program("bcast_nchw_to_nhwc_bias_bf16", "broadcast", lambda x, b: x.permute(0, 2, 3, 1).contiguous() * b,
                   (In(("n", "c", "h", "w")), In(("c",))), NHWC, TNHWC, BF16),
        fn_program("bcast_expand_mul_f32", "broadcast", lambda x, y: (x.unsqueeze(1) * y).sum(1),
                   (In(("a", "c")), In(("a", "b", "c"))), three, tthree, tolerances={F32: (1e-3, 1e-3)}),
    ]


class Embed(nn.Module):
    def __init__(self, v: int, d: int, scale: bool = False) -> None:
        super().__init__()
        self.emb = nn.Embedding(v, d)
        self.pos = nn.Parameter(torch.randn(1, d) * 0.02)
        self.scale = math.sqrt(d) if scale else 1.0

    def forward(self, ids):
        return self.emb(ids) * self.scale + self.pos


def gathers() -> list[Program]:
    emb, temb = {"b": 32, "s": 2048, "v": 32000, "d": 1024}, {"b": 2, "s": 7, "v": 53, "d": 24}
    return [
        Program("embedding_f32", "gather", lambda s: nn.Embedding(s["v"], s["d"]), (In(("b", "s"), "int", high="v"),),
                emb, temb, F32),
        Program("embedding_scale_pos_bf16", "gather", lambda s: Embed(s["v"], s["d"], True),
                (In(("b", "s"), "int", high="v"),), emb, temb, BF16),
        fn_program("gather_last_dim_f32", "gather", lambda x, i: torch.gather(x, -1, i),
                   (In(("r", "c")), In(("r", "k"), "int", high="c")), {**ROWS, "k": 1024}, {**TROWS, "k": 17}),
        fn_program("index_select_rows_f32", "gather", lambda x, i: torch.index_select(x, 0, i) * 2.0,
                   (In(("r", "c")), In(("k",), "int", high="r")), {**ROWS, "k": 8192}, {**TROWS, "k": 11}),
        fn_program("take_along_dim_relu_f32", "gather", lambda x, i: torch.relu(torch.take_along_dim(x, i, 1)),
                   (In(("r", "c")), In(("r", 1), "int", high="c")), ROWS, TROWS),
        fn_program("advanced_index_add_f32", "gather", lambda x, i, y: x[i] + y,
                   (In(("r", "c")), In(("k",), "int", high="r"), In(("k", "c"))), {**ROWS, "k": 8192}, {**TROWS, "k": 13}),
    ]


def programs() -> list[Program]:
    return activations() + gelu_tanh() + broadcasts() + gathers()
