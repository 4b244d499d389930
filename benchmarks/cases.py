"""The benchmark suite: memory-bound workloads sized to fill an H200 (hundreds of MB each).

Each case builds (fn, inputs) on a device; `scale` shrinks every size for smoke runs on the CPU.
A case's minimum bytes are its inputs read once and its outputs written once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F

from autofuse.report import nbytes  # noqa: F401 - re-exported for the runner


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[str, float], tuple[Callable[..., Any], tuple]]


def _r(shape, dtype, device, scale, gen):
    shape = tuple(max(1, int(s * scale)) if i == 0 else s for i, s in enumerate(shape))
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype).to(device)


def _g():
    return torch.Generator().manual_seed(0)


def layernorm(device, scale):
    g = _g()
    x = _r((32768, 4096), torch.bfloat16, device, scale, g)
    w, b = torch.randn(4096, generator=g).to(torch.bfloat16).to(device), torch.randn(4096, generator=g).to(torch.bfloat16).to(device)
    return (lambda x, w, b: F.layer_norm(x, (4096,), w, b)), (x, w, b)


def rmsnorm(device, scale):
    g = _g()
    x = _r((32768, 4096), torch.bfloat16, device, scale, g)
    w = torch.randn(4096, generator=g).to(torch.bfloat16).to(device)

    def fn(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w
    return fn, (x, w)


def softmax(device, scale):
    return (lambda x: torch.softmax(x, -1)), (_r((16384, 4096), torch.float32, device, scale, _g()),)


def cross_entropy(device, scale):
    g = _g()
    logits = _r((8192, 32000), torch.bfloat16, device, scale, g)
    target = torch.randint(0, 32000, (logits.shape[0],), generator=g).to(device)
    return (lambda l, t: F.cross_entropy(l.float(), t)), (logits, target)


def bias_gelu(device, scale):
    g = _g()
    x = _r((16384, 8192), torch.bfloat16, device, scale, g)
    b = torch.randn(8192, generator=g).to(torch.bfloat16).to(device)
    return (lambda x, b: F.gelu(x + b, approximate="tanh")), (x, b)


def swiglu(device, scale):
    g = _g()
    a = _r((16384, 11008), torch.bfloat16, device, scale, g)
    b = _r((16384, 11008), torch.bfloat16, device, scale, g)
    return (lambda a, b: F.silu(a) * b), (a, b)


def column_sum(device, scale):
    return (lambda x: x.sum(0)), (_r((16384, 4096), torch.float32, device, scale, _g()),)


def residual_layernorm(device, scale):
    g = _g()
    x = _r((32768, 4096), torch.bfloat16, device, scale, g)
    r = _r((32768, 4096), torch.bfloat16, device, scale, g)
    w, b = torch.randn(4096, generator=g).to(torch.bfloat16).to(device), torch.randn(4096, generator=g).to(torch.bfloat16).to(device)

    def fn(x, r, w, b):
        h = x + r
        return h, F.layer_norm(h, (4096,), w, b)
    return fn, (x, r, w, b)


def _seed(n_rows, n_cols):
    def build(device, scale):
        g = _g()
        x = _r((n_rows, n_cols), torch.float32, device, scale, g)
        vecs = [torch.randn(n_cols, generator=g).to(device) for _ in range(3)]

        def fn(x, bias, gamma, beta):
            t = x * 1.1 + bias
            a = torch.relu(t)
            s = a * a + a * 0.1
            m = s.mean(dim=1, keepdim=True)
            return (s - m) * gamma + beta
        return fn, (x, *vecs)
    return build


CASES = [
    Case("layernorm_bf16_32768x4096", layernorm),
    Case("rmsnorm_bf16_32768x4096", rmsnorm),
    Case("softmax_f32_16384x4096", softmax),
    Case("cross_entropy_bf16_8192x32000", cross_entropy),
    Case("bias_gelu_tanh_bf16_16384x8192", bias_gelu),
    Case("swiglu_bf16_16384x11008", swiglu),
    Case("column_sum_f32_16384x4096", column_sum),
    Case("residual_layernorm_bf16_32768x4096", residual_layernorm),
    Case("seed_f32_1024x1024", _seed(1024, 1024)),
    Case("seed_f32_16384x4096", _seed(16384, 4096)),
]
