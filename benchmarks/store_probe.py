"""Streaming stores on pointwise kernels (`cache_hints` on a pointwise config: `.cs` stores), each
config built with and without them, next to Inductor default and max-autotune, in interleaved
rounds whose order rotates (benchmarks.run.time_interleaved).

Why: the two cases behind max-autotune in session 16's table are SwiGLU (249.09 against 248.77 µs)
and rmsnorm (129.41 against 129.12). Hand-written `.cs` stores took SwiGLU 249.68 -> 249.22 µs
(benchmarks/stream_probe.py); codegen can now emit them. RMSNorm's generated kernel at
max-autotune's config has the same SASS as the hand-written one that tied max-autotune
(200 instructions, the same loads and stores); its rows here, at our default and at
max-autotune's config, say whether the gap survives a rotating order.

    python3 -m benchmarks.store_probe [--out DIR] [--reps 50] [--rounds 9] [--cases NAME ...]

Every variant is checked against eager before it is timed. Prints one table per case (fastest
first) with the rounds' range, the ratio lines (with / without `.cs`), and writes
DIR/store_probe.json.
"""
from __future__ import annotations

import itertools
import json
import statistics
from typing import Any, Iterator


from .cases import CASES
from .colsum_probe import plan_with
from .probe import CheckedVariants, parser, start

POINTWISE = ("swiglu_bf16_16384x11008", "bias_gelu_tanh_bf16_16384x8192")
DEFAULT_CASES = (*POINTWISE, "rmsnorm_bf16_32768x4096")


def configs(case_name: str) -> Iterator[tuple[dict[str, Any], str]]:
    """(config fields over the default's, kind): pointwise configs both ways (the default's other
    flags, such as bias+GELU's fast_tanh, kept), or rmsnorm's default and max-autotune's form."""
    if case_name in POINTWISE:
        for xb, w in itertools.product((512, 1024, 2048), (4, 8)):
            for cs in (False, True):
                yield {"XBLOCK": xb, "num_warps": w, "cache_hints": cs}, "pointwise"
        return
    for xb, rb, w in ((1, 2048, 8), (2, 4096, 16), (1, 4096, 8)):
        yield ({"XBLOCK": xb, "RBLOCK": rb, "num_warps": w, "num_stages": 1, "persistent": False,
                "cache_hints": True}, "reduction")


def probe_case(case: Any, reps: int, rounds: int, bw: float) -> list[dict[str, Any]]:
    from autofuse import CompileOptions
    from autofuse.capture.trace import compile_traced
    fn, args = case.build("cuda", 1.0)
    variants = CheckedVariants(fn, args)
    variants.add_inductor_modes(fn)
    for fields, kind in configs(case.name):
        plan = plan_with(fn, args, fields, kind)
        cfg = next(k.config for k in plan.kernels
                   if k.config is not None and all(getattr(k.config, f) == v for f, v in fields.items()))
        opts = CompileOptions(strict=True, use_db=False, plan=plan)
        variants.add(str(cfg), lambda o=opts: compile_traced(fn, list(args), o), config=cfg.to_json())
    return variants.timed(reps, rounds, bw)


def ratio_line(rows: list[dict[str, Any]]) -> str:
    """Time with `.cs` stores / time without, over the configs timed both ways ('' when none)."""
    by = {r["variant"]: r for r in rows}
    pairs = [(by[n], by[f"{n} cache_hints"]) for n in by if f"{n} cache_hints" in by
             and "us" in by[n] and "us" in by[f"{n} cache_hints"]]
    if not pairs:
        return ""
    ratios = [b["us"] / a["us"] for a, b in pairs]
    return (f"with .cs / without over {len(pairs)} configs: median {statistics.median(ratios):.4f}, "
            f"min {min(ratios):.4f}, max {max(ratios):.4f}")


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| variant | µs | rounds (µs) | % copy bw |", "|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: r.get("us", float("inf"))):
        if "us" in r:
            lo, hi = min(r["round_us"]), max(r["round_us"])
            lines.append(f"| {r['variant']} | {r['us']:.2f} | {lo:.2f}-{hi:.2f} | {100 * r['bw_share']:.1f}% |")
        else:
            lines.append(f"| {r['variant']} | {r.get('error', '—')} | | |")
    return "\n".join(lines)


def main() -> None:
    a = parser(__doc__, "store_probe", 9, DEFAULT_CASES).parse_args()
    out, bw, result = start(a)
    for case in [c for c in CASES if c.name in a.cases]:
        rows = probe_case(case, a.reps, a.rounds, bw)
        result["cases"][case.name] = rows
        (out / "store_probe.json").write_text(json.dumps(result, indent=1))
        line = ratio_line(rows)
        print(f"\n## {case.name}\n\n{table(rows)}" + (f"\n\n{line}" if line else ""), flush=True)


if __name__ == "__main__":
    main()
