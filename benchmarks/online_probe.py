"""Is cross-entropy's online logsumexp (bf16, 8192×32000) bound by memory or by instructions? Standalone
Triton kernels of the row max and sum(exp(x - max)) in several forms, timed against the copy bandwidth
(CUDA events, median, L2 flushed), each checked against torch.logsumexp:

  lane      — what codegen emitted before: each lane keeps a running max; per element one exp, a
              compare and a select (about 16 SASS instructions per element on sm_90);
  chunk     — each thread's V contiguous elements (one 16-byte load) form a chunk: its max in
              registers, then one exp per element against the new running max (no compare/select);
  chunk_ftz — chunk with exp2(x·log2e − m·log2e) as one FFMA and ex2.approx.ftz (no denormal
              fix-up around each ex2);
  persistent— the whole row in registers (RBLOCK 32768): max, then sum of exp.

    python3 -m benchmarks.online_probe --out DIR
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _maxnan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _ex2(x):
    return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                     pack=1)


@triton.jit
def lse_lane(x_ptr, m_ptr, s_ptr, rows, cols, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr, V: tl.constexpr,
             MODE: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < rows
    m = tl.full([XBLOCK, RBLOCK], float("-inf"), tl.float32)
    s = tl.full([XBLOCK, RBLOCK], 0.0, tl.float32)
    for roffset in range(0, cols, RBLOCK):
        rindex = roffset + tl.arange(0, RBLOCK)[None, :]
        xrmask = xmask & (rindex < cols)
        x = tl.load(x_ptr + rindex + cols * xindex, xrmask, other=0).to(tl.float32)
        x = tl.where(xrmask, x, float("-inf"))
        d = x - m
        up = d > 0
        e = tl.exp(tl.maximum(-tl.abs(d), float("-inf")))
        s = tl.where(up, s * e + 1.0, s + e)
        m = tl.maximum(m, x, propagate_nan=tl.PropagateNan.ALL)
    mx = tl.max(m, 1)[:, None]
    tl.store(m_ptr + xindex, mx, xmask)
    tl.store(s_ptr + xindex, tl.sum(tl.where(s == 0, 0.0, s * tl.exp(m - mx)), 1)[:, None], xmask)


@triton.jit
def lse_chunk(x_ptr, m_ptr, s_ptr, rows, cols, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr, V: tl.constexpr,
              MODE: tl.constexpr):
    """MODE 0: tl.exp; 1: FFMA + ex2.approx.ftz; 2: as 1 with the masked load giving -inf (no select)."""
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < rows
    m = tl.full([XBLOCK, RBLOCK // V], float("-inf"), tl.float32)
    s = tl.full([XBLOCK, RBLOCK // V], 0.0, tl.float32)
    for roffset in range(0, cols, RBLOCK):
        rindex = roffset + tl.arange(0, RBLOCK)[None, :]
        xrmask = xmask & (rindex < cols)
        if MODE == 2:
            x = tl.load(x_ptr + rindex + cols * xindex, xrmask, other=float("-inf")).to(tl.float32)
        else:
            x = tl.load(x_ptr + rindex + cols * xindex, xrmask, other=0).to(tl.float32)
            x = tl.where(xrmask, x, float("-inf"))
        x3 = tl.reshape(x, [XBLOCK, RBLOCK // V, V])
        mn = tl.maximum(m, tl.reduce(x3, 2, _maxnan), propagate_nan=tl.PropagateNan.ALL)
        safe = tl.where(mn == float("-inf"), 0.0, mn)
        if MODE == 0:
            s = s * tl.exp(m - safe) + tl.sum(tl.exp(x3 - safe[:, :, None]), 2)
        else:
            sl = safe * 1.4426950408889634
            s = s * _ex2(m * 1.4426950408889634 - sl) + tl.sum(_ex2(x3 * 1.4426950408889634 - sl[:, :, None]), 2)
        m = mn
    mx = tl.max(m, 1)[:, None]
    tl.store(m_ptr + xindex, mx, xmask)
    tl.store(s_ptr + xindex, tl.sum(tl.where(s == 0, 0.0, s * tl.exp(m - mx)), 1)[:, None], xmask)


@triton.jit
def lse_persistent(x_ptr, m_ptr, s_ptr, rows, cols, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr, V: tl.constexpr,
                   MODE: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < rows
    rindex = tl.arange(0, RBLOCK)[None, :]
    x = tl.load(x_ptr + rindex + cols * xindex, xmask & (rindex < cols), other=float("-inf")).to(tl.float32)
    mx = tl.max(x, 1)[:, None]
    tl.store(m_ptr + xindex, mx, xmask)
    tl.store(s_ptr + xindex, tl.sum(tl.exp(x - mx), 1)[:, None], xmask)


VARIANTS = [  # (name, kernel, XBLOCK, RBLOCK, V, MODE, num_warps)
    ("lane r2048 w8", lse_lane, 1, 2048, 1, 0, 8),
    ("lane r4096 w16", lse_lane, 1, 4096, 1, 0, 16),
    ("chunk r2048 w8", lse_chunk, 1, 2048, 8, 0, 8),
    ("chunk_ftz r2048 w8", lse_chunk, 1, 2048, 8, 1, 8),
    ("chunk_ftz_nosel r2048 w8", lse_chunk, 1, 2048, 8, 2, 8),
    ("chunk_ftz r4096 w8", lse_chunk, 1, 4096, 8, 1, 8),
    ("chunk_ftz r4096 w16", lse_chunk, 1, 4096, 8, 1, 16),
    ("chunk_ftz r1024 w4", lse_chunk, 1, 1024, 8, 1, 4),
    ("chunk_ftz_nosel r4096 w16", lse_chunk, 1, 4096, 8, 2, 16),
    ("chunk_ftz_nosel r8192 w16", lse_chunk, 1, 8192, 8, 2, 16),
    ("persistent r32768 w32", lse_persistent, 1, 32768, 1, 0, 32),
    ("persistent r32768 w16", lse_persistent, 1, 32768, 1, 0, 16),
]


def main(argv: list[str] | None = None) -> int:
    from autofuse.measure.timing import CudaEventBenchmarker, copy_bandwidth
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="online_probe")
    p.add_argument("--rows", type=int, default=8192)
    p.add_argument("--cols", type=int, default=32000)
    a = p.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if not torch.cuda.is_available():
        print("online_probe needs a CUDA GPU")
        return 1
    bw = copy_bandwidth()
    x = torch.randn(a.rows, a.cols, device="cuda").to(torch.bfloat16)
    ref = torch.logsumexp(x.float(), 1)
    bench = CudaEventBenchmarker(reps=100)
    rows = []
    for name, kern, xb, rb, v, mode, w in VARIANTS:
        m = torch.full((a.rows,), float("nan"), device="cuda")
        s = torch.full((a.rows,), float("nan"), device="cuda")
        grid = (triton.cdiv(a.rows, xb),)

        def run() -> None:
            kern[grid](x, m, s, a.rows, a.cols, XBLOCK=xb, RBLOCK=rb, V=v, MODE=mode, num_warps=w, num_stages=1)
        try:
            run()
            torch.cuda.synchronize()
            err = (m + torch.log(s) - ref).abs().max().item()
            t = bench.time(run, {"kernel": name}).median_us
        except Exception as e:  # noqa: BLE001 - a variant that fails is reported, the probe goes on
            rows.append({"variant": name, "error": f"{type(e).__name__}: {str(e)[:200]}"})
            print(f"{name:28s} failed: {rows[-1]['error']}", flush=True)
            continue
        share = x.numel() * x.element_size() / (t * 1e-6) / bw
        rows.append({"variant": name, "us": t, "bw_share": share, "max_abs_err": err})
        print(f"{name:28s} {t:8.1f} us {share:6.1%}  max |lse err| {err:.2e}", flush=True)
    (out / "online_probe.json").write_text(json.dumps({"device": torch.cuda.get_device_name(), "copy_TBps": bw / 1e12,
                                                       "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
