"""The decomposition table handed to AOTAutograd: composite ops -> primitives we lower.

Note: starts from PyTorch's core-ATen decompositions and adds the composites real programs use
(layer_norm, softmax, log_softmax, gelu, silu, cross_entropy / nll_loss, ...). Ops we lower
directly and whose name should survive into kernel names (mean, relu, var_mean) are not
decomposed, nor is select_scatter: its core decomposition, where(arange == index, src, x),
lays the result out like the broadcast src instead of like x as eager does. logaddexp,
logaddexp2 and heaviside likewise (their decompositions' `where` lays the result out like one
input), addcmul and addcdiv (eager orders their three operands' strides together, the
decomposition two at a time), and masked_fill (its decomposition copies the result to row-major
only where the traced strides say it is not, and a float16 comparison's traced strides are not
eager's). baddbmm stays one ATen call: its decomposition runs the batched product in float32
for half-precision inputs (a CUDA-core GEMM where cuBLAS fuses the scaled add in bf16). The CPU
flash-attention op is not decomposed either: PyTorch's rule for it returns the attention weights
where its backward expects the logsumexp (Inductor excludes it too), so attention runs as an
extern kernel on both devices. bucketize of a tensor is lowered as one search in the kernel
(lower/bucketize.py); its decomposition unrolls the search into int64 tensor ops (the scalar
overload keeps it). index_add is lowered as itself (lower/scatter.py): its decomposition copies
the updated tensor into eager's contiguous layout before an accumulating index_put copies it again.
Foreach ops become one op per list element (foreach.py). Two composites PyTorch keeps whole get
rules of ours, each what eager computes: `angle` of a real tensor (pi below zero, NaN at NaN) and
`rrelu` in eval mode (a leaky ReLU with the mean slope); `native_group_norm` gets PyTorch's GPU rule
on every device. masked_scatter stays ATen's: written as a running count of the mask over the
whole tensor, it would be one scan row in one program, where ATen's scan spans the device.
"""
from __future__ import annotations

import math
from functools import lru_cache

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

from .foreach import foreach_decompositions

aten = torch.ops.aten

EXTRA_NAMES = (
    "_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data",
    "native_layer_norm", "native_layer_norm_backward", "gelu", "gelu_backward", "silu",
    "silu_backward", "nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward",
    "nll_loss2d_backward", "std", "std_mean", "lerp", "hardswish",
    "hardsigmoid", "elu", "softplus", "mish", "mse_loss", "mse_loss_backward", "smooth_l1_loss",
    "huber_loss", "sigmoid_backward", "tanh_backward", "threshold_backward", "native_group_norm",
    "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
    "_native_batch_norm_legit_functional", "native_batch_norm_backward", "rms_norm",
    "_fused_rms_norm", "_fused_rms_norm_backward", "logit", "frac", "xlogy", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "log_sigmoid_forward", "glu", "norm", "linalg_vector_norm",
    "dist", "cosine_similarity", "native_dropout_backward", "embedding_dense_backward", "grid_sampler_2d",
    "bucketize", "ldexp",
)

# ops whose PyTorch decomposition is not usable here (see the note); missing ones are skipped
NOT_DECOMPOSED = ("_scaled_dot_product_flash_attention_for_cpu",)

KEEP = {aten.mean.dim, aten.mean.default, aten.var_mean.correction, aten.var.correction, aten.relu.default,
        aten.logsumexp.default, aten.select_scatter.default, aten.logaddexp.default, aten.logaddexp2.default,
        aten.heaviside.default, aten.addcmul.default, aten.addcdiv.default, aten.masked_fill.Scalar,
        aten.masked_fill.Tensor, aten.baddbmm.default, aten.bucketize.Tensor, aten.index_add.default}


def _cudnn_grid_sampler(x: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """cuDNN's sampler (what CUDA picks for bilinear, zero padding, align_corners=True) as the
    general one, which decomposes into generated gathers."""
    return aten.grid_sampler_2d.default(x, grid, 0, 0, True)


def _angle(x: torch.Tensor) -> torch.Tensor:
    if x.is_complex():
        return NotImplemented
    dtype = x.dtype if x.is_floating_point() else torch.get_default_dtype()
    below = torch.where(x < 0, math.pi, 0.0).to(dtype)
    return torch.where(torch.isnan(x), x.to(dtype), below)


def _rrelu_eval(x: torch.Tensor, noise: torch.Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
                training: bool = False, generator: object = None) -> torch.Tensor:
    if training:
        return NotImplemented
    return torch.nn.functional.leaky_relu(x.contiguous(), (lower + upper) / 2)   # row-major, as eager's


def _rrelu_eval_functional(x: torch.Tensor, noise: torch.Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
                           training: bool = False, generator: object = None) -> tuple[torch.Tensor, torch.Tensor]:
    if training:
        return NotImplemented
    return _rrelu_eval(x, noise, lower, upper), noise.clone()   # eval leaves the noise alone


def _group_norm(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, n: int, c: int,
                hw: int, groups: int, eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PyTorch's GPU rule on every device: (x - mean) * rstd over the [N, G, C / G, H * W] view, then
    the affine per channel, one pointwise chain the statistics kernel can take in (its CPU rule first
    stores a scale and a shift per channel, a realized [N, C] pair between the two), so the graph
    and its kernels are the same on the CPU, where tests run, as on the GPU."""
    acc = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    grouped = x.to(acc).reshape(n, groups, c // groups, hw)
    var, mean = torch.var_mean(grouped, dim=[2, 3], unbiased=False, keepdim=True)
    rstd = torch.rsqrt(var + eps)
    out = ((grouped - mean) * rstd).view(x.shape)
    channel = [1, c] + [1] * (x.dim() - 2)
    if weight is not None:
        out = out * weight.reshape(channel)
    if bias is not None:
        out = out + bias.reshape(channel)
    return out.to(x.dtype), mean.reshape(n, groups).to(x.dtype), rstd.reshape(n, groups).to(x.dtype)


OWN_RULES = {"angle": _angle, "rrelu_with_noise": _rrelu_eval,
             "rrelu_with_noise_functional": _rrelu_eval_functional, "native_group_norm": _group_norm}


@lru_cache(maxsize=1)
def decomposition_table() -> dict:
    table = dict(core_aten_decompositions())
    # ops missing from this torch version are skipped (the GPU machine runs another version)
    extra = [getattr(aten, n) for n in EXTRA_NAMES if hasattr(aten, n)]
    table.update(get_decompositions(extra))
    table.update(foreach_decompositions())
    for name, rule in OWN_RULES.items():
        if hasattr(aten, name):
            table[getattr(aten, name).default] = rule
    if hasattr(aten, "cudnn_grid_sampler"):
        table[aten.cudnn_grid_sampler.default] = _cudnn_grid_sampler
    for op in KEEP:
        table.pop(op, None)
    for name in NOT_DECOMPOSED:
        packet = getattr(aten, name, None)
        for overload in (packet.overloads() if packet is not None else []):
            table.pop(getattr(packet, overload), None)
    return table
