"""Scans (cumsum, cumprod, logcumsumexp, reversed, exclusive, masked, running mean) at the sizes users
run them: eager, Inductor default, autofuse's default plan, and autofuse with other launch configs
on its scan kernels (persistent against looped rows, RBLOCK, XBLOCK, num_warps). Why: scans ran as
ATen fallbacks, 1.6-3.4x slower than torch.compile; this measures the generated scan kernels and
whether their default config (Inductor's) is the best one the config space offers.

    python3 -m benchmarks.scan_probe [--out DIR] [--reps 50] [--cases NAME ...]
    python3 -m benchmarks.scan_probe --check-only          # CPU: shrunk sizes, correctness only

Every variant is checked against eager before it is timed. Prints one table per case (fastest
first) and writes DIR/scan_probe.json.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F


def _running_mean(x: torch.Tensor) -> torch.Tensor:
    return x.cumsum(-1) / torch.arange(1, x.shape[-1] + 1, device=x.device, dtype=x.dtype)


def _n(size: int, scale: float) -> int:
    """A dim at `scale` (1: the GPU size); at least 3, so shrunk shapes stay non-trivial."""
    return max(int(size * scale), 3)


# name -> (fn, input maker(scale)); scale 1: ≥ 64 MB moved on the GPU, a small scale shrinks for the CPU
CASES: dict[str, tuple[Callable[..., Any], Callable[[float], list]]] = {
    "cumsum_last_f32_4096x4096": (lambda x: x.cumsum(-1), lambda s: [_rand((_n(4096, s), _n(4096, s)))]),
    "cumsum_last_f32_64x65536": (lambda x: x.cumsum(-1), lambda s: [_rand((_n(64, s), _n(65536, s)))]),
    "cumsum_first_f32_4096x4096": (lambda x: x.cumsum(0), lambda s: [_rand((_n(4096, s), _n(4096, s)))]),
    "cumsum_middle_f32_64x1024x256": (lambda x: x.cumsum(1), lambda s: [_rand((_n(64, s), _n(1024, s), _n(256, s)))]),
    "reverse_cumsum_f32_4096x4096": (lambda x: x.flip(-1).cumsum(-1).flip(-1), lambda s: [_rand((_n(4096, s), _n(4096, s)))]),
    "exclusive_cumsum_f32_4096x4096": (lambda x: x.cumsum(-1) - x, lambda s: [_rand((_n(4096, s), _n(4096, s)))]),
    "exclusive_pad_f32_4096x4096": (lambda x: F.pad(x.cumsum(-1)[..., :-1], (1, 0)),
                                    lambda s: [_rand((_n(4096, s), _n(4096, s)))]),
    "masked_cumsum_f32_4096x4096": (lambda x, m: (x * m).cumsum(-1),
                                    lambda s: [_rand((_n(4096, s), _n(4096, s))), _rand((_n(4096, s), _n(4096, s))) > 0]),
    "cumprod_f32_4096x4096": (lambda x: x.cumprod(-1), lambda s: [1 + 1e-4 * _rand((_n(4096, s), _n(4096, s)))]),
    "logcumsumexp_f32_4096x4096": (lambda x: torch.logcumsumexp(x, -1), lambda s: [_rand((_n(4096, s), _n(4096, s)))]),
    "cumsum_bf16_4096x4096": (lambda x: x.cumsum(-1), lambda s: [_rand((_n(4096, s), _n(4096, s))).bfloat16()]),
    "cumsum_int32_4096x4096": (lambda x: x.cumsum(-1), lambda s: [(_rand((_n(4096, s), _n(4096, s))) * 4).int()]),
    "running_mean_f32_4096x1000": (_running_mean, lambda s: [_rand((_n(4096, s), _n(1000, s)))]),
}

DEVICE = {"name": "cuda"}


def _rand(shape: tuple[int, ...]) -> torch.Tensor:
    return torch.randn(shape, device=DEVICE["name"])


def variants(fn: Callable[..., Any], args: list, rnumel: int) -> Iterator[tuple[str, Any]]:
    """(label, plan): the default, then its scan kernels under other configs (persistent up to 8192)."""
    from .colsum_probe import plan_with
    yield "default", None
    for rb in (512, 1024, 2048, 4096):
        for xb in (1, 2, 4):
            for w in (4, 8, 16):
                yield f"looped XBLOCK={xb} RBLOCK={rb} warps={w}", plan_with(
                    fn, args, dict(persistent=False, XBLOCK=xb, RBLOCK=rb, num_warps=w), kind="scan")
    rfull = 1 << max(rnumel - 1, 0).bit_length()
    if rfull <= 8192:
        for xb in (1, 2, 4, 8):
            for w in (4, 8, 16, 32):
                yield f"persistent XBLOCK={xb} warps={w}", plan_with(
                    fn, args, dict(persistent=True, XBLOCK=xb, RBLOCK=rfull, num_warps=w), kind="scan")


def probe_case(name: str, reps: int, check_only: bool) -> list[dict[str, Any]]:
    from autofuse import CompileOptions
    from autofuse.capture.trace import compile_traced
    from .run import close, time_fn
    fn, make = CASES[name]
    args = make(0.03 if check_only else 1.0)
    expected = fn(*args)
    scans = []
    rows = []
    rnumel = 0
    base = compile_traced(fn, args, CompileOptions(strict=True, use_db=False))
    base(*args)
    for prog in base.compiled.programs.values():
        scans = [k for k in prog.kernels if k.kind == "scan"]
        rnumel = max((k.rnumel for k in scans), default=0)
    assert scans, f"{name}: no scan kernel"
    runs: dict[str, Callable[[], Any]] = {"eager": lambda: fn(*args)}
    if not check_only:
        inductor = torch.compile(fn)
        runs["inductor"] = lambda: inductor(*args)
    for label, plan in variants(fn, args, rnumel):
        try:
            opts = CompileOptions(strict=True, use_db=False, plan=plan)
            compiled = compile_traced(fn, args, opts)
            got = compiled(*args)
        except Exception as e:  # an impossible config (too many registers, shared memory) is skipped
            rows.append({"variant": f"autofuse {label}", "error": repr(e)[:200]})
            continue
        if not close(got[0] if not isinstance(expected, (list, tuple)) else got, expected):
            rows.append({"variant": f"autofuse {label}", "error": "wrong result"})
            continue
        runs[f"autofuse {label}"] = (lambda c: lambda: c(*args))(compiled)
        if check_only and label != "default":
            break
    for label, run in runs.items():
        ms = None if check_only else time_fn(lambda *_: run(), [()], reps)
        rows.append({"variant": label, "ms": ms})
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="benchmarks/results/scan_probe")
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--cases", nargs="*", default=list(CASES))
    p.add_argument("--check-only", action="store_true", help="CPU, shrunk sizes, compare with eager, no timing")
    a = p.parse_args()
    DEVICE["name"] = "cpu" if a.check_only else "cuda"
    results = {}
    for name in a.cases:
        rows = probe_case(name, a.reps, a.check_only)
        results[name] = rows
        print(f"\n{name}")
        for r in sorted(rows, key=lambda r: (r.get("ms") is None, r.get("ms") or 0.0)):
            print(f"  {r['variant']:<48} {r.get('error') or ('%.4f ms' % r['ms'] if r.get('ms') else 'ok')}")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scan_probe.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
