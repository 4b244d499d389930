"""Where the host time of one call goes, on a graph too small to hide it (seed example, 1024²).

Each layer is timed alone, back to back, GPU idle-bound (µs per call, median of 5 runs of
`--calls` calls): eager; Dynamo with the eager backend; Dynamo + AOTAutograd (aot_eager);
Inductor; autofuse's whole call; its compiled program called directly (no Dynamo, no AOTAutograd);
one kernel launch through the fast launcher and through Triton's JIT; the CUDA-graph variants.
A cProfile of autofuse's and Inductor's calls (top functions by own time) follows.

    python3 -m benchmarks.host_probe --out DIR
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import torch


def per_call_us(fn: Callable[[], Any], calls: int) -> float:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        runs.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(runs)


def profile(fn: Callable[[], Any], calls: int, top: int = 25) -> str:
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(top)
    return s.getvalue()


def main(argv: list[str] | None = None) -> int:
    import autofuse
    from autofuse.api import Recorder
    from autofuse.options import CompileOptions
    from benchmarks.cases import CASES

    p = argparse.ArgumentParser()
    p.add_argument("--out", default="host_probe")
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--case", default="seed_f32_1024x1024")
    a = p.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    case = next(c for c in CASES if c.name == a.case)
    fn, args = case.build("cuda", 1.0)

    rec = Recorder()
    af = autofuse.compile(fn, options=CompileOptions(strategy="inductor", use_db=False, recorder=rec))
    af(*args)
    program = rec.graphs[0][2].program
    launches = [s for s in program.steps if hasattr(s, "_launch")]
    variants: dict[str, Callable[[], Any]] = {
        "eager": lambda: fn(*args),
        "dynamo_eager_backend": (lambda f: lambda: f(*args))(torch.compile(fn, backend="eager")),
        "dynamo_aot_eager": (lambda f: lambda: f(*args))(torch.compile(fn, backend="aot_eager")),
        "inductor": (lambda f: lambda: f(*args))(torch.compile(fn)),
        "autofuse": lambda: af(*args),
        "autofuse_program_only": lambda: program(list(args)),
        "inductor_cudagraphs": (lambda f: lambda: f(*args))(torch.compile(fn, mode="reduce-overhead")),
        "autofuse_cudagraphs": (lambda f: lambda: f(*args))(autofuse.compile(fn, strategy="inductor",
                                                                             cudagraphs=True)),
    }
    results: dict[str, Any] = {"case": case.name, "calls": a.calls, "torch": torch.__version__,
                               "device": torch.cuda.get_device_name()}
    import triton
    results["triton"] = triton.__version__
    results["launchers"] = [{"kernel": s.name, "fast_path": s._launch.enabled, "cached": len(s._launch.kernels)}
                            for s in launches]
    us: dict[str, float] = {}
    for name, f in variants.items():
        us[name] = per_call_us(f, a.calls)
        print(f"{name:28s} {us[name]:8.1f} us/call", flush=True)
    if launches:
        k = launches[0]
        env = program.new_env(args)
        for step in program.steps:
            step.run(env)
        us["one_launch_fast"] = per_call_us(lambda: k.run(env), a.calls)
        fast = k._launch.enabled
        k._launch.enabled = False
        us["one_launch_jit"] = per_call_us(lambda: k.run(env), a.calls)
        k._launch.enabled = fast
        us["empty_strided"] = per_call_us(lambda: torch.empty_strided((1024, 1024), (1024, 1), device="cuda"),
                                          a.calls)
        for n in ("one_launch_fast", "one_launch_jit", "empty_strided"):
            print(f"{n:28s} {us[n]:8.1f} us/call", flush=True)
    results["us_per_call"] = us
    (out / "host_probe.json").write_text(json.dumps(results, indent=1))
    prof = ["# autofuse", profile(lambda: af(*args), a.calls), "# inductor",
            profile(variants["inductor"], a.calls), "# autofuse_cudagraphs",
            profile(variants["autofuse_cudagraphs"], a.calls), "# inductor_cudagraphs",
            profile(variants["inductor_cudagraphs"], a.calls)]
    (out / "host_profile.txt").write_text("\n".join(prof))
    print(json.dumps(results["launchers"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
