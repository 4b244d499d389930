"""Single operators as users write them in an nn.Module, in the style of KernelBench's level 1,
and the data movement around them: concatenation, padding, flips, rolls, permutes, repeats, pixel
shuffles, triangles, one-hot, masks, scatters, stacks, chunks and strided slices; the activations,
losses, norms, reductions, pooling, sorts and matmul variants the other families leave out.

Note: these programs measure the compiler on code it was not written for: each is the operator as
written in PyTorch's documentation or a KernelBench model, not rewritten for autofuse. Sorts, top-k,
median and cummax may run as ATen fallbacks; programs whose eager result is not unique (the index of
a median, of a top-k or a sort among ties) return the values only. F.gaussian_nll_loss is left
out: its check of the variances' signs (`if torch.any(var < 0)`) makes dynamo skip the frame, so no
compiler sees it.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from .base import Fn, In, Program, Sizes, fn_program, short
from .layers import NCHW, TNCHW
from .pointwise import ROWS, TROWS

F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: (1e-3, 1e-4), BF16: (5e-2, 5e-2)}
WIDE = {F32: (1e-3, 1e-3), BF16: (5e-2, 5e-2)}   # sums of 10^3-10^8 elements in another order
# 3-D tensors for reductions over a middle or the last dim (262 MB of f32), and their CPU twin
ABC, TABC = {"a": 128, "b": 512, "c": 1001}, {"a": 5, "b": 13, "c": 29}
# sequences for 1-D pooling (134 MB of f32), volumes for 3-D pooling (134 MB of f32)
NCL, TNCL = {"n": 64, "c": 64, "l": 8190}, {"n": 2, "c": 3, "l": 61}
NCDHW, TNCDHW = {"n": 16, "c": 32, "d": 32, "h": 64, "w": 64}, {"n": 2, "c": 3, "d": 5, "h": 7, "w": 9}


def sized(name: str, category: str, make: Callable[[Sizes], Callable[..., Any]], inputs: tuple[In, ...],
          full: Sizes, tiny: Sizes, dtype: torch.dtype = F32, **kw: Any) -> Program:
    """A program without weights whose function depends on the sizes (a class count, a buffer's length)."""
    return Program(name, category, lambda s: Fn(make(s)), inputs, full, tiny, dtype, **kw)


# ---- data movement -------------------------------------------------------------------------------

def _cat3_gelu(a, b, c):
    return F.gelu(torch.cat([a, b, c], dim=1))


def _scatter_add_rows(s: Sizes):
    def f(src, idx):   # a per-row histogram: k values added into c bins
        buf = torch.zeros(src.shape[0], s["c"], device=src.device, dtype=src.dtype)
        return buf.scatter_add_(1, idx, src)
    return f


def _grid_sample(x, grid):
    return F.grid_sample(x, grid * 2.2 - 1.1, mode="bilinear", padding_mode="border", align_corners=False)


def _bucketize(x):
    bounds = torch.linspace(-3.0, 3.0, 63, device=x.device, dtype=x.dtype)
    return torch.bucketize(x, bounds)


def _one_hot_scatter(s: Sizes):
    def f(idx):   # a one-hot written by scatter_ into zeros, then smoothed as a label
        hot = torch.zeros(idx.shape[0], s["v"], device=idx.device).scatter_(1, idx[:, None], 1.0)
        return hot * 0.9 + 0.1 / s["v"]
    return f


def _polar_coordinates(x, y):
    return torch.hypot(x, y), torch.atan2(y, x)


def _chunk3_mul(x):
    a, b, c = x.chunk(3, dim=-1)
    return a * b * c


def _strided_slices(x):
    return torch.tanh(x[:, ::2]) + x.narrow(1, 1, x.shape[1] // 2)


def data_movement() -> list[Program]:
    x4 = (In(("n", "c", "h", "w")),)
    seq, tseq = {"b": 64, "s1": 256, "s2": 128, "s3": 384, "d": 1024}, {"b": 2, "s1": 3, "s2": 5, "s3": 4, "d": 37}
    mats, tmats = {"b": 64, "m": 1024}, {"b": 3, "m": 19}            # 268 MB of f32 square matrices
    img3, timg3 = {"n": 64, "c": 3, "h": 224, "w": 224}, {"n": 2, "c": 3, "h": 13, "w": 11}
    shuf, tshuf = {"n": 32, "c": 256, "h": 64, "w": 64}, {"n": 2, "c": 12, "h": 5, "w": 7}   # 134 MB of f32
    rep, trep = {"r": 8192, "c": 2048}, {"r": 13, "c": 37}
    hot, thot = {"r": 262144, "v": 100}, {"r": 61, "v": 23}          # 105 MB of f32 one-hot rows
    scat, tscat = {"r": 16384, "k": 2048, "c": 1000}, {"r": 7, "k": 53, "c": 31}
    return [
        fn_program("cat3_middle_gelu_f32", "data_movement", _cat3_gelu,
                   (In(("b", "s1", "d")), In(("b", "s2", "d")), In(("b", "s3", "d"))), seq, tseq),
        fn_program("pad_constant_nchw_f32", "data_movement", lambda x: F.pad(x, (1, 2, 3, 4), value=0.5),
                   x4, NCHW, TNCHW),
        fn_program("pad_reflect_nchw_f32", "data_movement", lambda x: F.pad(x, (2, 2, 2, 2), mode="reflect"),
                   x4, NCHW, TNCHW),
        fn_program("pad_replicate_nchw_bf16", "data_movement", lambda x: F.pad(x, (1, 3, 2, 1), mode="replicate"),
                   x4, {**NCHW, "n": 64}, TNCHW, BF16),
        fn_program("flip_hw_f32", "data_movement", lambda x: torch.flip(x, (2, 3)), x4, NCHW, TNCHW),
        fn_program("roll_middle_f32", "data_movement", lambda x: torch.roll(x, shifts=7, dims=1),
                   (In(("a", "b", "c")),), ABC, TABC),
        fn_program("permute_nhwc_rgb_scale_f32", "data_movement",
                   lambda x: x.permute(0, 2, 3, 1).contiguous() * (1.0 / 255.0), x4, img3, timg3),
        fn_program("repeat_tile_f32", "data_movement", lambda x: x.repeat(1, 2, 3) + 1.0,
                   (In(("r", 1, "c")),), rep, trep),
        fn_program("pixel_shuffle_x2_f32", "data_movement", lambda x: F.pixel_shuffle(x, 2), x4, shuf, tshuf),
        fn_program("tril_batch_scale_bf16", "data_movement", lambda x: torch.tril(x) * 2.0,
                   (In(("b", "m", "m")),), mats, tmats, BF16),
        sized("one_hot_float_f32", "data_movement", lambda s: lambda i: F.one_hot(i, s["v"]).float(),
              (In(("r",), "int", high="v"),), hot, thot),
        fn_program("where_bcast_mask_f32", "data_movement", lambda m, x, y: torch.where(m, x, y),
                   (In(("n", 1, "h", "w"), "bool"), In(("n", "c", "h", "w")), In(("n", "c", "h", "w"))),
                   NCHW, TNCHW),
        fn_program("masked_fill_gt_f32", "data_movement", lambda x: x.masked_fill(x > 0.5, 0.5) * 3.0,
                   (In(("r", "c")),), ROWS, TROWS),
        sized("scatter_add_rows_f32", "data_movement", _scatter_add_rows,
              (In(("r", "k")), In(("r", "k"), "int", high="c")), scat, tscat, tolerances=WIDE),
        fn_program("stack3_sum_f32", "data_movement", lambda a, b, c: torch.stack([a, b, c], dim=-1).sum(-1),
                   (In(("r", "c")), In(("r", "c")), In(("r", "c"))), ROWS, TROWS),
        fn_program("chunk3_mul_f32", "data_movement", _chunk3_mul, (In(("r", "c3")),),
                   {"r": 16384, "c3": 3 * 1366}, {"r": 13, "c3": 3 * 29}),
        fn_program("strided_slice_narrow_bf16", "data_movement", _strided_slices, (In(("r", "c")),),
                   {"r": 32768, "c": 4098}, {"r": 17, "c": 74}, BF16),
        fn_program("grid_sample_border_f32", "gather", _grid_sample,
                   (In(("n", "c", "h", "w")), In(("n", "h", "w", 2), "uniform")),
                   {"n": 32, "c": 32, "h": 128, "w": 128}, {"n": 2, "c": 3, "h": 7, "w": 9}),
        fn_program("bucketize_rows_f32", "data_movement", _bucketize, (In(("r", "c")),), ROWS, TROWS),
        sized("one_hot_scatter_smooth_f32", "data_movement", _one_hot_scatter, (In(("r",), "int", high="v"),),
              {"r": 65536, "v": 1000}, {"r": 61, "v": 23}),
        fn_program("polar_hypot_atan2_f32", "activation", _polar_coordinates, (In(("r", "c")), In(("r", "c"))),
                   ROWS, TROWS),
    ]


# ---- activations the pointwise family leaves out -------------------------------------------------

class PReLU(nn.Module):
    """nn.PReLU with one weight per channel, drawn instead of the initial 0.25."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.act = nn.PReLU(c)
        with torch.no_grad():
            self.act.weight.uniform_(0.05, 0.5)

    def forward(self, x):
        return self.act(x)


ACTIVATIONS = {   # name -> (function, dtype)
    "softsign": (F.softsign, F32),
    "hardsigmoid": (F.hardsigmoid, BF16),
    "logsigmoid": (F.logsigmoid, F32),
    "tanhshrink": (F.tanhshrink, F32),
    "softshrink": (lambda x: F.softshrink(x, 0.5), F32),
    "relu6": (F.relu6, F32),
}


def activations() -> list[Program]:
    x = (In(("r", "c")),)
    out = [fn_program(f"act_{n}_{short(d)}", "activation", f, x, ROWS, TROWS, d)
           for n, (f, d) in ACTIVATIONS.items()]
    out.append(fn_program("act_glu_last_f32", "activation", lambda x: F.glu(x, -1), (In(("r", "c2")),),
                          {"r": 16384, "c2": 4096}, {"r": 19, "c2": 2 * 67}))
    out.append(Program("act_prelu_channel_f32", "activation", lambda s: PReLU(s["c"]), (In(("n", "c", "h", "w")),),
                       NCHW, TNCHW, F32))
    return out


# ---- losses the losses family leaves out ---------------------------------------------------------

def _cosine_loss(a, b):
    return (1.0 - F.cosine_similarity(a, b, dim=1)).mean()


def losses() -> list[Program]:
    full, tiny = {"r": 16384, "d": 2048}, {"r": 23, "d": 57}    # 134 MB of f32 per operand
    two = (In(("r", "d")), In(("r", "d")))
    return [
        fn_program("loss_triplet_margin_f32", "loss", lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=1.0),
                   two + (In(("r", "d")),), full, tiny, tolerances=WIDE),
        fn_program("loss_cosine_similarity_f32", "loss", _cosine_loss, two, full, tiny, tolerances=WIDE),
        fn_program("loss_poisson_nll_f32", "loss", lambda x, y: F.poisson_nll_loss(x, y, log_input=True),
                   (In(("r", "d")), In(("r", "d"), "positive")), full, tiny, tolerances=WIDE),
        fn_program("loss_margin_ranking_f32", "loss", lambda a, b, y: F.margin_ranking_loss(a, b, y, margin=0.3),
                   two + (In(("r", "d"), "sign"),), full, tiny, tolerances=WIDE),
        fn_program("loss_multilabel_soft_margin_f32", "loss",
                   lambda x, y: F.multilabel_soft_margin_loss(x, y.float()),
                   (In(("r", "d")), In(("r", "d"), "bool")), full, tiny, tolerances=WIDE),
        fn_program("loss_cosine_embedding_bf16", "loss",
                   lambda a, b, y: F.cosine_embedding_loss(a, b, y, margin=0.2),
                   two + (In(("r",), "sign"),), full, tiny, BF16, tolerances=WIDE),
    ]


# ---- norms written out ---------------------------------------------------------------------------

def _rms_channel(x, eps=1e-5):
    return x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + eps)


def _l1_normalize(x):
    return x / torch.sum(torch.abs(x), dim=1, keepdim=True)


def _fro_normalize(x):
    return x / torch.norm(x, p="fro")


def norms() -> list[Program]:
    x4 = (In(("n", "c", "h", "w")),)
    rows = (In(("r", "c")),)
    return [
        fn_program("rmsnorm_channel_written_f32", "norm", _rms_channel, x4, NCHW, TNCHW, tolerances=WIDE),
        fn_program("l1_normalize_dim1_f32", "norm", _l1_normalize, rows, ROWS, TROWS, tolerances=WIDE),
        fn_program("l2_normalize_channel_f32", "norm", lambda x: F.normalize(x, p=2.0, dim=1), x4, NCHW, TNCHW,
                   tolerances=WIDE),
        fn_program("l2_normalize_last_bf16", "norm", lambda x: F.normalize(x, p=2.0, dim=-1), rows, ROWS, TROWS,
                   BF16, tolerances=WIDE),
        fn_program("local_response_norm_f32", "norm", lambda x: F.local_response_norm(x, 5), x4, NCHW, TNCHW,
                   tolerances=WIDE),
        fn_program("frobenius_normalize_f32", "norm", _fro_normalize, x4,
                   {"n": 16, "c": 64, "h": 256, "w": 256}, TNCHW, tolerances=WIDE),
    ]


# ---- reductions the reductions family leaves out -------------------------------------------------

def reductions() -> list[Program]:
    x = (In(("a", "b", "c")),)
    return [
        fn_program("min_values_middle_f32", "reduction", lambda x: torch.min(x, dim=1)[0], x, ABC, TABC),
        fn_program("std_unbiased_last_f32", "reduction", lambda x: torch.std(x, dim=-1), x, ABC, TABC,
                   tolerances=WIDE),
        fn_program("logsumexp_middle_f32", "reduction", lambda x: torch.logsumexp(x, dim=1), x, ABC, TABC,
                   tolerances=WIDE),
        fn_program("all_gt_middle_bf16", "reduction", lambda x: torch.all(x > -2.5, dim=1), x, ABC, TABC, BF16),
        fn_program("count_nonzero_gt_last_f32", "reduction", lambda x: torch.count_nonzero(x > 0.5, dim=-1),
                   x, ABC, TABC),
        fn_program("var_mean_last_f32", "reduction", lambda x: torch.var_mean(x, dim=-1), x, ABC, TABC,
                   tolerances=WIDE),
        fn_program("diff_last_bf16", "reduction", lambda x: torch.diff(x, dim=-1), x, ABC, TABC, BF16),
    ]


# ---- pooling the layers family leaves out --------------------------------------------------------

def pooling() -> list[Program]:
    x1, x2, x3 = (In(("n", "c", "l")),), (In(("n", "c", "h", "w")),), (In(("n", "c", "d", "h", "w")),)
    return [
        fn_program("pool1d_max_dilated_f32", "pooling", lambda x: F.max_pool1d(x, 4, stride=2, padding=2, dilation=3),
                   x1, NCL, TNCL),
        fn_program("pool_max_dilated_padded_f32", "pooling",
                   lambda x: F.max_pool2d(x, 3, stride=2, padding=1, dilation=2), x2, NCHW, TNCHW),
        fn_program("pool_avg_ceil_nopad_f32", "pooling",
                   lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
                   x2, NCHW, TNCHW),
        fn_program("pool_lp2_bf16", "pooling", lambda x: F.lp_pool2d(x, 2.0, 3, stride=2), x2,
                   {**NCHW, "n": 64}, TNCHW, BF16, tolerances=WIDE),
        fn_program("pool3d_avg_f32", "pooling", lambda x: F.avg_pool3d(x, 3, stride=2, padding=1), x3, NCDHW, TNCDHW),
    ]


# ---- scans, sorts and selections -----------------------------------------------------------------

def selections() -> list[Program]:
    rows, trows = {"r": 32768, "c": 1021}, {"r": 9, "c": 203}    # 134 MB of f32
    x = (In(("r", "c")),)
    return [
        fn_program("cummax_last_f32", "scan", lambda x: tuple(torch.cummax(x, dim=-1)), x, rows, trows),
        fn_program("topk5_values_last_f32", "argreduce", lambda x: torch.topk(x, 5, dim=-1).values, x, rows, trows),
        fn_program("sort_values_last_f32", "argreduce", lambda x: torch.sort(x, dim=-1).values, x, rows, trows),
        fn_program("median_values_middle_f32", "argreduce", lambda x: torch.median(x, dim=1).values,
                   (In(("a", "b", "c")),), ABC, TABC),
        fn_program("argsort_stable_last_f32", "argreduce", lambda x: torch.argsort(x, dim=-1, stable=True),
                   x, rows, trows),
        fn_program("topk16_smallest_values_last_f32", "argreduce",
                   lambda x: torch.topk(x, 16, dim=-1, largest=False).values, x, rows, trows),
        fn_program("quantile_last_f32", "argreduce", lambda x: torch.quantile(x, 0.9, dim=-1), x, rows, trows),
        fn_program("argsort_stable_int64_keys_last", "argreduce",
                   lambda x: torch.argsort((x * 1000).long(), dim=-1, stable=True), x, rows, trows),
    ]


# ---- matmul variants of KernelBench's level 1 ----------------------------------------------------

def _diag_matmul(a, b):
    return torch.diag(a) @ b


def gemms() -> list[Program]:
    # raw randn operands: an output is a sum of k products of magnitude ~sqrt(k); TF32 rounds each
    tol = {F32: (1e-2, 2e-1), BF16: (5e-2, 5e-1)}
    return [
        fn_program("diag_matmul_f32", "gemm_epilogue", _diag_matmul, (In(("n",)), In(("n", "m"))),
                   {"n": 4096, "m": 4096}, {"n": 23, "m": 37}, tolerances={F32: (5e-3, 5e-3)}),
        fn_program("triu_matmul_f32", "gemm_epilogue", lambda a, b: torch.triu(a @ b), (In(("n", "n")), In(("n", "n"))),
                   {"n": 4096}, {"n": 29}, tolerances=tol),
        fn_program("matvec_f32", "gemm_epilogue", lambda a, v: a @ v, (In(("m", "k")), In(("k", 1))),
                   {"m": 256, "k": 131072}, {"m": 13, "k": 301}, tolerances={F32: (1e-2, 5e-1)}),
        fn_program("tensor3d_matmul_f32", "gemm_epilogue", torch.matmul, (In(("b", "m", "k")), In(("k", "l"))),
                   {"b": 16, "m": 1024, "k": 2048, "l": 768}, {"b": 2, "m": 11, "k": 24, "l": 13}, tolerances=tol),
        fn_program("einsum_batched_abt_bf16", "gemm_epilogue", lambda a, b: torch.einsum("bmk,bnk->bmn", a, b),
                   (In(("b", "m", "k")), In(("b", "n", "k"))), {"b": 32, "m": 1024, "n": 1024, "k": 512},
                   {"b": 2, "m": 13, "n": 11, "k": 24}, BF16, tolerances=tol),
    ]


def programs() -> list[Program]:
    return data_movement() + activations() + losses() + norms() + reductions() + pooling() + selections() + gemms()


__all__ = ["programs", "sized"]
