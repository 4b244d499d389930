"""A small synthetic measurement set for tests: real kernel sources, a made-up (but config-aware) clock.

Kernels come from compiling a few small programs (pointwise chains, softmax, norms, reductions;
f32 and bf16; several shapes) on the CPU, each in its default form and — for reductions — its
looped form; each kernel gets a dozen launch configs. Times come from `synthetic_time_us`, a
roofline with penalties for idle lanes, register pressure, too few warps in flight, wave tails
and masked-off reduction lanes, plus a compute term and 2% seeded noise — so a model has something
config-dependent to learn, and a perfect score is possible but not trivial.

    python -m costmodel.synth --out tests/data/costmodel_small.jsonl.gz
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import itertools
import json
import math
import random
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from .features import OP_WEIGHTS, kernel_features

H200 = {"name": "NVIDIA H200", "sm_count": 132, "cc": [9, 0], "copy_bw": 4.27e12}
MAX_BLOCK_ELEMS = 1 << 20  # Triton's largest tensor: bigger blocks fail to compile
_DTYPES = {"float32": "fp32", "bfloat16": "bf16"}


def _programs() -> list[tuple[str, Callable[..., Any], int]]:
    """(name, function of one [N, M] tensor (and a [M] vector when arity 2), arity)."""
    import torch

    def gelu(x): return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
    def bias_relu(x, b): return torch.relu(x * 1.5 + b)
    def silu(x): return x * torch.sigmoid(x)
    def softmax(x): return torch.softmax(x, -1)
    def layernorm(x, b): return torch.nn.functional.layer_norm(x, (x.shape[-1],)) * b
    def rowsum(x): return x.sum(-1)
    def rowmax(x): return x.amax(-1)
    def rmsnorm(x): return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)
    def softplus(x): return torch.log1p(torch.exp(x))
    return [("gelu", gelu, 1), ("bias_relu", bias_relu, 2), ("silu", silu, 1), ("softmax", softmax, 1),
            ("layernorm", layernorm, 2), ("rowsum", rowsum, 1), ("rowmax", rowmax, 1), ("rmsnorm", rmsnorm, 1),
            ("softplus", softplus, 1)]


def _sha(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _param_names(source: str) -> list[str]:
    head = source.split("def KERNEL(", 1)[1].split(")", 1)[0]
    return [p.split(":")[0].strip() for p in head.split(",") if "constexpr" not in p]


def _kernels(fn: Callable[..., Any], arity: int, shape: tuple[int, int], dtype: str, looped: bool) -> list[Any]:
    """KernelInfos of the program compiled on the CPU (reductions looped if asked)."""
    import torch

    from autofuse import CompileOptions
    from autofuse.capture.trace import trace_aten
    from autofuse.codegen.config import LaunchConfig
    from autofuse.compiler import compile_graph
    from autofuse.schedule.heuristics import Heuristics

    class LoopedReductions(Heuristics):
        def launch_config(self, kind, numel, rnumel, interpret, *args, **kw):  # noqa: ANN001
            if kind == "pointwise":
                return super().launch_config(kind, numel, rnumel, interpret, *args, **kw)
            return LaunchConfig(XBLOCK=1, RBLOCK=256, num_warps=4, persistent=False)

    dt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(0)
    args = [torch.randn(shape, generator=g).to(dt)] + ([torch.randn(shape[1], generator=g).to(dt)] if arity == 2 else [])
    gm = trace_aten(fn, args)
    options = CompileOptions(use_db=False, strict=True, **({"heuristics": LoopedReductions()} if looped else {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [k for k in compile_graph(gm, args, options).kernels if k.kind != "fallback"]


def _configs(kind: str, persistent: bool, numel: int, rnumel: int, rng: random.Random, n: int) -> list[dict]:
    rfull = 1 << max(0, math.ceil(math.log2(max(rnumel, 1))))
    if kind == "pointwise":
        grid = itertools.product((128, 256, 512, 1024, 2048, 4096), (1,), (2, 4, 8))
    elif persistent:
        grid = itertools.product((1, 2, 4, 8, 16, 64), (rfull,), (2, 4, 8, 16))
    else:
        grid = itertools.product((1, 2, 4), (256, 512, 1024, 2048), (4, 8))
    # the tuner's filter: neither idle threads nor more than 128 elements per thread
    out = [{"XBLOCK": x, "RBLOCK": r, "num_warps": w, "num_stages": 1, "persistent": persistent, "split": 1}
           for x, r, w in grid if x <= max(numel, 1) * 2 and w * 8 <= x * r <= w * 32 * 128]
    return sorted(rng.sample(out, min(n, len(out))), key=lambda c: json.dumps(c, sort_keys=True))


def synthetic_time_us(record: dict, noise: float = 0.02) -> float:
    """A made-up kernel time (µs) that depends on bytes, op mix and launch config (module note)."""
    f = kernel_features(record, compile=False)
    ept, warps, grid, sms = f["elems_per_thread"], f["num_warps"], f["grid"], f["sm_count"]
    eff = 0.92
    if ept < 1:
        eff *= max(ept, 0.05) ** 0.5                  # idle lanes
    if ept > 16:
        eff /= 1 + 0.25 * math.log2(ept / 16)          # register pressure, spills
    eff *= min(1.0, grid * warps / (sms * 24)) ** 0.6  # too few warps in flight to saturate HBM
    waves = f["waves_nominal"]
    if waves > 1:
        eff *= (waves / math.ceil(waves)) ** 0.3       # partial last wave
    eff *= f["r_util"] ** 0.5 * f["x_util"] ** 0.3     # masked-off lanes
    mem_us = (f["bytes_read"] + f["bytes_written"]) / (f["copy_bw"] * eff) * 1e6
    ops = sum(w * f[k] for k, w in OP_WEIGHTS.items())
    compute_us = ops * f["numel"] * f["rnumel"] / 4e13 * 1e6 / min(1.0, grid * warps / (sms * 8))
    sync_us = 0.15 * f["reductions"] * math.log2(warps + 1) * max(1.0, waves)
    t = 2.0 + max(mem_us, compute_us) + 0.25 * min(mem_us, compute_us) + sync_us
    seed = int(_sha(record["source"], record["config"], record["numel"])[:12], 16)
    return t * math.exp(random.Random(seed).gauss(0.0, noise))


def _measurement(rec: dict, device: str) -> dict:
    cfg = rec["config"]
    key = _sha(rec["source"], cfg, rec["numel"], rec["rnumel"], rec["signature"])[:32]
    block = cfg["XBLOCK"] * (cfg["RBLOCK"] if rec["kind"] == "reduction" else 1)
    if block > MAX_BLOCK_ELEMS:
        stats = {"median_us": None, "p10_us": None, "p90_us": None, "min_us": None, "reps": 0, "measured": False,
                 "error": f"compile: block of {block} elements exceeds Triton's maximum tensor numel"}
    else:
        t = synthetic_time_us(rec)
        stats = {"median_us": t, "p10_us": t * 0.985, "p90_us": t * 1.02, "min_us": t * 0.98, "reps": 100,
                 "error": None, "measured": True}
    return {"kernel_key": key, "device": device, "features": rec, "stats": stats}


def generate(n_graphs: int = 18, configs_per_kernel: int = 12, seed: int = 0) -> Iterator[dict]:
    """Synthetic measurements (dicts shaped like `TuningDB.measurements()` rows, without `created`)."""
    rng = random.Random(seed)
    seen: set[str] = set()
    shapes = [(256, 1024), (64, 4096), (2048, 4096), (8192, 1024), (16384, 512), (1024, 8192), (32768, 256),
              (4096, 2048)]
    combos = [(p, s, d) for p in _programs() for s in shapes for d in _DTYPES]
    for (name, fn, arity), shape, dtype in rng.sample(combos, min(n_graphs, len(combos))):
        graph = _sha("synth", name, shape, dtype)
        default = _kernels(fn, arity, shape, dtype, looped=False)
        looped = _kernels(fn, arity, shape, dtype, looped=True) if any(k.kind == "reduction" for k in default) else []
        variants = [(i, k) for i, k in enumerate(default)] + [(i, k) for i, k in enumerate(looped) if k.kind == "reduction"]
        for index, info in variants:
            src = info.anonymous_source()
            sig = {p: ("*" + _DTYPES[dtype] if "ptr" in p else "i32") for p in _param_names(src)}
            persistent = info.kind == "pointwise" or bool(info.config.persistent)
            for cfg in _configs(info.kind, persistent, info.numel, info.rnumel, rng, configs_per_kernel):
                rec = {"schema": 1, "graph": graph, "group": _sha(graph, index)[:32], "kind": info.kind,
                       "numel": info.numel, "rnumel": info.rnumel, "config": cfg, "bytes_read": info.bytes_read,
                       "bytes_written": info.bytes_written, "signature": sig, "kernel_fn": "KERNEL", "source": src,
                       "device": H200}
                m = _measurement(rec, H200["name"])
                if m["kernel_key"] not in seen:  # a default that is already looped comes twice
                    seen.add(m["kernel_key"])
                    yield m


def write_jsonl_gz(rows: Sequence[dict] | Iterator[dict], path: str | Path) -> int:
    n = 0
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=9) as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True) + "\n")
            n += 1
    return n


def read_jsonl_gz(path: str | Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--graphs", type=int, default=18)
    ap.add_argument("--configs", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    n = write_jsonl_gz(generate(a.graphs, a.configs, a.seed), a.out)
    print(f"wrote {n} synthetic measurements to {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
