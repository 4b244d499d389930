"""Reductions: norms of a whole tensor, reductions over first/middle/last/all dims, argmax/argmin, scans."""
from __future__ import annotations

import torch

from .base import In, Program, fn_program, short

BF16, F32 = torch.bfloat16, torch.float32
WIDE = {F32: (1e-3, 1e-3), BF16: (5e-2, 5e-2)}   # sums over 10^8-10^9 elements in another order


def _l1(x):
    return x.abs().sum()


def _l2(x):
    return torch.linalg.vector_norm(x)


def _fro(x):
    return torch.linalg.matrix_norm(x, "fro")


def _sq(x):
    return (x * x).sum().sqrt()


def _linf(x):
    return x.abs().amax()


def _mean_sq(x):
    return x.float().pow(2).mean()


def whole_norms() -> list[Program]:
    """Norms of a whole tensor: ~10^8-10^9 elements down to one value."""
    big = {"n": 2**28 + 4096}               # 1 GiB of f32
    mat = {"r": 16384, "c": 16411}          # 1.07 GiB of f32, odd row length
    tiny, tmat = {"n": 3001}, {"r": 37, "c": 53}
    out = [
        fn_program("norm_l1_f32_1g", "norm_whole", _l1, (In(("n",)),), big, tiny, tolerances=WIDE),
        fn_program("norm_l2_f32_1g", "norm_whole", _l2, (In(("n",)),), big, tiny, tolerances=WIDE),
        fn_program("norm_fro_f32_1g", "norm_whole", _fro, (In(("r", "c")),), mat, tmat, tolerances=WIDE),
        fn_program("norm_sqrt_sumsq_f32_1g", "norm_whole", _sq, (In(("r", "c")),), mat, tmat, tolerances=WIDE),
        fn_program("norm_linf_f32_1g", "norm_whole", _linf, (In(("n",)),), big, tiny, tolerances=WIDE),
        fn_program("norm_l2_f32_128m", "norm_whole", _l2, (In(("n",)),), {"n": 2**25 + 17}, {"n": 1999}, tolerances=WIDE),
        fn_program("norm_l1_bf16_512m", "norm_whole", _l1, (In(("n",)),), big, tiny, BF16, tolerances=WIDE),
        fn_program("norm_l2_bf16_512m", "norm_whole", _l2, (In(("n",)),), big, tiny, BF16, tolerances=WIDE),
        fn_program("norm_meansq_bf16_512m", "norm_whole", _mean_sq, (In(("n",)),), big, tiny, BF16, tolerances=WIDE),
        fn_program("norm_fro_noncontig_f32", "norm_whole", _fro, (In(("r", "c"), noncontig=True),), mat, tmat,
                   tolerances=WIDE),
    ]
    return out


def _red(op: str, dim):
    def f(x):
        if op == "sum":
            return x.sum(dim)
        if op == "mean":
            return x.mean(dim)
        if op == "amax":
            return x.amax(dim)
        if op == "var":
            return x.var(dim)
        if op == "prod":
            return (1.0 + 0.001 * x).prod(dim)
        raise ValueError(op)
    return f


def dim_reductions() -> list[Program]:
    """sum/mean/amax/var over the first, a middle, the last, and all dims of a 3-D tensor."""
    full, tiny = {"a": 512, "b": 384, "c": 1000}, {"a": 7, "b": 13, "c": 29}   # 786 MB of f32
    dims = {"first": 0, "middle": 1, "last": -1, "all": (0, 1, 2), "outer2": (0, 1), "inner2": (1, 2)}
    out = []
    for op, dnames in (("sum", dims), ("mean", ("first", "middle", "last", "all")),
                       ("amax", ("first", "middle", "last")), ("var", ("middle", "last")), ("prod", ("last",))):
        for dn in dnames:
            out.append(fn_program(f"reduce_{op}_{dn}_f32", "reduction", _red(op, dims[dn]), (In(("a", "b", "c")),),
                                  full, tiny, tolerances=WIDE))
    out.append(fn_program("reduce_sum_middle_bf16", "reduction", _red("sum", 1), (In(("a", "b", "c")),),
                          full, tiny, BF16, tolerances=WIDE))
    out.append(fn_program("reduce_mean_first_noncontig_f32", "reduction", _red("mean", 0),
                          (In(("b", "c"), noncontig=True),), {"b": 8192, "c": 6000}, {"b": 31, "c": 23}, tolerances=WIDE))
    return out


def arg_reductions() -> list[Program]:
    full, tiny = {"a": 256, "b": 512, "c": 1000}, {"a": 5, "b": 11, "c": 37}
    out = []
    for op in ("argmax", "argmin"):
        for dn, d in (("first", 0), ("middle", 1), ("last", -1)):
            f = (lambda d, op: (lambda x: getattr(torch, op)(x, d)))(d, op)
            out.append(fn_program(f"{op}_{dn}_f32", "argreduce", f, (In(("a", "b", "c")),), full, tiny))
    out.append(fn_program("argmax_last_bf16", "argreduce", lambda x: x.argmax(-1), (In(("a", "b", "c")),),
                          full, tiny, BF16))
    out.append(fn_program("max_values_indices_last_f32", "argreduce", lambda x: tuple(x.max(-1)),
                          (In(("a", "b", "c")),), full, tiny))
    # a few long rows (greedy sampling over a vocabulary) and a whole tensor: split into chunks
    out.append(fn_program("argmax_few_long_rows_f32", "argreduce", lambda x: x.argmax(-1), (In(("r", "c")),),
                          {"r": 4, "c": 262147}, {"r": 2, "c": 1500}))
    out.append(fn_program("argmax_flat_f32", "argreduce", lambda x: x.argmax(), (In(("n",)),),
                          {"n": (1 << 24) + 3}, {"n": 3001}))
    return out


def _cumsum(x):
    return torch.cumsum(x, -1)


def _cumsum_mid(x):
    return torch.cumsum(x, 1)


def _cumprod(x):
    return torch.cumprod(1.0 + 0.01 * x, -1)


def _rev(x):
    return torch.flip(torch.cumsum(torch.flip(x, (-1,)), -1), (-1,))


def _excl(x):
    return torch.cumsum(x, -1) - x


def _masked(x, m):
    return torch.cumsum(torch.where(m, x, torch.zeros_like(x)), -1)


def _pro_epi(x):
    return torch.sigmoid(torch.cumsum(torch.relu(x) * 0.5, -1))


def _logcumsumexp(x):
    return torch.logcumsumexp(x, -1)


def scans() -> list[Program]:
    """cumsum, cumprod, reversed, exclusive, masked scans, and scans between pointwise ops."""
    full, tiny = {"r": 32768, "c": 1021}, {"r": 9, "c": 203}
    three, tthree = {"a": 64, "b": 4099, "c": 130}, {"a": 3, "b": 67, "c": 5}
    tol = {F32: (1e-3, 1e-3), BF16: (5e-2, 1e-1)}
    x = (In(("r", "c")),)
    return [
        fn_program("cumsum_last_f32", "scan", _cumsum, x, full, tiny, tolerances=tol),
        fn_program("cumsum_middle_f32", "scan", _cumsum_mid, (In(("a", "b", "c")),), three, tthree, tolerances=tol),
        fn_program("cumprod_last_f32", "scan", _cumprod, x, full, tiny, tolerances=tol),
        fn_program("cumsum_reversed_f32", "scan", _rev, x, full, tiny, tolerances=tol),
        fn_program("cumsum_exclusive_f32", "scan", _excl, x, full, tiny, tolerances=tol),
        fn_program("cumsum_masked_f32", "scan", _masked, (In(("r", "c")), In(("r", "c"), "bool")), full, tiny,
                   tolerances=tol),
        fn_program("cumsum_prologue_epilogue_f32", "scan", _pro_epi, x, full, tiny, tolerances=tol),
        fn_program("logcumsumexp_last_f32", "scan", _logcumsumexp, x, full, tiny, tolerances=tol),
        fn_program("cumsum_last_bf16", "scan", lambda x: torch.cumsum(x.float(), -1).to(x.dtype), x, full, tiny, BF16,
                   tolerances=tol),
        fn_program("cumsum_long_rows_f32", "scan", _cumsum, x, {"r": 512, "c": 65537}, {"r": 3, "c": 1111},
                   tolerances=tol),
        # a few long rows (a top-p cumsum over a vocabulary) and one flattened tensor: split scans
        fn_program("cumsum_few_long_rows_f32", "scan", _cumsum, (In(("r", "c"), "uniform"),),
                   {"r": 4, "c": 262147}, {"r": 2, "c": 1500}, tolerances=tol),
        fn_program("cumsum_flat_f32", "scan", _cumsum, (In(("n",), "uniform"),), {"n": (1 << 24) + 3}, {"n": 3001},
                   tolerances=tol),
    ]


def programs() -> list[Program]:
    return whole_norms() + dim_reductions() + arg_reductions() + scans()


__all__ = ["programs", "short"]
