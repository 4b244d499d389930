"""Each kernel of a case's default autofuse plan timed alone (CUDA events, L2 flushed, median): which
kernel keeps a case from the bandwidth limit. Kernels with online softmax are also timed without it.

    python3 -m benchmarks.kernel_times --cases cross_entropy_bf16_8192x32000 --out DIR
"""
from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch


def kernel_rows(fn: Any, args: tuple, plan: Any, bench: Any, copy_bw: float, label: str) -> tuple[list[dict], Any]:
    import autofuse
    from autofuse.api import Recorder
    from autofuse.options import CompileOptions
    torch._dynamo.reset()
    rec = Recorder()
    opts = CompileOptions(use_db=False, recorder=rec, **({"plan": plan} if plan is not None else {"strategy": "inductor"}))
    f = autofuse.compile(fn, options=opts)
    f(*args)
    art = rec.graphs[0][2]
    prog = art.program
    env = prog.new_env(args)
    rows, k = [], 0
    for step in prog.steps:
        step.run(env)
        if hasattr(step, "_launch"):
            info = art.kernels[k]
            k += 1
            t = bench.time(lambda: step.run(env), {"kernel": info.name})
            nbytes = info.bytes_read + info.bytes_written
            rows.append({"variant": label, "kernel": info.name, "config": str(info.config), "us": t.median_us,
                         "MB": nbytes / 1e6, "bw_share": nbytes / (t.median_us * 1e-6) / copy_bw})
    return rows, art.plan


def main(argv: list[str] | None = None) -> int:
    from autofuse.measure.timing import CudaEventBenchmarker, copy_bandwidth
    from benchmarks.cases import CASES
    p = argparse.ArgumentParser()
    p.add_argument("--cases", nargs="*", default=["cross_entropy_bf16_8192x32000"])
    p.add_argument("--out", default="kernel_times")
    a = p.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    bw = copy_bandwidth()
    bench = CudaEventBenchmarker(reps=50)
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(), "copy_TBps": bw / 1e12, "rows": []}
    for case in CASES:
        if case.name not in a.cases:
            continue
        fn, args = case.build("cuda", 1.0)
        rows, plan = kernel_rows(fn, args, None, bench, bw, "default")
        if any(k.config is not None and k.config.online for k in plan.kernels):
            off = replace(plan, kernels=tuple(replace(k, config=replace(k.config, online=False)) if k.config else k
                                              for k in plan.kernels))
            rows += kernel_rows(fn, args, off, bench, bw, "online off")[0]
        for r in rows:
            r["case"] = case.name
            print(f"{case.name:32s} {r['variant']:10s} {r['kernel'][:60]:60s} {r['us']:8.1f} us {r['bw_share']:5.0%}  "
                  f"{r['config']}", flush=True)
        result["rows"] += rows
    (out / "kernel_times.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
