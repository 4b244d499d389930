"""Compile-time autotuning of a graph's reduction kernels: the strategy's grouping, each reduction
kernel's launch config measured among a few candidates on the first compile.

Note: a graph without a stored plan gets the default plan, whose reduction configs come from size
rules that cannot see the kernel's arithmetic (a row of 1000 elements with tanh and sigmoid wants
other warps than a plain sum of the same row). Inductor's default mode measures a handful of
configs of every reduction kernel at its first call; autofuse does the same with the tuner's own
machinery: the cost model ranks the kernel's legal configs, the default, the best-ranked few and
the configs Inductor's heuristics would time for a reduction of its shape (then a few one-knob
neighbours of the fastest) are measured in place, each checked against the default config's
outputs. Inductor's few keep the floor where the model ranks an unfamiliar kernel badly. A
pointwise kernel run as 2-D tiles (a transpose, a layout change) is measured too, since its best
tile shape depends on both sides' strides, and Inductor's default mode times several tile shapes
of such kernels; so is a pointwise kernel that reads one buffer through a
window (a pooling window, a stencil: `windowed_groups`), and one whose reads are strided along the
innermost dim (`strided_groups`: the size rule's config for them wins on some and loses on others).
Other 1-D pointwise kernels keep the size rule's config: Inductor times two configs of each, and
the rule's one is the faster on streaming kernels (docs/defaults.md, "Pointwise blocks").
Measurements go to the tuning DB, so the next compile of the same kernel measures nothing. The
grouping is not searched (that is `autofuse tune`). It runs only where kernels can be timed (the
GPU), and any failure leaves the default plan: it can make a compile slower, never wrong. What it
adds to a compile is bounded: per graph, the few distinct kernels with the most elements reduced,
within a time budget; the others keep their default config.
"""
from __future__ import annotations

import contextlib
import functools
import time
import warnings
from dataclasses import replace
from typing import Any, Callable, Sequence

import torch
import torch.fx

from ..codegen.scan import has_row_sort
from ..compiler import CompiledArtifacts, ScheduledGraph, compile_scheduled, default_config, schedule
from ..measure.rng import RngSnapshot
from ..measure.timing import Benchmarker, CudaEventBenchmarker, copy_bandwidth
from ..options import CompileOptions
from ..plan.apply import graph_key, plan_from_groups
from ..plan.graph_hash import device_key, graph_hash
from ..plan.plan import FusionPlan
from ..schedule.fusion import reads_strided
from .evaluate import PlanEvaluator, unshared_mutated_inputs
from .kernels import KernelTuner
from .records import device_traits
from .settings import KernelTuneSettings

# Per reduction, scan, tiled or windowed pointwise kernel: the default, the 3 best-ranked of 48 legal configs,
# a reduction's configs that Inductor's default mode would time (1 to 6: search/reference.py), then up
# to 3 neighbours of the fastest: at most 13 variants compiled and timed (docs/defaults.md,
# "Autotuning at compile"). Which pointwise kernels: `searched_groups`.
AUTOTUNE = KernelTuneSettings(top_k=3, explore=0.0, max_candidates=48, refine=3,
                              kinds=("reduction", "scan", "pointwise"), reference=True)
AUTOTUNE_REPS = 30
# Per graph: the distinct reduction, scan, tiled and windowed pointwise kernels with the most elements, at most
# AUTOTUNE_KERNELS of them, measured within AUTOTUNE_BUDGET_S seconds; the others keep their default
# (a training graph of ResNet-50 holds ~50 distinct ones: measuring all took minutes).
AUTOTUNE_KERNELS = 8
AUTOTUNE_BUDGET_S = 6.0


def autotuned_plan(gm: torch.fx.GraphModule, args: Sequence[Any], options: CompileOptions,
                   benchmarker: Benchmarker | None = None,
                   settings: KernelTuneSettings = AUTOTUNE) -> FusionPlan | None:
    """The options' strategy plan with each reduction kernel's measured best config, or None where
    nothing can be timed (no GPU and no benchmarker given) or the autotune failed (warned once)."""
    found = _guarded(lambda: _autotune(gm, list(args), options, benchmarker, settings), args, benchmarker)
    return found[1] if found is not None else None   # (schedule, plan or None), or None where nothing ran


def autotuned(gm: torch.fx.GraphModule, args: Sequence[Any], options: CompileOptions,
              benchmarker: Benchmarker | None = None,
              settings: KernelTuneSettings = AUTOTUNE) -> CompiledArtifacts | None:
    """The graph compiled with the autotuned plan (`autotuned_plan`), built from the lowering and grouping
    its kernels were measured on rather than lowered again (with the default plan where it has no kernel
    to measure), or None where nothing can be timed or the autotune failed."""
    def run() -> CompiledArtifacts | None:
        seconds: dict[str, float] = {}
        sched, plan = _autotune(gm, list(args), options, benchmarker, settings, seconds)
        if plan is None:   # nothing to measure: the default plan, from the schedule already made
            artifacts = compile_scheduled(gm, args, options, sched)
        else:
            artifacts = compile_scheduled(gm, args, options, sched, [k.config for k in plan.kernels])
            artifacts.source = "autotuned"
        artifacts.seconds = {**seconds, **artifacts.seconds}
        return artifacts
    return _guarded(run, args, benchmarker)


def _guarded(run: Callable[[], Any], args: Sequence[Any], benchmarker: Benchmarker | None) -> Any:
    """run() where kernels can be timed (a GPU, or a benchmarker given) and the caller is not capturing a
    CUDA graph; None elsewhere, or when it fails (warned: the default plan is always safe)."""
    on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
    if benchmarker is None and not on_gpu:
        return None
    if on_gpu and torch.cuda.is_current_stream_capturing():   # timing would break the caller's CUDA graph
        return None
    try:
        return run()
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - the default plan is always safe
        warnings.warn(f"autofuse: autotuning a graph's reduction kernels failed ({type(e).__name__}: {e}); "
                      "using the default plan")
        return None


def _autotune(gm: torch.fx.GraphModule, args: list, options: CompileOptions, benchmarker: Benchmarker | None,
              settings: KernelTuneSettings, seconds: dict[str, float] | None = None
              ) -> tuple[ScheduledGraph, FusionPlan | None]:
    """The schedule the kernels were measured on, and the plan with each measured kernel's best config
    (None when the graph has no kernel to measure); `seconds` gets the time spent lowering and
    grouping, and measuring. The user's generators end where they were: the measured runs of a graph
    that samples draw, and so may anything measured on the way."""
    with RngSnapshot.take().replay():
        return _measured(gm, args, options, benchmarker, settings, {} if seconds is None else seconds)


def _measured(gm: torch.fx.GraphModule, args: list, options: CompileOptions, benchmarker: Benchmarker | None,
              settings: KernelTuneSettings, seconds: dict[str, float]) -> tuple[ScheduledGraph, FusionPlan | None]:
    on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
    opts = options.with_(plan=None, tuner=None, recorder=None)
    start = time.perf_counter()
    sched = schedule(gm, args, opts)
    seconds["lower_and_group"] = time.perf_counter() - start
    pointwise = (tiled_groups(sched.groups, opts.heuristics, not on_gpu) | windowed_groups(sched.groups)
                 | strided_groups(sched.groups))
    if not pointwise and not any(g.is_reduction for g in sched.groups if not g.is_extern):
        return sched, None
    plan = plan_from_groups(graph_key(gm, args), sched.groups, [None] * len(sched.groups), sched.strategy,
                            sched.decisions, sched.lowering.conv_layout)
    device = next(a.device for a in args if isinstance(a, torch.Tensor) and a.is_cuda) if on_gpu else torch.device("cpu")
    db = _measurement_db(options)
    dev = device_key(args)
    bench = benchmarker or _timer(str(device))
    traits = device_traits(device, _copy_bw(str(device)) if on_gpu else None)
    tuner = KernelTuner(bench, _predictor(db, dev), None if db is None else BestEffortStore(db), dev, traits,
                        graph_hash(gm, args), settings, interpret=not on_gpu,
                        select=searched_groups(sched.groups, AUTOTUNE_KERNELS, pointwise),
                        deadline=time.perf_counter() + AUTOTUNE_BUDGET_S)
    evaluator = PlanEvaluator(gm, unshared_mutated_inputs(gm, args), tuner, opts, time_externs=False)
    on_device = torch.cuda.device(device) if on_gpu else contextlib.nullcontext()  # events on the kernels' device
    start = time.perf_counter()
    with on_device, torch.no_grad():
        ev = evaluator.evaluate(plan, sched)
    seconds["measure"] = time.perf_counter() - start
    if ev.error is not None:
        raise RuntimeError(ev.error)
    return sched, replace(ev.plan, strategy=plan.strategy, conv_layout=plan.conv_layout)


def tiled_groups(groups: Sequence[Any], heuristics: Any, interpret: bool) -> frozenset[int]:
    """Indices of the pointwise groups whose default config runs them as 2-D tiles."""
    return frozenset(gi for gi, g in enumerate(groups)
                     if not g.is_extern and not g.is_reduction and default_config(g, heuristics, interpret).YBLOCK)


WINDOW_READS = 4   # reads of one buffer at distinct offsets that make a pointwise kernel a window


def windowed_groups(groups: Sequence[Any]) -> frozenset[int]:
    """Indices of the 1-D pointwise groups that read one buffer at WINDOW_READS or more offsets (a
    pooling window, a stencil). Why: such a kernel issues many loads and index operations per
    element, and its best block and warp count differ from a streaming kernel's (Inductor's default
    mode times two configs of every pointwise kernel; `docs/defaults.md`, "Autotuning at compile")."""
    out = set()
    for gi, g in enumerate(groups):
        if g.is_extern or g.is_reduction:
            continue
        offsets: dict[str, set] = {}
        for n in g.nodes:
            for dep in n.reads:
                offsets.setdefault(dep.name, set()).add(dep.index)
        if any(len(v) >= WINDOW_READS for v in offsets.values()):
            out.add(gi)
    return frozenset(out)


def strided_groups(groups: Sequence[Any]) -> frozenset[int]:
    """Indices of the 1-D pointwise groups whose size rule takes the strided-read config (2 elements a
    lane, `schedule.fusion.reads_strided`). Why: that config wins where strided reads dominate
    (pooling) and loses where contiguous 16-bit traffic does: `x[:, ::2]` plus a contiguous half of a
    bf16 row ran 1.25x torch.compile's time under it (docs/defaults.md, "Pointwise blocks")."""
    return frozenset(gi for gi, g in enumerate(groups) if not g.is_extern and not g.is_reduction and reads_strided(g))


def searched_groups(groups: Sequence[Any], limit: int, pointwise: frozenset[int] = frozenset()) -> frozenset[int]:
    """Indices of the groups whose configs the autotune measures: of the reduction and scan groups
    and the `pointwise` ones (tiled or windowed), those of the `limit` kernels with the most
    elements (reduced, for a reduction), where identical kernels (the same nodes at the same sizes: a model's repeated
    layers) count as one kernel with their elements summed, since they share one measurement and
    the time it saves. A kernel that sorts rows keeps its default: each variant of a sorting network
    takes seconds to compile, and the default (one warp a row) is the sort sweep's measured best
    (docs/defaults.md, "Autotuning at compile"); `autofuse tune` still searches them."""
    weight: dict[tuple, int] = {}
    members: dict[tuple, list[int]] = {}
    for gi, g in enumerate(groups):
        if g.is_extern or not (gi in pointwise or any(n.kind in ("reduction", "scan") for n in g.nodes)):
            continue
        if has_row_sort(g.nodes):
            continue
        sig = (g.numel, g.rnumel, tuple(sorted((n.kind, n.sizes, n.rsizes) for n in g.nodes)))
        weight[sig] = weight.get(sig, 0) + g.numel * max(g.rnumel, 1)
        members.setdefault(sig, []).append(gi)
    top = sorted(weight, key=lambda s: -weight[s])[:limit]
    return frozenset(gi for s in top for gi in members[s])


class BestEffortStore:
    """The tuning DB as the autotune reads and writes measurements: a read or a write that fails (a
    read-only or locked database) is skipped, warned once, and the compile goes on measuring."""

    def __init__(self, db: Any) -> None:
        self.db, self.warned = db, False

    def _failed(self, e: Exception) -> None:
        if not self.warned:
            self.warned = True
            warnings.warn(f"autofuse: autotune measurements not stored in the tuning DB ({type(e).__name__}: {e})")

    def get_measurement(self, key: str, device: str) -> Any:
        try:
            return self.db.get_measurement(key, device)
        except Exception as e:  # noqa: BLE001 - a measurement not found is measured again
            self._failed(e)
            return None

    def put_measurement(self, key: str, device: str, record: dict[str, Any], stats: dict[str, Any]) -> None:
        try:
            self.db.put_measurement(key, device, record, stats)
        except Exception as e:  # noqa: BLE001 - the measurement still counts for this compile
            self._failed(e)


def _measurement_db(options: CompileOptions) -> Any:
    """The tuning DB the measurements are read from and written to; None when it is off or unusable."""
    if not options.use_db:
        return None
    from ..runtime.reuse import open_db
    try:
        return open_db(options.db)
    except Exception:  # noqa: BLE001 - the lookup before this has warned about it already
        return None


@functools.lru_cache(maxsize=8)
def _predictor(db: Any, device: str) -> Any:
    """The cost model that ranks candidates, loaded once per process and DB."""
    from costmodel.predict import GroupContextPredictor, load_predictor
    return GroupContextPredictor(load_predictor(db, device))


@functools.lru_cache(maxsize=8)
def _timer(device: str) -> CudaEventBenchmarker:
    """One CUDA-event timer per device and process (it holds a buffer twice the L2 size to flush it)."""
    with torch.cuda.device(torch.device(device)):
        return CudaEventBenchmarker(reps=AUTOTUNE_REPS)


@functools.lru_cache(maxsize=8)
def _copy_bw(device: str) -> float:
    """The device's copy bandwidth (a cost-model feature), measured once per process on 256 MiB."""
    with torch.cuda.device(torch.device(device)):
        return copy_bandwidth(device, nbytes=256 * 2**20, reps=10)
