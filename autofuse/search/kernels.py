"""One kernel's launch config, tuned once: candidates ranked by the predictor, the top-k measured.

Note: kernels run one after another, so a plan's time is close to the sum of its kernels' times,
and a kernel (the same fused nodes generating the same code) has one best config whatever plan
contains it. A kernel is identified by its `group` key (default-config source, sizes, dtypes);
each (source, config) variant by its `kernel_key`, under which its measurement is stored once per
device. Variants are built from the running program (same buffers) and timed in place; each is
checked against the default config's outputs first — a variant that fails to compile, runs out
of resources, runs too long or computes wrong values scores infinity, with the reason kept.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import time
from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Sequence

import torch

from ..codegen.config import LaunchConfig
from ..codegen.options import KernelView, Option, option, option_neighbours, option_variants
from ..measure.timing import Benchmarker, Timing
from ..measure.verify import compare
from ..plan.apply import check_config, node_id
from ..plan.space import CONFIG_RANGES
from ..runtime.precompile import compiling_ahead
from ..schedule.fusion import is_outer_reduction
from ..codegen.config import FLAGS, next_pow2
from .settings import KernelTuneSettings

RECORD_SCHEMA = 1
_TRITON_DTYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64",
                  torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
                  torch.uint8: "u8", torch.bool: "i1"}


@dataclass(frozen=True)
class KernelChoice:
    """The outcome of tuning one kernel: its best config and time (inf when nothing ran)."""

    group: str
    config: LaunchConfig
    median_us: float
    spread_us: float
    record: dict[str, Any]
    tried: int
    measured: int
    failures: tuple[tuple[str, str], ...] = ()  # (config, reason)
    close: tuple[LaunchConfig, ...] = ()       # runners-up within CLOSE_SHARE of the best, fastest first


# A kernel's configs within 1% of its best are told apart by one measurement each only as far as the
# run-to-run noise allows (0.2% above 30 µs, 0.7% at 8-30 µs: docs/costmodel.md);
# the best plan's runners-up are timed again end to end with the finalists (search/graph_tuner.py).
CLOSE_SHARE = 0.01
CLOSE_KEEP = 2


# Configs of one kernel considered before ranking, nearest the default first. A predictor that tells
# configs apart (a learned model) ranks more: cross-entropy's best loss-reduction configs (split 4 at
# 16-32 warps) are not among the first 48, and the model-only search picks a one-program config 4x
# slower there; with 160 all five suite cases meet the search claims
# (benchmarks/results/2026-11-30-h200-search-quality). Byte counts tie every config of a kernel, so a
# wider list would only widen their random exploration.
DEFAULT_CANDIDATES = 48
RANKED_CANDIDATES = 160


def candidate_limit(settings: KernelTuneSettings, predictor: Any) -> int:
    """How many configs per kernel the tuner considers: the setting, else by what ranks them."""
    if settings.max_candidates is not None:
        return settings.max_candidates
    return RANKED_CANDIDATES if getattr(predictor, "ranks_configs", False) else DEFAULT_CANDIDATES


def device_traits(device: torch.device, copy_bw: float | None) -> dict[str, Any]:
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        return {"name": p.name, "sm_count": p.multi_processor_count, "cc": [p.major, p.minor], "copy_bw": copy_bw}
    return {"name": "cpu", "sm_count": None, "cc": None, "copy_bw": None}


def _sha(*parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(json.dumps(p, sort_keys=True, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def arg_types(launch: Any, env: list) -> list[str]:
    """Triton types of the launch's non-constexpr arguments, in order (pointers, then sizes)."""
    types = ["*" + _TRITON_DTYPES.get(t.dtype, str(t.dtype)) if isinstance(t, torch.Tensor) else "i64"
             for t in (env[s] for s in launch.arg_slots)]
    if getattr(launch, "split", 1) > 1:  # a split reduction also takes its workspaces and counters
        types += ["*" + _TRITON_DTYPES.get(dt, str(dt)) for dt in getattr(launch, "workspace_dtypes", ())] + ["*i32"]
    if getattr(launch, "yblock", 0):  # a 2-D tiled kernel takes ynumel and xnumel (codegen/tiling.py)
        types.append("i32" if launch.ynumel <= 2**31 - 1 else "i64")
    types.append("i32" if launch.numel <= 2**31 - 1 else "i64")
    if launch.is_reduction:
        types.append("i32" if launch.rnumel <= 2**31 - 1 else "i64")
    return types


def _param_names(source: str, fn_name: str) -> list[str]:
    head = source.split(f"def {fn_name}(", 1)[1].split(")", 1)[0]
    return [p.split(":")[0].strip() for p in head.split(",") if "constexpr" not in p]


def kernel_record(info: Any, launch: Any, env: list, graph: str, group: str, device: dict[str, Any],
                  nodes: Sequence[str] = ()) -> dict[str, Any]:
    """The kernel's description: what a measurement is stored with and what the cost model reads."""
    src = info.anonymous_source()
    sig = dict(zip(_param_names(src, "KERNEL"), arg_types(launch, env)))
    cfg = info.config.to_json()
    return {"schema": RECORD_SCHEMA, "graph": graph, "group": group, "kind": info.kind, "numel": info.numel,
            "rnumel": info.rnumel, "config": cfg, "bytes_read": info.bytes_read, "bytes_written": info.bytes_written,
            "signature": sig, "kernel_fn": "KERNEL", "source": src, "nodes": list(nodes), "device": device}


def kernel_key(record: dict[str, Any]) -> str:
    return _sha(record["source"], record["config"], record["numel"], record["rnumel"], record["signature"])


def group_key(default_record: dict[str, Any]) -> str:
    """Config-independent identity of a kernel: its default-config code, sizes and dtypes."""
    return _sha(default_record["source"], default_record["numel"], default_record["rnumel"], default_record["signature"])


def legal_options(group: Any) -> tuple[bool, ...]:
    """Which optional codegen choices (split, online softmax, fast tanh) the group allows."""
    view = KernelView.of(group)
    return (group.is_reduction and option("split").eligible(view, False, 1) is None,
            group.is_reduction and option("online").eligible(view, False, 1) is None,
            option("fast_tanh").eligible(view, True, 1) is None)


def candidate_configs(group: Any, default: LaunchConfig, interpret: bool,
                      ranges: dict[str, dict[str, tuple[int, ...]]] = CONFIG_RANGES, limit: int = 48) -> list[LaunchConfig]:
    """Legal configs for the group: the default first, then each family's nearest the default, in turn."""
    kinds = ["pointwise"] if not group.is_reduction else ["persistent", "looped"]
    if group.is_reduction and is_outer_reduction(group):
        kinds.append("outer")
    known = {f.name for f in fields(LaunchConfig)}
    view = KernelView.of(group)
    legal: dict[tuple[str, bool, int], bool] = {}

    def eligible(opt: Option, persistent: bool, split: int) -> bool:
        key = (opt.name, persistent, split)
        if key not in legal:
            legal[key] = opt.eligible(view, persistent, split) is None
        return legal[key]

    out: dict[LaunchConfig, None] = {default: None}
    xmax = next_pow2(max(group.numel, 1))
    rfull = next_pow2(max(group.rnumel, 1))
    for kind in kinds:
        r = {k: v for k, v in ranges.get(kind, {}).items() if k in known}
        keys = list(r)
        for combo in itertools.product(*(r[k] for k in keys)):
            kw = dict(zip(keys, combo))
            if group.is_reduction:
                kw["persistent"] = kind == "persistent"
                if kind == "persistent":
                    kw["RBLOCK"] = rfull
                elif kind == "outer" and kw["RBLOCK"] >= rfull:
                    kw["persistent"] = True
                    kw["RBLOCK"] = rfull
                    kw["num_stages"] = 1  # no loop to pipeline (see CONFIG_RANGES)
                elif kw.get("RBLOCK", 1) > rfull:
                    continue  # a looped row of one step (RBLOCK = the row) stays: Inductor's two-read form
                elif kw.get("RBLOCK", 1) == rfull and kw.get("split", 1) == 1 and kw.get("num_stages", 1) > 1:
                    continue  # ... at num_stages 1 only: one step has nothing to pipeline (same SASS)
            cfg = LaunchConfig(**kw)
            if not _plausible(cfg, group, xmax):
                continue
            out[cfg] = None
            for twin in option_variants(cfg, interpret, eligible):  # both: the search measures whether it pays
                out[twin] = None
    near = sorted(list(out)[1:], key=lambda c: _distance(c, default))
    return [default] + _interleave_families(near, rfull)[: max(0, limit - 1)]


def neighbour_configs(cfg: LaunchConfig, group: Any) -> list[LaunchConfig]:
    """Legal configs one step from cfg: XBLOCK, num_warps (and a looped reduction's RBLOCK) doubled
    or halved, num_stages back to 1 (it pays nowhere: plan/space.py CONFIG_RANGES), a flag toggled
    (cache_hints; a reduction's early_loads), persistent <-> looped (at half the row, with the flags
    kept and with cache_hints toggled or dropped, since whether a looped row pays depends on them;
    and at the whole row with hints: one loop step that reads the row twice, the second time from
    L2, the form of Inductor's max-autotune rmsnorm and layernorm kernels)."""
    out: list[LaunchConfig] = []
    reduction = group.is_reduction
    looped = reduction and not cfg.persistent
    rfull = next_pow2(max(group.rnumel, 1))
    for key in ("XBLOCK", "num_warps") + (("RBLOCK",) if looped and cfg.split == 1 else ()):
        v = getattr(cfg, key)
        out += [replace(cfg, **{key: v * 2}), replace(cfg, **{key: max(v // 2, 1)})]
    if cfg.num_stages != 1:
        out.append(replace(cfg, num_stages=1))
    out += option_neighbours(cfg, reduction)  # split doubled or halved, a flag toggled (codegen/options.py)
    if reduction:
        if cfg.split == 1 and rfull >= 2:
            if cfg.persistent:
                looped_twin = replace(cfg, persistent=False, RBLOCK=rfull // 2, early_loads=False)
                out += [looped_twin, replace(looped_twin, cache_hints=not looped_twin.cache_hints),
                        replace(cfg, persistent=False, early_loads=False, cache_hints=True)]  # one step, two reads
            elif not cfg.online:
                persistent_twin = replace(cfg, persistent=True, RBLOCK=rfull, num_stages=1)
                out += [persistent_twin, replace(persistent_twin, cache_hints=False)]
    xmax = next_pow2(max(group.numel, 1))
    out = [replace(c, num_stages=1) if _one_step(c, rfull) else c for c in out]
    keep = {c: None for c in out
            if c != cfg and not (not c.persistent and c.RBLOCK > rfull) and _plausible(c, group, xmax)}
    return list(keep)


def _plausible(cfg: LaunchConfig, group: Any, xmax: int) -> bool:
    """Legal, no wider than the kernel, and 1/4 to 128 elements per thread: outside that, threads
    idle or values no longer fit in registers (the candidates' and the neighbours' filter)."""
    elems = cfg.XBLOCK * (cfg.RBLOCK if group.is_reduction else max(cfg.YBLOCK, 1))
    return (cfg.XBLOCK * max(cfg.YBLOCK, 1) <= xmax and cfg.num_warps * 32 // 4 <= elems <= cfg.num_warps * 32 * 128
            and check_config(cfg, group) is None)


def _one_step(c: LaunchConfig, rfull: int) -> bool:
    """A looped row whose loop runs once (RBLOCK covers the row): it reads the row twice, the second
    time from L2, and its code is the same at every num_stages (identical SASS at 1-3 for rmsnorm,
    layernorm and the seed example at 4096 on sm_90)."""
    return not c.persistent and c.split == 1 and c.RBLOCK >= rfull > 1


def _family(c: LaunchConfig, rfull: int = 0) -> tuple:
    return (c.persistent, c.split > 1, c.XBLOCK >= 16 and c.RBLOCK <= 64 and not c.persistent,
            *(getattr(c, flag) for flag in FLAGS), _one_step(c, rfull), c.YBLOCK > 0)


def _interleave_families(ranked: list[LaunchConfig], rfull: int = 0) -> list[LaunchConfig]:
    """Round-robin over config families (persistent/looped/one-step looped, split or not), each in
    rank order: when the predictor cannot tell configs apart (the byte-count estimate), the measured
    few still cover every kind of kernel instead of the default's nearest neighbours only. (The
    one-step rows, Inductor max-autotune's rmsnorm form, are 3 steps from our default and would
    otherwise fall outside the 48 candidates.)"""
    fams: dict[tuple, list[LaunchConfig]] = {}
    for c in ranked:
        fams.setdefault(_family(c, rfull), []).append(c)
    out: list[LaunchConfig] = []
    queues = list(fams.values())
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def _distance(a: LaunchConfig, b: LaunchConfig) -> tuple:
    da, db = a.to_json(), b.to_json()
    d = 0.0
    for k, v in da.items():
        w = db.get(k)
        if isinstance(v, bool) or not isinstance(v, int):
            d += 0 if v == w else 4
        else:
            d += abs(math.log2(max(v, 1)) - math.log2(max(w or 1, 1)))
    return (d, json.dumps(da, sort_keys=True))


def best_config(times: dict[LaunchConfig, float], default: LaunchConfig) -> LaunchConfig:
    """The fastest config; ties go to the default. A split config is one launch like any other
    (codegen/split.py), so its time compares as is: the tuner's timer hides host time, and the
    two-launch split had to be charged one launch (cross-entropy's split mean: 188 µs a call
    against 155 µs unsplit; docs/defaults.md)."""
    return min(times, key=lambda c: (times[c], c != default))


Variant = tuple[Any, Any, dict[str, Any]]   # (launch, kernel info, record) of one config, built
Result = tuple[float, float, str | None, dict[str, Any]]  # (median µs, spread µs, error, record)


class KernelTuner:
    """Tunes each kernel's config once per tune; measurements come from and go to the tuning DB."""

    def __init__(self, benchmarker: Benchmarker, predictor: Any, db: Any, device: str, traits: dict[str, Any],
                 graph: str, settings: KernelTuneSettings = KernelTuneSettings(), interpret: bool = False,
                 on_measure: Callable[[dict[str, Any], Timing | None, str | None], None] | None = None) -> None:
        self.bench, self.predictor, self.db, self.device = benchmarker, predictor, db, device
        self.traits, self.graph, self.settings, self.interpret = traits, graph, settings, interpret
        self.choices: dict[tuple, KernelChoice] = {}
        self.on_measure = on_measure
        self.rng = random.Random(settings.seed)
        self.new_measurements = 0
        self.reused_measurements = 0  # variants whose time the tuning DB already held
        self.reused_choices = 0       # kernels that took the config chosen for an identical kernel

    def tune(self, builder: Any, gi: int, launch: Any, info: Any, env: list) -> KernelChoice:
        """Best config of group gi's kernel; leaves env as the default config's launch left it."""
        ids = [node_id(n) for n in builder.groups[gi].nodes]
        gkey = group_key(kernel_record(info, launch, env, self.graph, "", self.traits, ids))
        group = builder.groups[gi]
        # the same code can come from groups on which different configs are legal (a kernel-local
        # f32 member makes fast_tanh illegal without changing the source): a choice is reused
        # only where the same options are legal
        ckey = (gkey, legal_options(group))
        if ckey in self.choices:
            launch.run(env)
            self.reused_choices += 1
            return self.choices[ckey]
        search = KernelSearch(self, builder, gi, launch, info, env, ids, gkey)
        search.build_candidates(candidate_configs(group, info.config, self.interpret,
                                                  limit=candidate_limit(self.settings, self.predictor)))
        chosen = search.select()
        search.take_reference()
        with compiling_ahead(self.to_compile(chosen, search.variants)):   # compiles overlap the first timings
            for cfg in chosen:
                search.measure(cfg)
        search.refine()
        choice = search.choose()
        self.choices[ckey] = choice
        return choice

    def to_compile(self, configs: Sequence[LaunchConfig], variants: dict) -> list[Any]:
        """The launches of the configs whose variant is built and not yet measured in the DB."""
        out = []
        for c in configs:
            v = variants.get(c)
            if not isinstance(v, tuple):
                continue
            if self.bench.measures and self.db is not None and self.db.get_measurement(kernel_key(v[2]), self.device):
                continue
            out.append(v[0])
        return out

    def predict(self, records: list[dict[str, Any]]) -> list[float]:
        try:
            return [float(p) for p in self.predictor.predict_us(records)]
        except Exception:  # noqa: BLE001 - ranking is advice: without it, nearest the default first
            return [0.0] * len(records)

    def measure_variant(self, launch: Any, rec: dict[str, Any], env: list, outs: list[int],
                        ref: list[torch.Tensor]) -> tuple[float, float, str | None, int]:
        """(median µs, spread µs, error, 1 if newly measured) of one variant."""
        key = kernel_key(rec)
        if self.bench.measures and self.db is not None:
            got = self.db.get_measurement(key, self.device)
            if got is not None:
                self.reused_measurements += 1
                st = got["stats"]
                med = st.get("median_us")
                return (math.inf if med is None else float(med), float(st.get("p90_us", 0) or 0) - float(st.get("p10_us", 0) or 0),
                        st.get("error"), 0)
        err: str | None = None
        timing: Timing | None = None
        try:
            t0 = time.perf_counter()
            launch.run(env)
            if outs and env[outs[0]].is_cuda:
                torch.cuda.synchronize()
            took = time.perf_counter() - t0
            err = compare([env[s] for s in outs], ref, "kernel output")
            if err is None and took > self.settings.kernel_timeout_s and not self.interpret:
                err = f"timed out: one run took {took:.1f} s"
            if err is None:
                timing = self.bench.time(lambda: launch.run(env), rec)
        except KeyboardInterrupt:
            raise
        except Exception as e:  # noqa: BLE001 - compile errors, out of resources: the tune goes on
            msg = str(e).strip().splitlines()
            err = f"{type(e).__name__}: {msg[0][:300] if msg else ''}"
        if self.on_measure is not None:
            self.on_measure(rec, timing, err)
        if self.bench.measures and self.db is not None:
            stats = dict(timing.to_json()) if timing else {"median_us": None, "reps": 0, "measured": False}
            stats["error"] = err
            compiled = getattr(launch, "compiled_stats", None)
            gpu = compiled() if callable(compiled) else None
            if gpu is not None:  # recorded beside the timing, not a feature: see FastLauncher.compiled_stats
                stats["gpu_compile"] = gpu
            self.db.put_measurement(key, self.device, rec, stats)
            self.new_measurements += 1
        if timing is None:
            return math.inf, 0.0, err, 1
        return timing.median_us, timing.spread_us, None, 1


class KernelSearch:
    """The config search of one kernel (group gi of a running program): each config's variant (built,
    or why it cannot be), each measured config's result, the failures and how many variants were
    newly measured. The tuner-wide parts (ranking, the DB, the timer) are the KernelTuner's."""

    def __init__(self, tuner: KernelTuner, builder: Any, gi: int, launch: Any, info: Any, env: list,
                 ids: list[str], gkey: str) -> None:
        self.tuner, self.builder, self.gi, self.launch, self.info, self.env = tuner, builder, gi, launch, info, env
        self.ids, self.gkey = ids, gkey
        self.group = builder.groups[gi]
        self.default: LaunchConfig = info.config
        self.candidates: list[LaunchConfig] = []
        self.variants: dict[LaunchConfig, Variant | str] = {}   # a str: why the codegen cannot build it
        self.results: dict[LaunchConfig, Result] = {}
        self.failures: list[tuple[str, str]] = []
        self.measured = 0                                       # variants newly measured (not from the DB)
        self.outs: list[int] = []                               # the kernel's output slots
        self.ref: list[torch.Tensor] = []                       # the default config's outputs

    def build(self, cfg: LaunchConfig) -> None:
        """cfg's variant (launch, info, record), or why the codegen cannot build it (it scores infinity)."""
        t = self.tuner
        try:
            lv, iv = (self.launch, self.info) if cfg == self.default else self.builder.variant(self.gi, cfg)
            self.variants[cfg] = (lv, iv, kernel_record(iv, lv, self.env, t.graph, self.gkey, t.traits, self.ids))
        except Exception as e:  # noqa: BLE001 - a config the codegen cannot build scores infinity
            self.variants[cfg] = f"codegen failed: {type(e).__name__}: {e}"

    def build_candidates(self, configs: list[LaunchConfig]) -> None:
        self.candidates = configs
        for cfg in configs:
            self.build(cfg)

    def select(self) -> list[LaunchConfig]:
        """The configs measured first: the default, the top-k built candidates by predicted time
        (nearest-default breaks ties, the families interleaved), some explored."""
        tuner, default = self.tuner, self.default
        ok = [c for c in self.candidates if not isinstance(self.variants[c], str)]
        rest = [c for c in ok if c != default]
        if not rest:
            return [default]
        # the default is ranked with the rest: a predictor that ranks a kernel's configs together
        # (GroupContextPredictor) would rank the whole group again when the default is timed next
        pred_of = dict(zip(ok, tuner.predict([self.variants[c][2] for c in ok])))
        preds = [pred_of[c] for c in rest]
        rfull = next_pow2(max(self.group.rnumel, 1)) if self.group.is_reduction else 0
        ranked = _interleave_families([c for _, _, c in sorted(((p, i, c) for i, (p, c) in enumerate(zip(preds, rest))),
                                                               key=lambda t: t[:2])], rfull)
        k = tuner.settings.top_k if tuner.bench.measures else 1
        n_explore = int(round(k * tuner.settings.explore)) if tuner.bench.measures else 0
        top = ranked[: max(0, k - n_explore)]
        pool = ranked[len(top):]
        explore = tuner.rng.sample(pool, min(n_explore, len(pool)))
        return [default] + top + explore

    def take_reference(self) -> None:
        """Run the default config: its outputs are what every variant is checked against."""
        self.outs = [self.builder.slot(w) for w in self.info.writes]
        self.launch.run(self.env)
        self.ref = [self.env[s].clone() for s in self.outs]

    def measure(self, cfg: LaunchConfig) -> None:
        """cfg's result: from the DB or timed (its variant built first if it is a neighbour outside
        the candidates); infinity with the reason when it cannot be built, fails or is wrong."""
        if cfg not in self.variants:
            self.build(cfg)
        v = self.variants[cfg]
        if isinstance(v, str):
            self.results[cfg] = (math.inf, 0.0, v, {})
            return
        lv, _, rec = v
        us, spread, err, new = self.tuner.measure_variant(lv, rec, self.env, self.outs, self.ref)
        self.measured += new
        self.results[cfg] = (us, spread, err, rec)
        if err:
            self.failures.append((str(cfg), err))

    def refine(self) -> None:
        """Best-first local search from the measured configs, as Inductor's max-autotune runs a
        coordinate descent after its candidates: the fastest measured config not yet expanded has
        its untried neighbours (`neighbour_configs`) measured, best predicted first, while
        `settings.refine` lasts; then the next fastest. A faster neighbour is expanded next (descent);
        when none is faster the runner-up is (a plain descent stops there, yet the seed example's
        best row config is two moves from the default across a tie: RBLOCK 2048 -> 1024 at 8 warps
        is level, then 16 warps is 1% faster). Knobs interact (rmsnorm's looped rows beat its
        persistent ones only with cache hints; docs/defaults.md), so a
        search that stops at the ranked top-k can leave a few percent behind."""
        t = self.tuner
        left = t.settings.refine if t.bench.measures else 0
        expanded: set[LaunchConfig] = set()
        while left > 0:
            open_ = {c: r[0] for c, r in self.results.items() if c not in expanded and math.isfinite(r[0])}
            if not open_:
                return
            centre = best_config(open_, self.default)
            expanded.add(centre)
            near = [c for c in neighbour_configs(centre, self.group) if c not in self.results]
            if not near:
                continue
            # a neighbour not generated yet is ranked by the centre's record with its own config
            # (the op mix is the centre's; the predictor reads sizes, bytes and the config)
            centre_rec = self.results[centre][3]
            recs = [self.variants[c][2] if isinstance(self.variants.get(c), tuple) else {**centre_rec, "config": c.to_json()}
                    for c in near]
            preds = t.predict(recs)
            order = sorted(range(len(near)), key=lambda i: (preds[i], i))
            batch = [near[i] for i in order[:left]]
            with compiling_ahead(t.to_compile(batch, self.variants)):
                for cfg in batch:
                    self.measure(cfg)
                    left -= 1

    def choose(self) -> KernelChoice:
        """The fastest measured config and its close runners-up; runs the default again, so that the
        kernels that follow read its outputs."""
        for cfg, v in self.variants.items():
            if isinstance(v, str):
                self.failures.append((str(cfg), v))
        self.launch.run(self.env)  # leave the default's outputs for the kernels that follow
        results = self.results
        best = best_config({c: r[0] for c, r in results.items()}, self.default)
        us, spread, _, rec = results[best]
        close = sorted((r[0], str(c), c) for c, r in results.items()
                       if c != best and math.isfinite(r[0]) and r[0] <= us * (1 + CLOSE_SHARE))
        return KernelChoice(self.gkey, best, us, spread, rec, len(results), self.measured, tuple(self.failures),
                            tuple(c for _, _, c in close[:CLOSE_KEEP]))
