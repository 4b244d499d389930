"""Run the benchmark suite in one process on one GPU: eager, torch.compile (default and
max-autotune-no-cudagraphs), autofuse's inductor plan, and autofuse's tuned plan.

    python3 -m benchmarks.run [--cases NAME ...] [--out benchmarks/results] [--reps 50]
                              [--rounds 5] [--tune-trials 12] [--tune-budget 60] [--db FILE]

With --tune-trials > 0 each case is first tuned (`autofuse.tune`, plans stored in --db, default
OUT/tuning.db); "autofuse_tuned" is then `autofuse.compile` reading the stored plan.

Writes results.json, results.md and results.png: median time (CUDA events, inputs rotated so the
L2 cache does not flatter small cases; the variants take turns over --rounds rounds of --reps
calls), speedup over Inductor default, and the share of the copy bandwidth measured in the same
run on each case's minimum bytes (inputs read once, outputs written once). Every variant is checked against eager before it is timed.
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

from autofuse.measure.timing import copy_bandwidth, event_samples_ms, l2_cache_bytes, rotated
from autofuse.measure.verify import compare

from .cases import CASES, nbytes


def input_set_count(min_bytes: int, most: int) -> int:
    """How many input sets to rotate through so that a rep's inputs have left the L2 since their
    last use (three L2 sizes of inputs and outputs), at most `most`."""
    return max(1, min(most, -(-3 * l2_cache_bytes() // max(min_bytes, 1))))


def time_fn(fn: Callable[..., Any], input_sets: list[tuple], reps: int) -> float:
    """Median milliseconds of fn over reps (`time_samples`)."""
    return statistics.median(time_samples(fn, input_sets, reps))


QUEUE_AHEAD_CYCLES = 40_000_000   # about 20 ms of GPU clock: time for the host to queue every rep


def time_samples(fn: Callable[..., Any], input_sets: list[tuple], reps: int) -> list[float]:
    """Milliseconds of each of reps calls of fn, rotating through input sets, after warm-up. Calls
    are queued back to back (events around each, one synchronize at the end), behind a GPU sleep
    (`QUEUE_AHEAD_CYCLES`) during which the host queues them all: each sample is the GPU's time for one
    call, whatever the host's speed. Why: on a slow host a 67 µs column sum
    with 56-80 µs of host time per call read 100-123 µs without it, and the seed 16384 case 130-164
    µs across rounds. Host time is measured on its own (`host_us`, `host_overhead_us`)."""
    for args in input_sets[:2]:
        fn(*args)
    torch.cuda.synchronize()
    return event_samples_ms(lambda i: fn(*input_sets[i % len(input_sets)]), reps,
                            queue_ahead_cycles=QUEUE_AHEAD_CYCLES)


def time_interleaved(fns: dict[str, Callable[..., Any]], input_sets: list[tuple], reps: int,
                     rounds: int) -> dict[str, list[float]]:
    """Samples (ms) of each fn over `rounds` rounds of reps calls, the fns taking turns within each
    round: drift of the clocks or of the host (the seed 1024² case is host-bound) hits every
    variant alike instead of whichever ran during it. Each round starts one variant later than the
    one before, so no variant always runs right after the same neighbour (whose L2 contents and
    clock state it inherits) or always first."""
    out: dict[str, list[float]] = {n: [] for n in fns}
    names = list(fns)
    for r in range(rounds):
        for n in rotated(names, r):
            out[n] += time_samples(fns[n], input_sets, reps)
    return out


def host_overhead_us(fn: Callable[..., Any], args: tuple, calls: int = 200) -> float:
    """Wall-clock microseconds per call of back-to-back calls, until the GPU is done (host overhead
    once the GPU is idle-bound: the seed 1024² case)."""
    return _per_call_us(fn, args, calls, warmup=5, until_gpu_done=True)


def host_us(fn: Callable[..., Any], args: tuple, calls: int = 50) -> float:
    """Host microseconds per call, back to back, read before the final synchronize: what the
    Python side costs while the GPU queue is not full (calls × launches stays far below its depth).
    A variant whose host time reaches its GPU time is host-bound in time_fn's loop."""
    return _per_call_us(fn, args, calls, warmup=3, until_gpu_done=False)


def _per_call_us(fn: Callable[..., Any], args: tuple, calls: int, warmup: int, until_gpu_done: bool) -> float:
    for _ in range(warmup):
        fn(*args)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    if until_gpu_done:
        torch.cuda.synchronize()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


HOST_VARIANTS = ("inductor", "autofuse_inductor_plan", "autofuse_tuned")


def gpu_profile(call: Callable[[], Any], calls: int, top: int = 0) -> dict[str, Any]:
    """GPU milliseconds per call (the profiler's sum of kernel, copy and fill times) and GPU
    operations per call; with `top`, also the `top` GPU operations with the most time per call
    (name, microseconds per call, launches per call), to see where two variants differ."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    # a user annotation (the optimizer's `Optimizer.step#AdamW.step`) spans kernels on the GPU's
    # timeline as well: counted, it would add the optimizer's kernels a second time
    gpu = [e for e in prof.events() if e.device_type == DeviceType.CUDA and not getattr(e, "is_user_annotation", False)]
    out: dict[str, Any] = {"gpu_ms": sum(e.time_range.elapsed_us() for e in gpu) / calls / 1e3,
                           "kernels_per_call": len(gpu) / calls}
    if top:
        by_name: dict[str, list[float]] = {}
        for e in gpu:
            by_name.setdefault(e.name, []).append(e.time_range.elapsed_us())
        ranked = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:top]
        out["gpu_ops"] = [f"{sum(ts) / calls:9.1f} us {len(ts) / calls:5.1f}x  {name[:120]}" for name, ts in ranked]
    return out


def suite_tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) of the suite's check against eager: its cases reduce rows of thousands of elements."""
    return (3e-2, 3e-2) if dtype in (torch.bfloat16, torch.float16) else (1e-3, 1e-3)


NAMES = ["eager", "inductor", "inductor_max_autotune", "autofuse_inductor_plan", "autofuse_tuned"]


def variants(fn: Callable[..., Any], db: str | None = None) -> dict[str, Callable[..., Any]]:
    import autofuse
    torch._dynamo.reset()
    out = {
        "eager": fn,
        "inductor": torch.compile(fn),
        "inductor_max_autotune": torch.compile(fn, mode="max-autotune-no-cudagraphs"),
        "autofuse_inductor_plan": autofuse.compile(fn, strategy="inductor"),
    }
    if db is not None:
        out["autofuse_tuned"] = autofuse.compile(fn, db=db, on_miss="error")
    return out


def tune_case(fn: Callable[..., Any], args: tuple, db: str, trials: int, budget: float) -> dict[str, Any]:
    """Tune the case's graphs (plans stored in db); what the search did, for the results file."""
    import autofuse
    t0 = time.perf_counter()
    res = autofuse.tune(fn, args, db=db, trials=trials, time_budget=budget, progress=False, compare_torch_compile=False)
    print(res.report(), flush=True)
    return {"seconds": time.perf_counter() - t0, **res.to_json()}


def run_case(case, reps: int, bw: float, tune: tuple[str, int, float] | None = None, rounds: int = 5) -> dict[str, Any]:
    fn, args = case.build("cuda", 1.0)
    out = fn(*args)
    min_bytes = nbytes(args) + nbytes(out)
    sets = input_set_count(min_bytes, 8)
    input_sets = [args] + [case.build("cuda", 1.0)[1] for _ in range(sets - 1)] if sets > 1 else [args]
    row: dict[str, Any] = {"case": case.name, "min_bytes": min_bytes, "input_sets": len(input_sets), "variants": {}}
    db = None
    if tune is not None:
        db = tune[0]
        try:
            row["tune"] = tune_case(fn, args, *tune)
        except Exception as e:  # noqa: BLE001 - a failed tune is reported; the other variants still run
            row["tune"] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"}
            db = None
    fns = variants(fn, db)
    ok: dict[str, Callable[..., Any]] = {}
    for name, f in fns.items():
        entry: dict[str, Any] = {}
        try:
            entry["correct"] = compare(f(*args), out, tolerance=suite_tolerance) is None
            if entry["correct"]:
                ok[name] = f
        except Exception as e:  # noqa: BLE001 - a failing variant is reported, the run goes on
            entry["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        row["variants"][name] = entry
    try:
        samples = time_interleaved(ok, input_sets, reps, rounds)
    except Exception as e:  # noqa: BLE001 - one variant failing while timed: time the others alone
        print(f"  interleaved timing failed ({type(e).__name__}: {e}); timing each variant alone", flush=True)
        samples = {}
        for name, f in ok.items():
            try:
                samples[name] = time_interleaved({name: f}, input_sets, reps, rounds)[name]
            except Exception as e2:  # noqa: BLE001
                row["variants"][name]["error"] = f"{type(e2).__name__}: {str(e2).splitlines()[0][:200]}"
    for name, s in samples.items():
        entry = row["variants"][name]
        ms = statistics.median(s)
        entry.update(ms=ms, bw_share=min_bytes / (ms * 1e-3) / bw, samples=len(s),
                     round_ms=[statistics.median(s[i * reps:(i + 1) * reps]) for i in range(rounds)])
        if name in HOST_VARIANTS:
            entry["host_us"] = host_us(ok[name], args)
    for name, entry in row["variants"].items():
        print(f"  {case.name:38s} {name:24s} {entry}", flush=True)
    ind = row["variants"].get("inductor", {}).get("ms")
    for entry in row["variants"].values():
        if ind and entry.get("ms"):
            entry["speedup_vs_inductor"] = ind / entry["ms"]
    if case.name.startswith("seed_f32_1024"):
        import autofuse
        hosts = variants(fn, db)
        hosts["inductor_cudagraphs"] = torch.compile(fn, mode="reduce-overhead")
        hosts["autofuse_cudagraphs"] = autofuse.compile(fn, **({"db": db} if db else {"strategy": "inductor"}),
                                                        cudagraphs=True)
        row["host_overhead_us"] = host_overheads(hosts, args, rounds)
    return row


def host_overheads(fns: dict[str, Callable[..., Any]], args: tuple, rounds: int) -> dict[str, float]:
    """Median over `rounds` interleaved rounds of each variant's `host_overhead_us` (one reading per
    variant swings by 2x between runs on the device's host)."""
    runs: dict[str, list[float]] = {n: [] for n in fns}
    failed: set[str] = set()
    for _ in range(max(rounds, 1)):
        for n, f in fns.items():
            if n in failed:
                continue
            try:
                runs[n].append(host_overhead_us(f, args))
            except Exception as e:  # noqa: BLE001 - a variant that fails is left out, the others go on
                print(f"  host overhead of {n} failed: {type(e).__name__}: {e}", flush=True)
                failed.add(n)
    return {n: statistics.median(r) for n, r in runs.items() if r and n not in failed}


def markdown(results: dict[str, Any]) -> str:
    names = [n for n in NAMES if any(n in r["variants"] for r in results["cases"])]
    lines = [f"Device: {results['device']}; torch {results['torch']}, triton {results['triton']}; "
             f"{results['date']}; copy bandwidth {results['copy_bandwidth_TBps']:.2f} TB/s (measured in this run)."
             + (f" Median of {results['rounds']} interleaved rounds of {results['reps']} CUDA-event-timed calls per variant, queued behind a GPU sleep (GPU time, whatever the host)."
                if "rounds" in results else ""), "",
             "| case | MB | " + " | ".join(f"{n} ms (× ind, % bw)" for n in names) + " |",
             "|---|---|" + "---|" * len(names)]
    for row in results["cases"]:
        cells = []
        for n in names:
            e = row["variants"].get(n, {})
            if "ms" in e:
                cells.append(f"{e['ms']:.3f} ({e.get('speedup_vs_inductor', 0):.2f}×, {100 * e['bw_share']:.0f}%)")
            else:
                cells.append("wrong" if e.get("correct") is False else e.get("error", "—")[:40])
        lines.append(f"| {row['case']} | {row['min_bytes'] / 1e6:.0f} | " + " | ".join(cells) + " |")
    host = [row for row in results["cases"] if any("host_us" in e for e in row["variants"].values())]
    if host:
        lines += ["", "Host µs per call, back to back (a variant is host-bound in the timed loop when this "
                  "reaches its time above):", ""]
        lines.append("| case | " + " | ".join(HOST_VARIANTS) + " |")
        lines.append("|---|" + "---|" * len(HOST_VARIANTS))
        for row in host:
            cells = []
            for n in HOST_VARIANTS:
                e = row["variants"].get(n, {})
                bound = " (host-bound)" if "host_us" in e and e["host_us"] >= 1e3 * e["ms"] * 0.9 else ""
                cells.append(f"{e['host_us']:.1f}{bound}" if "host_us" in e else "—")
            lines.append(f"| {row['case']} | " + " | ".join(cells) + " |")
    for row in results["cases"]:
        if "host_overhead_us" in row:
            lines.append("")
            lines.append(f"Host time per call, {row['case']} (µs, back-to-back calls, median of interleaved rounds; "
                         "no CUDA graphs but in the *_cudagraphs variants): " +
                         ", ".join(f"{k} {v:.1f}" for k, v in row["host_overhead_us"].items()))
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [n for n in NAMES if any(n in r["variants"] for r in results["cases"])]
    cases = [r["case"] for r in results["cases"]]
    fig, ax = plt.subplots(figsize=(12, 5))
    w = 0.8 / len(names)
    for i, n in enumerate(names):
        vals = [100 * r["variants"].get(n, {}).get("bw_share", 0) for r in results["cases"]]
        ax.bar([c + i * w for c in range(len(cases))], vals, w, label=n)
    ax.set_xticks([c + 0.4 - w / 2 for c in range(len(cases))])
    ax.set_xticklabels(cases, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("% of measured copy bandwidth")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="*", default=None)
    p.add_argument("--out", default="benchmarks/results")
    p.add_argument("--reps", type=int, default=50, help="timed calls per variant per round")
    p.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (the median pools every round's reps)")
    p.add_argument("--tune-trials", type=int, default=12, help="trials per graph of each case's tune (0: no tuned column)")
    p.add_argument("--tune-budget", type=float, default=60.0, help="seconds of search per case")
    p.add_argument("--db", default=None, help="tuning DB for the tuned plans (default OUT/tuning.db)")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("benchmarks need a CUDA GPU", file=sys.stderr)
        return 2
    import triton
    bw = copy_bandwidth("cuda", reps=args.reps)
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    cases = [c for c in CASES if args.cases is None or c.name in args.cases]
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "python": platform.python_version(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
               "command": "python3 -m benchmarks.run " + " ".join(argv or sys.argv[1:]),
               "copy_bandwidth_TBps": bw / 1e12, "reps": args.reps, "rounds": args.rounds, "cases": []}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tune = None
    if args.tune_trials > 0:
        tune = (args.db or str(out / "tuning.db"), args.tune_trials, args.tune_budget)
    for case in cases:
        results["cases"].append(run_case(case, args.reps, bw, tune, args.rounds))
        torch.cuda.empty_cache()
        (out / "results.json").write_text(json.dumps(results, indent=1))  # partial results survive a timeout
    (out / "results.md").write_text(markdown(results))
    try:
        plot(results, out / "results.png")
    except Exception as e:  # noqa: BLE001
        print(f"no plot: {e}", file=sys.stderr)
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
