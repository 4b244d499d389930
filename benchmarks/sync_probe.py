"""Why does a program time slower in benchmarks.run's back-to-back loop than alone? For a case and
autofuse's default plan (and a short tune): sync debug mode on a few calls (a synchronizing call
raises, with its stack), benchmarks.run.time_fn against CudaEventBenchmarker (spin kernel ahead,
host time hidden), wall time per call, and the CUDA runtime calls of five calls (torch.profiler).

    python3 -m benchmarks.sync_probe --cases column_sum_f32_16384x4096 --out DIR
"""
from __future__ import annotations

import argparse
import json
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import torch


def probe(name: str, f: Callable[..., Any], args: tuple) -> dict[str, Any]:
    from autofuse.measure.timing import CudaEventBenchmarker
    from benchmarks.run import time_fn
    row: dict[str, Any] = {"variant": name}
    for _ in range(3):
        f(*args)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            f(*args)
        row["sync"] = None
    except Exception as e:  # noqa: BLE001 - the synchronizing call is what we look for
        row["sync"] = f"{type(e).__name__}: {e}\n" + "".join(traceback.format_exc(limit=30)[-4000:])
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    row["time_fn_us"] = time_fn(f, [args], 50) * 1e3
    row["events_us"] = CudaEventBenchmarker(reps=50).time(lambda: f(*args), {"kind": "probe"}).median_us
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(100):
        f(*args)
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    row["host_us"] = (t1 - t0) / 100 * 1e6
    row["wall_us"] = (time.perf_counter() - t0) / 100 * 1e6
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            f(*args)
        torch.cuda.synchronize()
    row["profile"] = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25)
    print(f"== {name}: time_fn {row['time_fn_us']:.1f} us, events {row['events_us']:.1f} us, host {row['host_us']:.1f} us, "
          f"wall {row['wall_us']:.1f} us, sync: {(row['sync'] or 'none').splitlines()[0]}", flush=True)
    return row


def step_times(fn: Callable[..., Any], args: tuple, options: Any, calls: int = 200) -> list[dict[str, Any]]:
    """Host µs per program step (Alloc, KernelLaunch, ...) over back-to-back runs of the program alone."""
    import autofuse
    from autofuse.api import Recorder
    rec = Recorder()
    torch._dynamo.reset()
    autofuse.compile(fn, options=options.with_(recorder=rec))(*args)
    art = rec.graphs[0][2]
    prog = art.program
    total = [0.0] * len(prog.steps)
    for i in range(calls + 5):
        env = prog.new_env(args)
        for k, step in enumerate(prog.steps):
            t0 = time.perf_counter()
            step.run(env)
            if i >= 5:
                total[k] += time.perf_counter() - t0
    torch.cuda.synchronize()
    rows = []
    for k, step in enumerate(prog.steps):
        desc = type(step).__name__ + (f" {step.name} grid={getattr(step, '_grid', None)} split={step.split} "
                                      f"fast={step._launch.enabled}/{step._launch.cached}" if hasattr(step, "_launch") else "")
        rows.append({"step": desc, "us": total[k] / calls * 1e6})
        print(f"   {total[k] / calls * 1e6:8.1f} us  {desc}", flush=True)
    for kp in art.plan.kernels:
        print(f"   config {kp.config}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    import autofuse
    from benchmarks.cases import CASES
    p = argparse.ArgumentParser()
    p.add_argument("--cases", nargs="*", default=["column_sum_f32_16384x4096", "cross_entropy_bf16_8192x32000"])
    p.add_argument("--tune-trials", type=int, default=4)
    p.add_argument("--tune-budget", type=float, default=20)
    p.add_argument("--out", default="sync_probe")
    a = p.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for case in CASES:
        if case.name not in a.cases:
            continue
        fn, args = case.build("cuda", 1.0)
        torch._dynamo.reset()
        variants: dict[str, Any] = {"inductor": torch.compile(fn), "autofuse_inductor_plan": autofuse.compile(fn, strategy="inductor")}
        if a.tune_trials:
            db = str(out / f"{case.name}.db")
            autofuse.tune(fn, args, db=db, trials=a.tune_trials, time_budget=a.tune_budget, progress=False,
                          compare_torch_compile=False)
            variants["autofuse_tuned"] = autofuse.compile(fn, db=db, on_miss="error")
        from autofuse.options import CompileOptions
        opts = {"autofuse_inductor_plan": CompileOptions(use_db=False, strategy="inductor")}
        if a.tune_trials:
            opts["autofuse_tuned"] = CompileOptions(db=db, on_miss="error")
        for name, f in variants.items():
            r = probe(f"{case.name} {name}", f, args)
            if name in opts:
                r["steps"] = step_times(fn, args, opts[name])
            rows.append(r)
            if r["sync"]:
                print(r["sync"][-3000:], flush=True)
    (out / "sync_probe.json").write_text(json.dumps(rows, indent=1))
    (out / "profiles.txt").write_text("\n\n".join(f"# {r['variant']}\n{r['profile']}" for r in rows))
    for f in out.glob("*.db*"):
        f.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
