"""Column sum (f32 16384×4096, reduce dim 0) under many split-reduction configs, each timed with
benchmarks.run's loop on two inputs: the case's own tensor and a second one allocated after it.
Why: in session 12 the tuner timed the default plan at 78.7 µs on its buffers while the benchmark's
loop took 96 µs on the case's input (Inductor 77 µs in one run, 92 µs in the next, eager 77 µs in
both): does a config's time depend on where the input lies, and does some config not?

    python3 -m benchmarks.colsum_probe [--out DIR] [--reps 50]

Prints a table (fastest first on the case's input) and writes DIR/colsum_probe.json.
"""
from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import replace
from pathlib import Path

import torch

from .cases import CASES, nbytes
from .run import copy_bandwidth, time_fn


def plan_with(fn, args, config, kind: str = "reduction") -> object:
    """The default plan with `config` on its kernels of `kind` ("reduction" or "pointwise"); a dict
    `config` overrides those fields of each kernel's default config (keeping, say, its fast_tanh)."""
    from autofuse import CompileOptions
    from autofuse.capture.trace import trace_aten
    from autofuse.compiler import compile_graph
    art = compile_graph(trace_aten(fn, args), list(args), CompileOptions(strict=True, use_db=False))
    kernels = tuple(replace(kp, config=replace(kp.config, **config) if isinstance(config, dict) else config)
                    if info.kind == kind else kp for kp, info in zip(art.plan.kernels, art.kernels))
    return replace(art.plan, kernels=kernels)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="benchmarks/results/colsum_probe")
    p.add_argument("--reps", type=int, default=50)
    a = p.parse_args()
    from autofuse import CompileOptions
    from autofuse.capture.trace import compile_traced
    from autofuse.codegen.config import LaunchConfig
    case = next(c for c in CASES if c.name.startswith("column_sum"))
    fn, args = case.build("cuda", 1.0)
    x = args[0]
    other = torch.randn_like(x)  # a second placement
    bw = copy_bandwidth("cuda", a.reps)
    min_bytes = nbytes(args) + x.shape[1] * 4
    rows = []

    def timed(name: str, f) -> None:
        try:
            out = f(x)
            out = out[0] if isinstance(out, (list, tuple)) else out
            torch.testing.assert_close(out, x.double().sum(0).float(), rtol=1e-4, atol=1e-3)
            us = [time_fn(f, [(t,)], a.reps) * 1e3 for t in (x, other)]
            rows.append({"variant": name, "us_case_input": us[0], "us_other_input": us[1],
                         "bw_share": min_bytes / (us[0] * 1e-6) / bw})
        except Exception as e:  # a config that fails to compile or launch is reported, not fatal
            rows.append({"variant": name, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"})

    timed("eager", fn)
    timed("inductor", torch.compile(fn))
    for xb, rb, w, s in itertools.product((64, 128, 256, 512), (8, 16, 32, 64), (4, 8), (16, 32, 64)):
        if xb * rb > 32 * 128 * w or xb * rb < 32 * w:
            continue
        cfg = LaunchConfig(XBLOCK=xb, RBLOCK=rb, num_warps=w, num_stages=1, persistent=False, split=s)
        plan = plan_with(fn, args, cfg)
        timed(str(cfg), compile_traced(fn, list(args), CompileOptions(strict=True, use_db=False, plan=plan)))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "colsum_probe.json").write_text(json.dumps({"copy_bw": bw, "min_bytes": min_bytes, "rows": rows}, indent=1))
    ok = sorted((r for r in rows if "error" not in r), key=lambda r: r["us_case_input"])
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s; {len(ok)} variants timed, {len(rows) - len(ok)} failed")
    print("| variant | µs, case input | µs, other input | % copy BW |\n|---|---|---|---|")
    for r in ok:
        print(f"| {r['variant']} | {r['us_case_input']:.1f} | {r['us_other_input']:.1f} | {r['bw_share'] * 100:.0f}% |")
    for r in rows:
        if "error" in r:
            print(f"failed: {r['variant']}: {r['error']}")


if __name__ == "__main__":
    main()
