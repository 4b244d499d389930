"""Persistent row reductions (rmsnorm, layernorm, the seed example at 16384×4096) and SwiGLU's
pointwise kernel under many launch configs, against Inductor's max-autotune in the same process. Why: in session 13's first run the
tuned plans of these cases reached 94-95% of copy bandwidth while max-autotune reached 96-97% of it
(rmsnorm 133.9 µs against 130.0 µs; SwiGLU 250.7 µs against 249.4 µs): is a config outside what the search tried faster, or does
Inductor's kernel differ in a way no config of ours expresses (its weight loads carry
`eviction_policy='evict_last'`; ours carried no cache hint)?

    python3 -m benchmarks.rows_probe [--out DIR] [--reps 50] [--cases NAME ...]

For each case: eager, Inductor default and max-autotune-no-cudagraphs (the configs its autotuner
picked and its generated source are written to DIR), then autofuse's default plan with every
config of the grid on its reduction (or pointwise) kernels, then the fastest three again with
`cache_hints` (codegen/cache_hints.py: evict_last on the weights, as Inductor's persistent kernels
have it), and looped configs of one row per program with and without them (Inductor's max-autotune
layernorm is a looped kernel whose first read of the row is evict_last, its second evict_first),
including one-step rows (RBLOCK covers the row, read twice: max-autotune's rmsnorm form, XBLOCK 1-2). Every variant is checked against eager before
it is timed. Prints one table per case (fastest first) and writes DIR/rows_probe.json.
"""
from __future__ import annotations

import argparse
import gc
import itertools
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from .cases import CASES, nbytes
from .colsum_probe import plan_with
from .run import close, copy_bandwidth, time_fn

DEFAULT_CASES = ("rmsnorm_bf16_32768x4096", "layernorm_bf16_32768x4096", "seed_f32_16384x4096",
                 "swiglu_bf16_16384x11008")
POINTWISE = ("swiglu_bf16_16384x11008",)   # cases whose kernels are pointwise


def inductor_picks(seen: set[int] = frozenset()) -> list[dict[str, Any]]:
    """The configs Inductor's autotuners settled on, by kernel name (the launchers left after
    benchmarking), leaving out the autotuners whose id is in `seen`."""
    try:
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    except ImportError:
        return []
    out = []
    for obj in gc.get_objects():
        try:   # gc also hands out dead weak proxies, which raise on any use
            if not isinstance(obj, CachingAutotuner) or id(obj) in seen:
                continue
            if len(obj.launchers or []) == 1 and getattr(obj.launchers[0], "config", None) is not None:
                cfg = obj.launchers[0].config
                out.append({"id": id(obj), "kernel": obj.fn.__name__, "kwargs": dict(cfg.kwargs),
                            "num_warps": cfg.num_warps, "num_stages": cfg.num_stages})
        except (ReferenceError, AttributeError):
            continue
    return out


def as_list(v: Any) -> list[Any]:
    """Eager and Inductor return the function's value, compile_traced a list of outputs."""
    return list(v) if isinstance(v, (list, tuple)) else [v]


def grid(kind: str, rnumel: int) -> Iterator[Any]:
    """Persistent configs of a row reduction of `rnumel`, or pointwise configs; 4-64 elements a thread."""
    from autofuse.codegen.config import LaunchConfig
    if kind == "pointwise":
        for xb, w in itertools.product((512, 1024, 2048, 4096), (1, 2, 4, 8)):
            if 4 <= xb // (32 * w) <= 64:
                yield LaunchConfig(XBLOCK=xb, num_warps=w)
        return
    for xb, w, early in itertools.product((1, 2, 4, 8), (4, 8, 16, 32), (False, True)):
        per_thread = xb * rnumel // (32 * w)
        if 4 <= per_thread <= 64:
            yield LaunchConfig(XBLOCK=xb, RBLOCK=rnumel, num_warps=w, num_stages=1, persistent=True, early_loads=early)


def probe_case(case: Any, reps: int, bw: float, out: Path) -> list[dict[str, Any]]:
    from autofuse import CompileOptions
    from autofuse.capture.trace import compile_traced
    fn, args = case.build("cuda", 1.0)
    kind = "pointwise" if case.name in POINTWISE else "reduction"
    expected = fn(*args)
    min_bytes = nbytes(args) + nbytes(expected)
    rows: list[dict[str, Any]] = []

    def timed(name: str, make: Callable[[], Callable[..., Any]], **extra: Any) -> None:
        try:
            f = make()
            if not close(as_list(f(*args)), as_list(expected)):
                raise AssertionError("differs from eager")
            ms = time_fn(f, [args], reps)
            rows.append({"variant": name, "us": ms * 1e3, "bw_share": min_bytes / (ms * 1e-3) / bw, **extra})
        except Exception as e:  # a config that fails to compile, launch or check is reported, not fatal
            rows.append({"variant": name, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"})

    def ours(cfg: Any) -> Callable[..., Any]:
        plan = plan_with(fn, args, cfg, kind)
        return compile_traced(fn, list(args), CompileOptions(strict=True, use_db=False, plan=plan))

    timed("eager", lambda: fn)
    timed("inductor", lambda: torch.compile(fn))
    torch._dynamo.reset()
    gc.collect()
    from torch._inductor.utils import run_and_get_code
    seen = {p["id"] for p in inductor_picks()}
    ma = torch.compile(fn, mode="max-autotune-no-cudagraphs")
    _, code = run_and_get_code(ma, *args)
    (out / f"{case.name}.max_autotune.py").write_text("\n\n# ----\n\n".join(code))
    timed("inductor max-autotune", lambda: ma, picks=inductor_picks(seen))
    for cfg in grid(kind, args[0].shape[-1]):
        timed(str(cfg), lambda cfg=cfg: ours(cfg), config=cfg.to_json())
    if kind == "pointwise":
        return rows
    from autofuse.codegen.config import LaunchConfig
    best = sorted((r for r in rows if "config" in r and "error" not in r), key=lambda r: r["us"])[:3]
    looped = [LaunchConfig(XBLOCK=1, RBLOCK=rb, num_warps=w, num_stages=s, persistent=False)
              for rb, w, s in itertools.product((1024, 2048), (4, 8, 16), (1, 2))]
    rfull = 1 << (args[0].shape[-1] - 1).bit_length()   # one-step rows: max-autotune's rmsnorm form
    looped += [LaunchConfig(XBLOCK=xb, RBLOCK=rfull, num_warps=w, num_stages=1, persistent=False)
               for xb, w in itertools.product((1, 2), (8, 16))]
    for cfg in [LaunchConfig(**r["config"]) for r in best] + looped:
        for hints in (False, True) if not cfg.persistent else (True,):
            c = replace(cfg, cache_hints=hints)
            timed(str(c), lambda c=c: ours(c), config=c.to_json())
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="benchmarks/results/rows_probe")
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--cases", nargs="*", default=list(DEFAULT_CASES))
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    bw = copy_bandwidth("cuda", a.reps)
    res: dict[str, Any] = {"copy_bw": bw, "cases": {}}
    by_name = {c.name: c for c in CASES}
    for case in (by_name[n] for n in a.cases):   # in the order given: a run cut short keeps the first
        res["cases"][case.name] = probe_case(case, a.reps, bw, out)
        (out / "rows_probe.json").write_text(json.dumps(res, indent=1))
        torch._dynamo.reset()
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s")
    for name, rows in res["cases"].items():
        ok = sorted((r for r in rows if "error" not in r), key=lambda r: r["us"])
        print(f"\n{name}: {len(ok)} variants timed, {len(rows) - len(ok)} failed")
        print("| variant | µs | % copy BW |\n|---|---|---|")
        for r in ok:
            print(f"| {r['variant']} | {r['us']:.1f} | {r['bw_share'] * 100:.1f}% |")
        for r in rows:
            if "picks" in r:
                print("max-autotune picked:", r["picks"])
            if "error" in r:
                print(f"failed: {r['variant']}: {r['error']}")


if __name__ == "__main__":
    main()
