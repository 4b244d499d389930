"""Flex attention's generated forward under fixed tile settings, beside torch.compile's (GPU).

    python3 -m benchmarks.flex_tiles --out FILE.json [--default]

Six bf16 cases (ALiBi through `score_mod` and a plain attention, 8 x 16 heads x 1024 x 64; a causal
block mask at 1024 x 64 and at 4096 x 128; a plain attention at 2048 x 128; a 256-token sliding
window at 4096 x 64), each compiled by torch.compile and then by autofuse under every setting:
(query tile, key tile, warps, stages), tiles at most a block mask's blocks, and three settings with
the keys loaded [keys, dim] and transposed in the kernel. `--default` runs autofuse's own choice
only. Each time: 20 back-to-back calls between two CUDA events, median of 7 rounds, the compiled
callable's whole call (host included where it exceeds the GPU's time; torch.compile runs first in
each case, so a machine whose state drifts shows it in torch.compile's times across runs). Prints
a markdown table (time, max error against the f32 computation, ÷ torch.compile's) and writes the
rows as JSON.
"""
from __future__ import annotations

import argparse
import json
import statistics
import warnings
from typing import Any, Callable, Iterator

import torch

import autofuse
from autofuse.codegen import flex_attention as kernel_text
from autofuse.runtime import flex_attention as runtime

SETTINGS = [(128, 64, 4, 3), (64, 64, 4, 3), (64, 64, 4, 2), (64, 64, 8, 3), (64, 32, 4, 3),
            (128, 64, 8, 3), (128, 64, 8, 2), (64, 128, 8, 3), (128, 128, 8, 3)]
TRANSPOSED = [(64, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3)]
# the key load as the kernel writes it, and the [keys, dim] load transposed in the kernel instead
KEYS_ROW = ("kt = tl.load(K + bk * skb + hk * skh + offs_n[None, :] * skn + offs_d[:, None] * skd{k_mask})"
            "{operand_cast}")
KEYS_TRANSPOSED = ("kt = tl.trans(tl.load(K + bk * skb + hk * skh + offs_n[:, None] * skn + offs_d[None, :] * skd"
                   "{v_mask}){operand_cast})")


def timed(f: Callable[..., Any], args: tuple, rounds: int = 7, calls: int = 20) -> float:
    """ms per call: median over rounds of back-to-back calls between two CUDA events."""
    for _ in range(5):
        f(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(calls):
            f(*args)
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / calls)
    return statistics.median(times)


def cases(dev: str) -> Iterator[tuple[str, tuple[int, int, int, int], Callable[..., Any]]]:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    b, h, s, d = 8, 16, 1024, 64
    slopes = torch.exp2(-8.0 * torch.arange(1, h + 1, device=dev) / h)

    def alibi(score, bi, hi, qi, ki):
        return torch.where(qi >= ki, score + slopes[hi] * (ki - qi), float("-inf"))
    yield "alibi_dense_8x16x1024x64", (b, h, s, d), lambda q, k, v: flex_attention(q, k, v, score_mod=alibi)
    yield "plain_dense_8x16x1024x64", (b, h, s, d), lambda q, k, v: flex_attention(q, k, v)
    causal = create_block_mask(lambda bi, hi, qi, ki: qi >= ki, None, None, s, s, device=dev)
    yield "causal_mask_8x16x1024x64", (b, h, s, d), lambda q, k, v: flex_attention(q, k, v, block_mask=causal)
    causal4k = create_block_mask(lambda bi, hi, qi, ki: qi >= ki, None, None, 4096, 4096, device=dev)
    yield "causal_mask_2x16x4096x128", (2, 16, 4096, 128), lambda q, k, v: flex_attention(q, k, v, block_mask=causal4k)
    yield "plain_dense_2x16x2048x128", (2, 16, 2048, 128), lambda q, k, v: flex_attention(q, k, v)
    window = create_block_mask(lambda bi, hi, qi, ki: (qi >= ki) & (qi - ki < 256), None, None, 4096, 4096, device=dev)
    yield "window256_2x16x4096x64", (2, 16, 4096, 64), lambda q, k, v: flex_attention(q, k, v, block_mask=window)


def fixed_pick(setting: tuple[int, int, int, int]) -> Callable[..., runtime.Launch]:
    """A `Launch.pick` that returns setting, its tiles at most a block mask's blocks."""
    def pick(head_dim: int, dtype: torch.dtype, interpret: bool, sparsity: Any = None) -> runtime.Launch:
        lc = runtime.Launch(*setting)
        if sparsity is None:
            return lc
        return runtime.Launch(min(lc.block_m, sparsity.q_block), min(lc.block_n, sparsity.kv_block),
                              lc.num_warps, lc.num_stages)
    return pick


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--default", action="store_true", help="autofuse's own tiles only")
    opts = p.parse_args(argv)
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    if KEYS_ROW not in kernel_text.STEP:
        raise SystemExit("the kernel's key load is not the one this sweep replaces")
    variants: list[tuple[tuple[int, int, int, int] | None, bool]] = (
        [(None, False)] if opts.default else [(t, False) for t in SETTINGS] + [(t, True) for t in TRANSPOSED])
    step, pick = kernel_text.STEP, runtime.Launch.__dict__["pick"]   # the staticmethod itself
    rows = []
    try:
        for name, (b, h, s, d), fn in cases("cuda"):
            q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            ref = fn(q.float(), k.float(), v.float())
            torch._dynamo.reset()
            ind = torch.compile(fn)
            t_ind = timed(ind, (q, k, v))
            rows.append((name, "inductor", t_ind, (ind(q, k, v).float() - ref).abs().max().item(), 1.0))
            print(rows[-1], flush=True)
            for setting, transposed in variants:
                runtime.Launch.pick = staticmethod(fixed_pick(setting)) if setting is not None else pick
                kernel_text.STEP = step.replace(KEYS_ROW, KEYS_TRANSPOSED) if transposed else step
                torch._dynamo.reset()
                try:
                    af = autofuse.compile(fn, use_db=False, strict=True)
                    t = timed(af, (q, k, v))
                    err = (af(q, k, v).float() - ref).abs().max().item()
                except Exception as e:  # noqa: BLE001 - a setting that fails is reported, the sweep goes on
                    print(name, setting, transposed, "ERROR", repr(e)[:300], flush=True)
                    continue
                rows.append((name, f"{setting or 'default'}{' ktrans' if transposed else ''}", t, err, t / t_ind))
                print(rows[-1], flush=True)
    finally:
        kernel_text.STEP, runtime.Launch.pick = step, pick
    print("\n| case | variant | ms | max err vs f32 | x inductor |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.4f} | {r[3]:.3g} | {r[4]:.2f} |")
    with open(opts.out, "w") as f:
        json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
