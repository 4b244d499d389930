"""Looped row reductions with the loop's trip count a literal against the same kernels with it read
from the `rnumel` argument, next to Inductor (default and max-autotune) in the same process.

Why: codegen now writes `for roffset in range(0, 4096, RBLOCK)` where it wrote `range(0, rnumel,
RBLOCK)` (Inductor's loops have literal bounds too). Compiled for sm_90 on the CPU, the seed
kernel (XBLOCK 1, RBLOCK 1024, 8 warps) becomes fully unrolled straight-line code: 320 SASS
instructions and 24 LDG.128 against two loops and 42 LDG.128. Does that show in time?

    python3 -m benchmarks.trip_probe [--out DIR] [--reps 50] [--rounds 5] [--cases NAME ...]
    python -m benchmarks.trip_probe --ratios DIR/trip_probe.json ...   (the ratio lines again, no GPU)

Each case: Inductor default, max-autotune-no-cudagraphs, then autofuse's default plan with every
looped config of the grid on its reduction kernels, each built twice: as codegen emits it
("literal") and with the bound put back to `rnumel` ("runtime", a text patch of the source at
load time; split kernels, whose chunk loop was always literal, are not in the grid). Every
variant is checked against eager, then all are timed in interleaved rounds (benchmarks.run's timer).
Prints one table per case (fastest first) and writes DIR/trip_probe.json.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import statistics
from pathlib import Path
from typing import Any, Iterator


from .cases import CASES
from .colsum_probe import plan_with
from .probe import CheckedVariants, parser, start
from .sass_count import runtime_bound

DEFAULT_CASES = ("seed_f32_16384x4096", "rmsnorm_bf16_32768x4096", "layernorm_bf16_32768x4096",
                 "residual_layernorm_bf16_32768x4096")


@contextlib.contextmanager
def runtime_bound_kernels() -> Iterator[None]:
    """Kernels loaded meanwhile get `range(0, rnumel, RBLOCK)` back (the pre-change codegen)."""
    from autofuse import compiler
    saved = compiler.load_kernel
    compiler.load_kernel = lambda name, source, interpret: saved(name, runtime_bound(source), interpret)
    try:
        yield
    finally:
        compiler.load_kernel = saved


def looped_grid() -> Iterator[Any]:
    from autofuse.codegen.config import LaunchConfig
    for xb, rb, w in itertools.product((1, 2), (1024, 2048), (8, 16)):
        yield LaunchConfig(XBLOCK=xb, RBLOCK=rb, num_warps=w, num_stages=1, persistent=False, cache_hints=True)


def probe_case(case: Any, reps: int, rounds: int, bw: float) -> list[dict[str, Any]]:
    from autofuse import CompileOptions
    from autofuse.capture.trace import compile_traced
    fn, args = case.build("cuda", 1.0)
    variants = CheckedVariants(fn, args)
    variants.add_inductor_modes(fn)
    for cfg in looped_grid():
        opts = CompileOptions(strict=True, use_db=False, plan=plan_with(fn, args, cfg))
        variants.add(f"{cfg} literal", lambda o=opts: compile_traced(fn, list(args), o), config=cfg.to_json(),
                     bound="literal")
        with runtime_bound_kernels():
            variants.add(f"{cfg} runtime", lambda o=opts: compile_traced(fn, list(args), o), config=cfg.to_json(),
                         bound="runtime")
    return variants.timed(reps, rounds, bw)


def main() -> None:
    p = parser(__doc__, "trip_probe", 5, DEFAULT_CASES)
    p.add_argument("--ratios", nargs="+", metavar="JSON", help="only print the ratio lines of earlier runs")
    a = p.parse_args()
    if a.ratios:
        ratios_of(a.ratios)
        return
    out, bw, result = start(a)
    for case in [c for c in CASES if c.name in a.cases]:
        rows = probe_case(case, a.reps, a.rounds, bw)
        result["cases"][case.name] = rows
        (out / "trip_probe.json").write_text(json.dumps(result, indent=1))
        print(f"\n## {case.name}\n\n| variant | µs | % copy bw |\n|---|---|---|")
        for r in sorted(rows, key=lambda r: r.get("us", float("inf"))):
            cell = f"{r['us']:.1f} | {100 * r['bw_share']:.1f}%" if "us" in r else f"{r.get('error', '—')} |"
            print(f"| {r['variant']} | {cell} |", flush=True)
        line = ratio_line(rows)
        if line:
            print(f"\n{line}", flush=True)


def ratio_line(rows: list[dict[str, Any]]) -> str:
    """Runtime-bound time / literal time over the configs timed both ways ('' when none)."""
    by = {r["variant"]: r for r in rows}
    pairs = [(by[f"{n} literal"], by[f"{n} runtime"]) for n in (str(c) for c in looped_grid())
             if "us" in by.get(f"{n} literal", {}) and "us" in by.get(f"{n} runtime", {})]
    if not pairs:
        return ""
    ratios = [b["us"] / a["us"] for a, b in pairs]
    return (f"runtime / literal over {len(pairs)} configs: median {statistics.median(ratios):.4f}, "
            f"min {min(ratios):.4f}, max {max(ratios):.4f}")


def ratios_of(paths: list[str]) -> None:
    """--ratios: each case's ratio line from trip_probe.json files (on any machine)."""
    for path in paths:
        for case, rows in json.loads(Path(path).read_text())["cases"].items():
            print(f"{path}: {case}: {ratio_line(rows)}")

if __name__ == "__main__":
    main()
