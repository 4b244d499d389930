"""Cache modifiers and grid-stride programs on the three cases where the tuned plan ties Inductor at
the memory limit (SwiGLU, RMSNorm, the seed example at 16384×4096). Why: in session 14's benchmark
these were within 0.3% of max-autotune, one way or the other; "at least as fast on every case" needs
a real edge, not a coin toss. Does a hint outside our config space (streaming `.cs` stores,
`evict_first` on single-use loads) or a grid-stride kernel (one program per SM slot, looping over
tiles) move a bandwidth-bound kernel by more than the noise (~0.2%)?

    python3 -m benchmarks.stream_probe [--out DIR] [--reps 50] [--rounds 7]

Hand-written Triton kernels in the form autofuse generates (checked against eager first), timed
in interleaved rounds with Inductor default and max-autotune-no-cudagraphs and autofuse's default
plan. Prints one table per case (median of round medians, range, % of copy bandwidth) and writes
DIR/stream_probe.json. A probe: what it finds becomes a config choice only if it pays.
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any, Callable

import torch
import triton
import triton.language as tl

from .cases import CASES, nbytes
from .run import copy_bandwidth, time_samples


# tl.sum's own combine function: the interpreter reduces with numpy when it sees it (Triton's jit
# helpers, tl.sum / tl.zeros / tl.sigmoid / tl.cdiv, are not interpretable in a process that imported
# Triton without TRITON_INTERPRET, as the tests do), so the kernels below spell them out
_SUM = tl.standard._sum_combine


@triton.jit
def _swiglu_tile(a_ptr, b_ptr, o_ptr, offs, n, LD_EF: tl.constexpr, ST_CS: tl.constexpr):
    mask = offs < n
    if LD_EF:
        a = tl.load(a_ptr + offs, mask, eviction_policy="evict_first").to(tl.float32)
        b = tl.load(b_ptr + offs, mask, eviction_policy="evict_first").to(tl.float32)
    else:
        a = tl.load(a_ptr + offs, mask).to(tl.float32)
        b = tl.load(b_ptr + offs, mask).to(tl.float32)
    # silu as tl.sigmoid writes it
    y = (a / (1.0 + tl.exp(-a))).to(tl.bfloat16).to(tl.float32) * b
    if ST_CS:
        tl.store(o_ptr + offs, y.to(tl.bfloat16), mask, cache_modifier=".cs")
    else:
        tl.store(o_ptr + offs, y.to(tl.bfloat16), mask)


@triton.jit
def _swiglu(a_ptr, b_ptr, o_ptr, n, BLOCK: tl.constexpr, LD_EF: tl.constexpr, ST_CS: tl.constexpr):
    _swiglu_tile(a_ptr, b_ptr, o_ptr, tl.program_id(0) * BLOCK + tl.arange(0, BLOCK), n, LD_EF, ST_CS)


@triton.jit
def _swiglu_stride(a_ptr, b_ptr, o_ptr, n, BLOCK: tl.constexpr, ST_CS: tl.constexpr):
    for t in range(tl.program_id(0), (n + BLOCK - 1) // BLOCK, tl.num_programs(0)):
        _swiglu_tile(a_ptr, b_ptr, o_ptr, t * BLOCK + tl.arange(0, BLOCK), n, False, ST_CS)


@triton.jit
def _rms_block(blk, x_ptr, w_ptr, o_ptr, N: tl.constexpr, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr,
               ST_CS: tl.constexpr):
    # looped, first read evict_last, second evict_first (Inductor's and our cache_hints form)
    rows = blk * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    acc = tl.full([XBLOCK, RBLOCK], 0.0, tl.float32)
    for r0 in range(0, N, RBLOCK):
        cols = r0 + tl.arange(0, RBLOCK)[None, :]
        x = tl.load(x_ptr + rows * N + cols, eviction_policy="evict_last").to(tl.float32)
        acc += x * x
    inv = tl.rsqrt(tl.reduce(acc, 1, _SUM)[:, None] / N + 1e-6)
    for r0 in range(0, N, RBLOCK):
        cols = r0 + tl.arange(0, RBLOCK)[None, :]
        x = tl.load(x_ptr + rows * N + cols, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(w_ptr + cols, eviction_policy="evict_last").to(tl.float32)
        y = (x * inv).to(tl.bfloat16).to(tl.float32) * w
        if ST_CS:
            tl.store(o_ptr + rows * N + cols, y.to(tl.bfloat16), cache_modifier=".cs")
        else:
            tl.store(o_ptr + rows * N + cols, y.to(tl.bfloat16))


@triton.jit
def _rmsnorm(x_ptr, w_ptr, o_ptr, ROWS: tl.constexpr, N: tl.constexpr, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr,
             ST_CS: tl.constexpr, STRIDE: tl.constexpr):
    if STRIDE:
        for blk in range(tl.program_id(0), ROWS // XBLOCK, tl.num_programs(0)):
            _rms_block(blk, x_ptr, w_ptr, o_ptr, N, XBLOCK, RBLOCK, ST_CS)
    else:
        _rms_block(tl.program_id(0), x_ptr, w_ptr, o_ptr, N, XBLOCK, RBLOCK, ST_CS)


@triton.jit
def _seed_block(blk, x_ptr, bias_ptr, g_ptr, b_ptr, o_ptr, N: tl.constexpr, XBLOCK: tl.constexpr,
                RBLOCK: tl.constexpr, ST_CS: tl.constexpr):
    rows = blk * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    acc = tl.full([XBLOCK, RBLOCK], 0.0, tl.float32)
    for r0 in range(0, N, RBLOCK):
        cols = r0 + tl.arange(0, RBLOCK)[None, :]
        x = tl.load(x_ptr + rows * N + cols, eviction_policy="evict_last")
        bias = tl.load(bias_ptr + cols, eviction_policy="evict_last")
        a = tl.maximum(x * 1.1 + bias, 0.0)
        acc += a * a + a * 0.1
    m = tl.reduce(acc, 1, _SUM)[:, None] / N
    for r0 in range(0, N, RBLOCK):
        cols = r0 + tl.arange(0, RBLOCK)[None, :]
        x = tl.load(x_ptr + rows * N + cols, eviction_policy="evict_first")
        bias = tl.load(bias_ptr + cols, eviction_policy="evict_last")
        g = tl.load(g_ptr + cols, eviction_policy="evict_last")
        b = tl.load(b_ptr + cols, eviction_policy="evict_last")
        a = tl.maximum(x * 1.1 + bias, 0.0)
        y = (a * a + a * 0.1 - m) * g + b
        if ST_CS:
            tl.store(o_ptr + rows * N + cols, y, cache_modifier=".cs")
        else:
            tl.store(o_ptr + rows * N + cols, y)


@triton.jit
def _seed(x_ptr, bias_ptr, g_ptr, b_ptr, o_ptr, ROWS: tl.constexpr, N: tl.constexpr, XBLOCK: tl.constexpr,
          RBLOCK: tl.constexpr, ST_CS: tl.constexpr, STRIDE: tl.constexpr):
    if STRIDE:
        for blk in range(tl.program_id(0), ROWS // XBLOCK, tl.num_programs(0)):
            _seed_block(blk, x_ptr, bias_ptr, g_ptr, b_ptr, o_ptr, N, XBLOCK, RBLOCK, ST_CS)
    else:
        _seed_block(tl.program_id(0), x_ptr, bias_ptr, g_ptr, b_ptr, o_ptr, N, XBLOCK, RBLOCK, ST_CS)


def _sm_count() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count


def swiglu_variants(a: torch.Tensor, b: torch.Tensor) -> dict[str, Callable[..., Any]]:
    n = a.numel()
    sms = _sm_count()
    out: dict[str, Callable[..., Any]] = {}
    for block, warps in ((1024, 4), (2048, 8), (4096, 8)):
        for ld_ef in (False, True):
            for st_cs in (False, True):
                def run(a, b, block=block, warps=warps, ld_ef=ld_ef, st_cs=st_cs):
                    o = torch.empty_like(a)
                    _swiglu[(triton.cdiv(n, block),)](a, b, o, n, BLOCK=block, LD_EF=ld_ef, ST_CS=st_cs, num_warps=warps)
                    return o
                out[f"B{block} w{warps}" + (" ld_ef" if ld_ef else "") + (" st_cs" if st_cs else "")] = run
    for block, warps, per_sm in ((1024, 4, 8), (2048, 8, 4), (1024, 4, 16)):
        for st_cs in (False, True):
            def run(a, b, block=block, warps=warps, per_sm=per_sm, st_cs=st_cs):
                o = torch.empty_like(a)
                _swiglu_stride[(sms * per_sm,)](a, b, o, n, BLOCK=block, ST_CS=st_cs, num_warps=warps)
                return o
            out[f"stride B{block} w{warps} x{per_sm}/SM" + (" st_cs" if st_cs else "")] = run
    return out


def rows_variants(kernel: Any, extra: int, rows: int, n: int) -> dict[str, Callable[..., Any]]:
    """Variants of a row kernel taking (x, *vectors) -> out, `extra` vectors."""
    sms = _sm_count()
    out: dict[str, Callable[..., Any]] = {}
    for xb, rb, warps in ((1, 2048, 8), (2, n, 16), (1, n, 8)):
        for st_cs in (False, True):
            def run(x, *vecs, xb=xb, rb=rb, warps=warps, st_cs=st_cs):
                o = torch.empty(x.shape, dtype=x.dtype, device=x.device)
                kernel[(rows // xb,)](x, *vecs, o, ROWS=rows, N=n, XBLOCK=xb, RBLOCK=rb, ST_CS=st_cs, STRIDE=False,
                                      num_warps=warps)
                return o
            out[f"X{xb} R{rb} w{warps}" + (" st_cs" if st_cs else "")] = run
        for per_sm in (2048 // (32 * warps), 2 * 2048 // (32 * warps)):
            def run(x, *vecs, xb=xb, rb=rb, warps=warps, per_sm=per_sm):
                o = torch.empty(x.shape, dtype=x.dtype, device=x.device)
                kernel[(sms * per_sm,)](x, *vecs, o, ROWS=rows, N=n, XBLOCK=xb, RBLOCK=rb, ST_CS=False, STRIDE=True,
                                        num_warps=warps)
                return o
            out[f"stride X{xb} R{rb} w{warps} x{per_sm}/SM"] = run
    return out


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.allclose(a.float(), b.float(), rtol=2e-2, atol=2e-2)


def probe(case_name: str, reps: int, rounds: int, bw: float) -> list[dict[str, Any]]:
    import autofuse
    case = next(c for c in CASES if c.name == case_name)
    fn, args = case.build("cuda", 1.0)
    args = tuple(args)
    min_bytes = nbytes(args) + sum(o.numel() * o.element_size() for o in [fn(*args)])
    ref = fn(*args)
    if case_name.startswith("swiglu"):
        variants = swiglu_variants(*args)
    elif case_name.startswith("rmsnorm"):
        variants = rows_variants(_rmsnorm, 1, *args[0].shape)
    else:
        variants = rows_variants(_seed, 3, *args[0].shape)
    variants = {"inductor": torch.compile(fn), "inductor max-autotune": torch.compile(fn, mode="max-autotune-no-cudagraphs"),
                "autofuse default": autofuse.compile(fn, strategy="inductor"), **variants}
    rows: dict[str, list[float]] = {}
    errors: dict[str, str] = {}
    for name, f in variants.items():
        try:
            got = f(*args)
            got = got[0] if isinstance(got, (list, tuple)) else got
            if not close(got, ref):
                errors[name] = f"wrong result (max abs err {(got.float() - ref.float()).abs().max().item():.3g})"
        except Exception as e:  # noqa: BLE001 - a variant that fails is reported, not fatal
            errors[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    live = [n for n in variants if n not in errors]
    for _ in range(rounds):
        for name in live:
            rows.setdefault(name, []).append(statistics.median(time_samples(variants[name], [args], reps)))
    out = []
    for name in live:
        ms = statistics.median(rows[name])
        out.append({"variant": name, "us": ms * 1e3, "round_us": [r * 1e3 for r in rows[name]],
                    "bw_share": min_bytes / (ms * 1e-3) / bw})
    out.sort(key=lambda r: r["us"])
    out += [{"variant": n, "error": e} for n, e in errors.items()]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="benchmarks/results/stream_probe")
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--cases", nargs="*", default=["swiglu_bf16_16384x11008", "rmsnorm_bf16_32768x4096",
                                                   "seed_f32_16384x4096"])
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    bw = copy_bandwidth("cuda", a.reps)
    result: dict[str, Any] = {"copy_bw": bw, "torch": torch.__version__, "triton": triton.__version__,
                              "device": torch.cuda.get_device_name(), "cases": {}}
    for name in a.cases:
        rows = probe(name, a.reps, a.rounds, bw)
        result["cases"][name] = rows
        (out / "stream_probe.json").write_text(json.dumps(result, indent=1))
        print(f"\n## {name} (copy {bw / 1e12:.2f} TB/s)\n\n| variant | µs | rounds | % copy BW |\n|---|---|---|---|")
        for r in rows:
            if "error" in r:
                print(f"| {r['variant']} | {r['error']} | | |")
            else:
                print(f"| {r['variant']} | {r['us']:.2f} | {min(r['round_us']):.2f}-{max(r['round_us']):.2f} | "
                      f"{100 * r['bw_share']:.1f}% |")


if __name__ == "__main__":
    main()
