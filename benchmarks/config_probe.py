"""One row reduction's kernel (the default plan's) under a wide grid of looped and persistent
configs, at the configs Inductor's max-autotune picked for the same case, and next to both
Inductor modes, in rotating interleaved rounds (benchmarks.probe.CheckedVariants).

Why: after session 17 the seed example at 16384×4096 trailed max-autotune by 1% (130.9 against
129.4 µs) and rmsnorm by 0.2%, the tuner keeping our default config each time. The search measures
about 23 of the configs of a kernel; this probe measures many more of them on the same kernel, and
max-autotune's own pick, to say whether a config we can express matches or beats max-autotune
(then the search is what misses it) or none does (then the code differs).

    python3 -m benchmarks.config_probe [--out DIR] [--reps 50] [--rounds 7] [--cases NAME ...]

Every variant is checked against eager before it is timed. Prints one table per case (fastest
first), max-autotune's picks, and writes DIR/config_probe.json.
"""
from __future__ import annotations

import gc
import itertools
import json
from dataclasses import replace
from typing import Any, Iterator

import torch

from .cases import CASES
from .colsum_probe import plan_with
from .probe import CheckedVariants, parser, start
from .rows_probe import inductor_picks
from .store_probe import table

DEFAULT_CASES = ("seed_f32_16384x4096", "rmsnorm_bf16_32768x4096")


def grid(rnumel: int) -> Iterator[Any]:
    """Looped configs (XBLOCK 1-4, RBLOCK 512 to the whole row, 4-16 warps, 1-3 stages where there is
    a loop to pipeline) with cache hints, and persistent ones with and without; 4-64 elements a
    thread, as the search's filter allows."""
    from autofuse.codegen.config import LaunchConfig
    rfull = 1 << (rnumel - 1).bit_length()
    for xb, rb, w, s in itertools.product((1, 2, 4), (512, 1024, 2048, 4096), (4, 8, 16), (1, 2, 3)):
        if rb > rfull or (rb == rfull and s > 1) or not 4 <= xb * rb // (32 * w) <= 64:
            continue
        yield LaunchConfig(XBLOCK=xb, RBLOCK=rb, num_warps=w, num_stages=s, persistent=False, cache_hints=True)
    for xb, w, hints in itertools.product((1, 2), (4, 8, 16), (False, True)):
        if 4 <= xb * rfull // (32 * w) <= 64:
            yield LaunchConfig(XBLOCK=xb, RBLOCK=rfull, num_warps=w, num_stages=1, persistent=True, cache_hints=hints)


def as_ours(pick: dict[str, Any], rnumel: int) -> list[Any]:
    """Our configs for one of Inductor's picks: the same blocks, warps and stages, looped unless
    Inductor's kernel had no R0_BLOCK (a persistent reduction), with and without cache hints."""
    from autofuse.codegen.config import LaunchConfig
    rfull = 1 << (rnumel - 1).bit_length()
    kw = pick["kwargs"]
    if "XBLOCK" not in kw:
        return []
    persistent = "R0_BLOCK" not in kw and "RBLOCK" not in kw
    rb = rfull if persistent else min(kw.get("R0_BLOCK", kw.get("RBLOCK", rfull)), rfull)
    stages = 1 if persistent or rb == rfull else pick["num_stages"]
    base = LaunchConfig(XBLOCK=kw["XBLOCK"], RBLOCK=rb, num_warps=pick["num_warps"], num_stages=stages,
                        persistent=persistent)
    return [base, replace(base, cache_hints=True)]


def probe_case(case: Any, reps: int, rounds: int, bw: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from autofuse import CompileOptions
    from autofuse.capture.trace import compile_traced
    fn, args = case.build("cuda", 1.0)
    rnumel = args[0].shape[-1]
    variants = CheckedVariants(fn, args)
    torch._dynamo.reset()
    variants.add("inductor", lambda: torch.compile(fn))
    gc.collect()
    seen = {p["id"] for p in inductor_picks()}
    variants.add("inductor max-autotune", lambda: torch.compile(fn, mode="max-autotune-no-cudagraphs"))
    picks = inductor_picks(seen)
    variants.add("autofuse default", lambda: compile_traced(fn, list(args), CompileOptions(strict=True, use_db=False)))
    configs = {c: "max-autotune's pick" for p in picks for c in as_ours(p, rnumel)}
    configs.update({c: "grid" for c in grid(rnumel) if c not in configs})
    for cfg, origin in configs.items():
        opts = CompileOptions(strict=True, use_db=False, plan=plan_with(fn, args, cfg, "reduction"))
        variants.add(str(cfg), lambda o=opts: compile_traced(fn, list(args), o), config=cfg.to_json(), origin=origin)
    return variants.timed(reps, rounds, bw), picks


def main() -> None:
    a = parser(__doc__, "config_probe", 7, DEFAULT_CASES).parse_args()
    out, bw, result = start(a)
    by_name = {c.name: c for c in CASES}
    for case in (by_name[n] for n in a.cases):
        rows, picks = probe_case(case, a.reps, a.rounds, bw)
        result["cases"][case.name] = {"rows": rows, "max_autotune_picks": picks}
        (out / "config_probe.json").write_text(json.dumps(result, indent=1))
        print(f"\n## {case.name}\n\nmax-autotune picked: {picks}\n\n{table(rows)}", flush=True)


if __name__ == "__main__":
    main()
