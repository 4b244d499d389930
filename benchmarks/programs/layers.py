"""Programs from the layers around the kernels the other families cover: rotary position
embeddings (LLaMA's half rotation, GPT-J's interleaved pairs, a partial rotary, complex numbers), pooling and
resizing of NCHW activations, and optimizer updates written as functions of the parameters, the
gradients and the moments (what a compiled training step's AdamW or SGD runs after the backward)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import In, Program, fn_program

F32, BF16 = torch.float32, torch.bfloat16
# queries of a decoder: batch, heads, positions, head dim (134 MB of bf16), and its CPU twin
QKV, TQKV = {"b": 8, "h": 32, "s": 2048, "d": 128}, {"b": 2, "h": 3, "s": 7, "d": 16}
NCHW, TNCHW = {"n": 32, "c": 64, "h": 112, "w": 112}, {"n": 2, "c": 3, "h": 9, "w": 11}   # 103 MB of f32
PARAMS, TPARAMS = {"p": 32 * 1024 * 1024}, {"p": 1000}   # 128 MB per f32 tensor


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def _rope_half(q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return q * cos + _rotate_half(q) * sin


def _rope_interleaved(q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    pairs = q.unflatten(-1, (-1, 2))
    a, b = pairs[..., 0], pairs[..., 1]
    c, s = cos[..., ::2], sin[..., ::2]
    return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)


def _rope_partial(q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = q.shape[-1] // 2
    rot, keep = q[..., :half], q[..., half:]
    return torch.cat((_rope_half(rot, cos[..., :half], sin[..., :half]), keep), dim=-1)


def _rope_complex(q: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Meta's LLaMA reference: pairs of features as complex numbers times unit complex frequencies."""
    angles = angles.float()
    freqs = torch.polar(torch.ones_like(angles), angles)[:, None, :]
    pairs = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))
    return torch.view_as_real(pairs * freqs).flatten(3).type_as(q)


def rope() -> list[Program]:
    qcs = (In(("b", "h", "s", "d")), In(("s", "d")), In(("s", "d")))
    return [
        fn_program("rope_half_bf16", "rope", _rope_half, qcs, QKV, TQKV, BF16),
        fn_program("rope_half_f32", "rope", _rope_half, qcs, QKV, TQKV),
        fn_program("rope_interleaved_bf16", "rope", _rope_interleaved, qcs, QKV, TQKV, BF16),
        fn_program("rope_partial_bf16", "rope", _rope_partial, qcs, QKV, TQKV, BF16),
        # queries and keys rotated in one program, the keys with fewer heads (grouped-query attention)
        fn_program("rope_qk_gqa_bf16", "rope", lambda q, k, c, s: (_rope_half(q, c, s), _rope_half(k, c, s)),
                   (In(("b", "h", "s", "d")), In(("b", 8, "s", "d")), In(("s", "d")), In(("s", "d"))),
                   QKV, {**TQKV, "h": 4}, BF16),
        # complex numbers, queries laid out [batch, positions, heads, head dim]
        fn_program("rope_complex_bf16", "rope", _rope_complex, (In(("b", "s", "h", "d")), In(("s", "e"))),
                   {**QKV, "e": QKV["d"] // 2}, {**TQKV, "e": TQKV["d"] // 2}, BF16),
    ]


def pooling() -> list[Program]:
    x = (In(("n", "c", "h", "w")),)
    return [
        fn_program("pool_max_3x3s2_f32", "pooling", lambda x: F.max_pool2d(x, 3, 2, 1), x, NCHW, TNCHW),
        fn_program("pool_avg_2x2_f32", "pooling", lambda x: F.avg_pool2d(x, 2), x, NCHW, TNCHW),
        fn_program("pool_avg_3x3_nopad_f32", "pooling",
                   lambda x: F.avg_pool2d(x, 3, 1, 1, count_include_pad=False), x, NCHW, TNCHW),
        fn_program("pool_global_avg_f32", "pooling", lambda x: F.adaptive_avg_pool2d(x, 1).flatten(1), x, NCHW, TNCHW),
        fn_program("pool_max_relu_bf16", "pooling", lambda x: F.max_pool2d(torch.relu(x), 2), x, NCHW, TNCHW, BF16),
        fn_program("resize_bilinear_x2_f32", "pooling",
                   lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False),
                   x, {**NCHW, "n": 8}, TNCHW),
        fn_program("resize_nearest_x2_bf16", "pooling", lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
                   x, {**NCHW, "n": 8}, TNCHW, BF16),
    ]


def _adamw(p, g, m, v, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8, wd=0.01, step=10):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    mhat = m / (1 - b1 ** step)
    vhat = v / (1 - b2 ** step)
    return p * (1 - lr * wd) - lr * mhat / (vhat.sqrt() + eps), m, v


def _sgd_momentum(p, g, buf, lr=0.1, momentum=0.9, wd=1e-4):
    g = g + wd * p
    buf = momentum * buf + g
    return p - lr * buf, buf


def _clip_then_sgd(p, g, lr=0.1, max_norm=1.0):
    scale = torch.clamp(max_norm / (g.norm() + 1e-6), max=1.0)
    return p - lr * g * scale


def optimizer() -> list[Program]:
    t = In(("p",))
    return [
        fn_program("optim_adamw_f32", "optimizer", _adamw, (t, t, t, In(("p",), kind="positive")), PARAMS, TPARAMS),
        fn_program("optim_sgd_momentum_f32", "optimizer", _sgd_momentum, (t, t, t), PARAMS, TPARAMS),
        fn_program("optim_clip_sgd_f32", "optimizer", _clip_then_sgd, (t, t), PARAMS, TPARAMS),
        # bf16 parameters with f32 moments and master weights read back to bf16
        fn_program("optim_adamw_bf16_params", "optimizer",
                   lambda p, g, m, v: tuple(o.to(d) for o, d in zip(_adamw(p.float(), g.float(), m, v),
                                                                     (BF16, F32, F32))),
                   (t, t, In(("p",), dtype=F32), In(("p",), kind="positive", dtype=F32)), PARAMS, TPARAMS, BF16),
    ]


def programs() -> list[Program]:
    return rope() + pooling() + optimizer()
