"""The kernel tuner's choices (candidates, the predictor's top-k, the best-first refine) replayed on
the CPU for the seed 16384x4096 and rmsnorm default kernels, with each "measurement" looked up in
what the GPU measured for that config: call 1's config probe first, else session 17 call 5's tuning
DB (same kernel, scaled by the median ratio over the configs both have), else +10% (unmeasured: a
config the probe and the DB never timed is taken to be slow). Says whether a search setting would
reach max-autotune's config, and after how many measurements.

    python benchmarks/results/2026-11-30-h200-s18/scratch/search_sim.py > .../search_sim.txt
"""
from __future__ import annotations

import json
import random
import math
import sqlite3
import statistics
import sys
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[3]))

import autofuse.search.kernels as K  # noqa: E402
from autofuse.capture.trace import trace_aten  # noqa: E402
from autofuse.codegen.config import LaunchConfig  # noqa: E402
from autofuse.compiler import compile_graph  # noqa: E402
from autofuse.measure.timing import Timing  # noqa: E402
from autofuse.options import CompileOptions  # noqa: E402
from autofuse.plan.space import CONFIG_RANGES  # noqa: E402
from autofuse.runtime.program import KernelLaunch  # noqa: E402
from autofuse.schedule.heuristics import Heuristics  # noqa: E402
from autofuse.search.evaluate import PlanEvaluator  # noqa: E402
from benchmarks.cases import CASES  # noqa: E402
from costmodel.predict import load_predictor  # noqa: E402

PROBE = HERE.parent / "call1/probe/config_probe.json"
DB5 = HERE.parents[1] / "2026-11-30-h200-s17/call5/bench/tuning.db"
DEV = "cuda:NVIDIA H200:sm90"
TRAITS = {"name": "NVIDIA H200", "sm_count": 132, "cc": [9, 0], "copy_bw": 4.25e12}


def key(cfg: dict) -> str:
    return json.dumps(cfg, sort_keys=True)


def landscape(case: str, graph_prefix: str, nodes: list[str]) -> dict[str, float]:
    probe = {key(r["config"]): r["us"] for r in json.loads(PROBE.read_text())["cases"][case]["rows"]
             if "config" in r and "us" in r}
    db = {}
    for f, s in sqlite3.connect(DB5).execute("select features, stats from kernel_measurements"):
        f, s = json.loads(f), json.loads(s)
        if f["graph"].startswith(graph_prefix) and f["nodes"] == nodes and s.get("median_us") \
                and len(f["signature"]) == 7 - (case != "seed_f32_16384x4096") * 2:
            db[key(f["config"])] = s["median_us"]
    common = [probe[k] / db[k] for k in probe if k in db]
    scale = statistics.median(common) if common else 1.0
    out = {k: v * scale for k, v in db.items()}
    out.update(probe)
    print(f"{case}: {len(probe)} probe configs, {len(db)} DB configs ({len(common)} in both, scale {scale:.4f})")
    return out


class Lookup:
    """A "benchmarker" answering from the landscape, each answer times exp(noise * z)."""
    measures = True

    def __init__(self, table: dict[str, float], slow: float, noise: float, seed: int) -> None:
        self.table, self.slow, self.noise, self.rng, self.log = table, slow, noise, random.Random(seed), []

    def us(self, cfg: LaunchConfig) -> float:
        v = self.table.get(key(cfg.to_json()))
        self.log.append((cfg, v))
        return (v if v is not None else self.slow) * math.exp(self.noise * self.rng.gauss(0, 1))


def build(case_name: str):
    """The case's default plan built on the CPU with the GPU's default config on its row reduction:
    (builder, env, group index, default config)."""
    case = next(c for c in CASES if c.name == case_name)
    fn, args = case.build("cpu", 1.0)
    gm = trace_aten(fn, args)
    art = compile_graph(gm, list(args), CompileOptions(strict=True, use_db=False))
    # the GPU's default config (the CPU's is the interpreter's): one row, 2048, 8 warps, cache hints
    gpu_default = Heuristics().launch_config("reduction", 1 << 20, 4096, False, hints=True)
    plan = replace(art.plan, kernels=tuple(replace(kp, config=gpu_default) if i.kind == "reduction" else kp
                                           for kp, i in zip(art.plan.kernels, art.kernels)))
    tuner = K.KernelTuner(Lookup({}, 0, 0, 0), None, None, DEV, TRAITS, "g")
    builder, arts, env, _ = PlanEvaluator(gm, args, tuner)._build(plan)
    launches = [s for s in arts.program.steps if isinstance(s, KernelLaunch)]
    infos = [k for k in arts.kernels if k.kind != "fallback"]
    gis = [gi for gi, g in enumerate(builder.groups) if not g.is_extern]
    gi, info = next((gi, i) for gi, l, i in zip(gis, launches, infos) if l.is_reduction)
    assert info.config == gpu_default, info.config
    return builder, env, gi, gpu_default


def with_stages(neighbours):
    """The neighbour moves before session 18: a looped config's num_stages one up and one down too."""
    def moves(cfg, group):
        out = neighbours(cfg, group)
        if not cfg.persistent and cfg.RBLOCK < K.next_pow2(group.rnumel):
            out += [c for c in (replace(cfg, num_stages=cfg.num_stages + 1), replace(cfg, num_stages=max(cfg.num_stages - 1, 1)))
                    if c != cfg and c not in out]
        return out
    return moves


def simulate(built, table: dict[str, float], predictor, settings: K.TunerSettings, noise: float, seed: int,
             stages: bool = False):
    """One replay: (configs measured in order with their landscape times, the candidates). stages:
    the search space before session 18 (looped num_stages 1-3 among the candidates and moves)."""
    builder, env, gi, default = built
    group = builder.groups[gi]
    lookup = Lookup(table, 1.10 * max(table.values()), noise, seed)
    tuner = K.KernelTuner(lookup, predictor, None, DEV, TRAITS, "g", replace(settings, seed=seed))
    ranges = dict(CONFIG_RANGES)
    if stages:
        ranges["looped"] = {**ranges["looped"], "num_stages": (1, 2, 3)}
    configs = K.candidate_configs(group, default, False, ranges, settings.max_candidates)
    saved = K.neighbour_configs
    if stages:
        K.neighbour_configs = with_stages(saved)
    variants = {}

    def variant(cfg):
        if cfg not in variants:
            lv, iv = builder.variant(gi, cfg)
            variants[cfg] = (lv, iv, K.kernel_record(iv, lv, env, "g", "", TRAITS, []))
        return variants[cfg]
    for c in configs:
        variant(c)
    chosen = tuner._select(configs, default, variants, K.next_pow2(group.rnumel))
    results = {}

    def measure(cfg: LaunchConfig) -> None:
        results[cfg] = (lookup.us(cfg), 0.0, None, variant(cfg)[2])
    for c in chosen:
        measure(c)
    try:
        tuner._refine(group, default, results, variants, measure)
    finally:
        K.neighbour_configs = saved
    best = K.best_config({c: r[0] for c, r in results.items()}, default)
    return [(c, table.get(key(c.to_json()))) for c in results], best, configs


if __name__ == "__main__":
    CASES_ = [("seed_f32_16384x4096", "a0fce0", ["mean", "output"], 130.37),
              ("rmsnorm_bf16_32768x4096", "fdecb6", ["mean", "output"], 129.12)]
    predictor = load_predictor(None, DEV)
    SEEDS = range(20)
    for name, prefix, nodes, ma in CASES_:
        built = build(name)
        table = landscape(name, prefix, nodes)
        for stages, refine in ((True, 16), (True, 32), (False, 16), (False, 24), (False, 32)):
            for noise in (0.0, 0.002):
                found, picked, n = [], [], 0
                for seed in SEEDS if noise else [0]:
                    order, best, configs = simulate(built, table, predictor, K.TunerSettings(refine=refine), noise, seed,
                                                    stages)
                    hit = next((i for i, (_, us) in enumerate(order, 1) if us is not None and us <= ma * 1.0005), None)
                    found.append(hit)
                    picked.append(table.get(key(best.to_json()), math.inf))
                    n = len(order)
                runs = len(found)
                print(f"  {'num_stages 1-3 (before)' if stages else 'num_stages 1 (now)'}, refine {refine:2d} noise {noise:.3f}: {n} measured; max-autotune's time reached in "
                      f"{sum(h is not None for h in found)}/{runs} runs (at measurement {sorted(h for h in found if h)}); "
                      f"picked config's landscape time: median {statistics.median(picked):.2f}, "
                      f"worst {max(picked):.2f} (max-autotune {ma:.2f})")
