"""Kernel features: one fixed-order vector of floats per kernel feature record (the tuner's contract).

Four sources: the record's sizes, bytes and launch config; the op mix of the kernel body
(`source_ops`); the sm_90 compile (`compiled`: registers, spills, shared memory, hence occupancy and
waves); the device traits. Anything unknown is NaN — a kernel that does not compile, a record
without a source, a device without a measured bandwidth — and the model tolerates NaN.

Note: the grid is ceil(numel / XBLOCK) * split; a looped reduction runs ceil(rnumel / split /
RBLOCK) iterations; "waves" are grid / (SMs x resident blocks per SM) — with the compiled
occupancy, and with the thread limit alone (`waves_nominal`, known without compiling).
The feature groups:
- Sizes, bytes and the launch config: numel, rnumel, bytes read and written, the byte roofline,
  XBLOCK, RBLOCK, warps, persistent / looped / split.
- `RELATIVE_NAMES`: the config in proportion to its kernel, since the search ranks configs of one
  kernel: the block's share of numel and rnumel, whether RBLOCK covers the row, threads per row,
  values each thread holds and for how many pointers (a register estimate), programs per SM, the
  last wave's fill, bytes per program and per thread.
- The config's on/off options (the option registry's `FLAG_OPTIONS`: online, cache_hints, early_loads, fast_tanh),
  1 or 0 (0 where absent).
- `num_stages` reads 1 for every kernel: only loops are pipelined, and over 1452 measured pairs of
  looped configs differing only in it the time ratio's median is 1.000 (p10-p90 0.995-1.005, the
  run-to-run noise), so the search does not offer it and such twins merge.
- The op mix (`source_ops`), each op weighted by its density: an op on a k-way split row's lanes
  counts 1/k per element, one on reduced values once per row (`elem_ops`, `row_ops`,
  `log_op_elements`, `op_intensity`); the prelude's fast exp2 / tanh, log2(e) multiply and
  NaN-propagating max count in their op classes.
- Access patterns: each load and store classed by how its address moves with the element index
  (`contig_accesses`, `strided_accesses`, `irregular_accesses`, `max_stride`).
- Compiled (optional): registers, spills, shared memory, occupancy and waves from the sm_90 compile.
- Device traits: SM count and copy bandwidth.
A stored model reads only its own columns; a model of an older schema reads changed columns with
their current meaning.
"""
from __future__ import annotations

import json
import math
import os
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Sequence

import numpy as np

from autofuse.codegen.options import FLAG_OPTIONS

from .compiled import CompiledStats, compiled_stats
from .occupancy import blocks_per_sm, nominal_blocks_per_sm
from .source_ops import COUNT_NAMES, OpCounts, count_ops

FEATURE_SCHEMA = 8  # the layout of the feature vector (module note); a model records the schema it was trained on
DEFAULT_SM_COUNT = 132
DEFAULT_COPY_BW = 4.27e12    # bytes/s (read + write), device-to-device copy measured on the H200
OP_WEIGHTS = {"arith": 1.0, "compare": 1.0, "select": 1.0, "cast": 1.0, "division": 4.0, "transcendental": 8.0}
COMPILED_NAMES = ("registers", "spill_store_bytes", "spill_load_bytes", "stack_bytes", "shared_bytes",
                  "blocks_per_sm", "occupancy", "waves_per_sm")

RELATIVE_NAMES = ("log_x_cover", "log_r_cover", "covers_r", "log_threads", "log_warps_per_row", "log_r_per_thread",
                  "log_elems_per_thread", "log_grid_per_sm", "wave_tail", "sm_fill", "log_bytes_per_program",
                  "log_bytes_per_thread", "log_r_iters", "stages_looped", "log_live_values", "wave_quantization")

FEATURE_NAMES: tuple[str, ...] = (
    "is_reduction", "persistent", "looped",
    "numel", "rnumel", "log_numel", "log_rnumel", "log_elements",
    "bytes_read", "bytes_written", "log_bytes_read", "log_bytes_written", "log_bytes", "bytes_per_element",
    "ideal_us", "log_ideal_us",
    *COUNT_NAMES, "elem_ops", "row_ops", "log_op_elements", "op_intensity",
    "ptr_args", "ptr16_args", "ptr64_args", "int64_sizes",
    "XBLOCK", "RBLOCK", "num_warps", "num_stages", "split", *FLAG_OPTIONS, "log_XBLOCK", "log_RBLOCK",
    "block_elems", "elems_per_thread", "grid", "log_grid", "r_iters", "x_util", "r_util", "waves_nominal",
    *COMPILED_NAMES,
    "sm_count", "copy_bw",
    *RELATIVE_NAMES,
)


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else (0.0 if x == 0 else float("nan"))


def _num(v: object, default: float = float("nan")) -> float:
    return float(v) if isinstance(v, (int, float)) else default


def _signature_traits(sig: dict | None) -> dict[str, float]:
    if not sig:
        return {"ptr_args": float("nan"), "ptr16_args": float("nan"), "ptr64_args": float("nan"),
                "int64_sizes": float("nan")}
    ptrs = [t for t in sig.values() if isinstance(t, str) and t.startswith("*")]
    return {"ptr_args": float(len(ptrs)),
            "ptr16_args": float(sum(t[1:] in ("fp16", "bf16", "i16", "u16") for t in ptrs)),
            "ptr64_args": float(sum(t[1:] in ("fp64", "i64", "u64") for t in ptrs)),
            "int64_sizes": float(any(t == "i64" for t in sig.values() if isinstance(t, str)))}


def _config_features(rec: dict, sm_count: float) -> dict[str, float]:
    cfg = rec.get("config") if isinstance(rec.get("config"), dict) else {}
    reduction = rec.get("kind") in ("reduction", "scan")  # a scan's config has a reduction's r loop
    numel, rnumel = max(_num(rec.get("numel"), 1.0), 1.0), max(_num(rec.get("rnumel"), 1.0), 1.0)
    # a 2-D tile (YBLOCK > 0, codegen/tiling.py) covers XBLOCK * YBLOCK elements of the flat x range
    xb = max(_num(cfg.get("XBLOCK"), 1.0), 1.0) * max(_num(cfg.get("YBLOCK"), 1.0), 1.0)
    rb = max(_num(cfg.get("RBLOCK"), 1.0), 1.0) if reduction else 1.0
    warps = max(_num(cfg.get("num_warps"), 4.0), 1.0)
    split = max(_num(cfg.get("split"), 1.0), 1.0)
    persistent = bool(cfg.get("persistent", True)) or not reduction
    grid = math.ceil(numel / xb) * split
    r_iters = 1.0 if persistent else float(math.ceil(rnumel / split / rb))
    r_span = rb * (1.0 if persistent else r_iters)
    return {
        "is_reduction": float(reduction), "persistent": float(persistent), "looped": float(not persistent),
        "XBLOCK": xb, "RBLOCK": rb, "num_warps": warps,
        "num_stages": 1.0,  # schema 7: no measured effect (module note)
        "split": split, **{flag: float(bool(cfg.get(flag))) for flag in FLAG_OPTIONS},
        "log_XBLOCK": _log2(xb), "log_RBLOCK": _log2(rb),
        "block_elems": xb * rb, "elems_per_thread": xb * rb / (32.0 * warps), "grid": float(grid),
        "log_grid": _log2(grid), "r_iters": r_iters,
        "x_util": numel / (math.ceil(numel / xb) * xb),
        "r_util": (rnumel / split) / r_span if reduction else 1.0,
        "waves_nominal": grid / (sm_count * nominal_blocks_per_sm(int(warps))),
    }


def _relative_features(f: dict[str, float], nbytes: float, elem_bytes: float, sm_count: float) -> dict[str, float]:
    """The config in proportion to its kernel (see the module note), from the config features `f`."""
    red = f["is_reduction"] > 0
    threads = 32.0 * f["num_warps"]
    r_per_split = f["rnumel"] / f["split"]
    ept = max(f["elems_per_thread"], 1e-3)
    waves = f["waves_nominal"]
    return {
        "log_x_cover": _log2(f["XBLOCK"] / f["numel"]),
        "log_r_cover": _log2(f["RBLOCK"] / r_per_split) if red else 0.0,
        "covers_r": float(f["RBLOCK"] >= r_per_split) if red else 1.0,
        "log_threads": _log2(threads),
        "log_warps_per_row": _log2(f["num_warps"] / f["XBLOCK"]) if red else 0.0,
        "log_r_per_thread": _log2(max(f["RBLOCK"] / (threads / f["XBLOCK"]), 1e-3)) if red else 0.0,
        "log_elems_per_thread": _log2(ept),
        "log_grid_per_sm": _log2(f["grid"] / sm_count),
        "wave_tail": waves - math.floor(waves) if waves > 1 else waves,
        "sm_fill": min(1.0, f["grid"] / sm_count),
        "log_bytes_per_program": _log2(max(nbytes / f["grid"], 1.0)),
        "log_bytes_per_thread": _log2(max(ept * elem_bytes, 1e-3)),
        "log_r_iters": _log2(f["r_iters"]),
        "stages_looped": f["num_stages"] * f["looped"],
        "log_live_values": _log2(ept) + _log2(max(1.0, f["ptr_args"] if math.isfinite(f["ptr_args"]) else 1.0)),
        "wave_quantization": math.ceil(waves) / max(waves, 1e-9),
    }


def _op_counts(rec: dict) -> OpCounts | None:
    try:
        return count_ops(rec["source"], rec.get("kernel_fn") or "KERNEL")
    except (KeyError, TypeError, ValueError):
        return None


def _op_features(ops: OpCounts | None, elements: float, rows: float, nbytes: float) -> dict[str, float]:
    """Op counts, and weighted ops in total (per-element ops times elements, per-row ones times rows)
    and per byte moved."""
    if ops is None:
        return {k: float("nan") for k in (*COUNT_NAMES, "elem_ops", "row_ops", "log_op_elements", "op_intensity")}
    out = {k: float(v) for k, v in ops.as_dict().items()}
    dense = ops.per_element()
    out["elem_ops"] = sum(w * dense.get(k, 0.0) for k, w in OP_WEIGHTS.items())
    out["row_ops"] = sum(w * dense.get(f"row_{k}", 0.0) for k, w in OP_WEIGHTS.items())
    total = out["elem_ops"] * elements + out["row_ops"] * rows
    out["log_op_elements"] = _log2(1.0 + total)
    out["op_intensity"] = total / max(nbytes, 1.0)
    return out


def _compiled_features(stats: CompiledStats | None, warps: float, grid: float, sm_count: float) -> dict[str, float]:
    if stats is None:
        return {k: float("nan") for k in COMPILED_NAMES}
    blocks = blocks_per_sm(int(warps), stats.registers, stats.shared_bytes)
    return {"registers": stats.registers, "spill_store_bytes": stats.spill_store_bytes,
            "spill_load_bytes": stats.spill_load_bytes, "stack_bytes": stats.stack_bytes,
            "shared_bytes": stats.shared_bytes, "blocks_per_sm": blocks, "occupancy": blocks * warps / 64.0,
            "waves_per_sm": grid / (sm_count * blocks) if blocks and blocks > 0 else float("nan")}


def kernel_features(features_record: dict, compile: bool = True, cache: Path | None = None) -> dict[str, float]:
    """The named features (FEATURE_NAMES) of one kernel feature record; never raises on bad content.

    `compile=False` skips the sm_90 compile (its features are NaN): fast, for tests and for
    models trained without them.
    """
    return _features(features_record, compile, cache, _op_counts(features_record))


def _features(rec: dict, compile: bool, cache: Path | None, counts: dict[str, int] | None) -> dict[str, float]:
    try:
        return _known_features(rec, compile, cache, counts)
    except Exception:  # noqa: BLE001 - a malformed record is a row of NaN, the model copes
        return {k: float("nan") for k in FEATURE_NAMES}


def _known_features(rec: dict, compile: bool, cache: Path | None, counts: dict[str, int] | None) -> dict[str, float]:
    dev = rec.get("device") if isinstance(rec.get("device"), dict) else {}
    sm_count = _num(dev.get("sm_count"), DEFAULT_SM_COUNT)
    copy_bw = _num(dev.get("copy_bw"))
    numel, rnumel = max(_num(rec.get("numel"), 1.0), 1.0), max(_num(rec.get("rnumel"), 1.0), 1.0)
    br, bw = _num(rec.get("bytes_read"), 0.0), _num(rec.get("bytes_written"), 0.0)
    nbytes = br + bw
    ideal = nbytes / (copy_bw if copy_bw > 0 else DEFAULT_COPY_BW) * 1e6
    f: dict[str, float] = {
        "numel": numel, "rnumel": rnumel, "log_numel": _log2(numel), "log_rnumel": _log2(rnumel),
        "log_elements": _log2(numel * rnumel), "bytes_read": br, "bytes_written": bw,
        "log_bytes_read": _log2(br), "log_bytes_written": _log2(bw), "log_bytes": _log2(nbytes),
        "bytes_per_element": nbytes / (numel * rnumel), "ideal_us": ideal, "log_ideal_us": _log2(ideal),
        "sm_count": sm_count, "copy_bw": copy_bw,
    }
    f.update(_config_features(rec, sm_count))
    rows = numel if rec.get("kind") in ("reduction", "scan") else 0.0  # a pointwise kernel's per-program ops are a few
    f.update(_op_features(counts, numel * rnumel, rows, nbytes))
    f.update(_signature_traits(rec.get("signature")))
    narrow = f["ptr_args"] > 0 and f["ptr16_args"] == f["ptr_args"]
    f.update(_relative_features(f, nbytes, 2.0 if narrow else 4.0, sm_count))
    stats = compiled_stats(rec, cache) if compile and rec.get("source") else None
    f.update(_compiled_features(stats, f["num_warps"], f["grid"], sm_count))
    return {k: f[k] for k in FEATURE_NAMES}


def _compile_one(args: tuple[dict, Path | None]) -> None:
    compiled_stats(args[0], args[1])


def precompile(records: Sequence[dict], workers: int | None = None, cache: Path | None = None) -> None:
    """Fill the compile cache for many records in parallel processes (the first pass over a DB)."""
    workers = workers if workers is not None else max(1, (os.cpu_count() or 1) - 1)
    unique = {json.dumps([r.get("source"), r.get("config"), r.get("signature")], sort_keys=True, default=str): r
              for r in records if r.get("source")}
    todo = [(r, cache) for r in unique.values()]
    if workers <= 1 or len(todo) < 2:
        for t in todo:
            _compile_one(t)
        return
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        list(pool.map(_compile_one, todo, chunksize=4))


def feature_matrix(records: Sequence[dict], compile: bool = True, workers: int = 1,
                   cache: Path | None = None) -> np.ndarray:
    """[len(records), len(FEATURE_NAMES)] float64 features (workers > 1 compiles in parallel first)."""
    if compile and workers > 1:
        precompile(records, workers, cache)
    counts: dict[tuple[str, str], OpCounts | None] = {}  # candidates of one kernel share a source
    rows = []
    for r in records:
        key = (str(r.get("source")), str(r.get("kernel_fn")))
        if key not in counts:
            counts[key] = _op_counts(r)
        rows.append(_features(r, compile, cache, counts[key]))
    return np.array([[row[k] for k in FEATURE_NAMES] for row in rows], dtype=np.float64).reshape(
        len(rows), len(FEATURE_NAMES))
