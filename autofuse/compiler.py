"""The pipeline for one graph specialization: lower -> schedule/fuse -> codegen -> program."""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import torch
import torch.fx
from torch.utils._pytree import tree_leaves

from .codegen.accesses import Access
from .codegen.columns import rows_per_program
from .codegen.config import LaunchConfig
from .codegen.device import device_facts
from .codegen.options import KernelView, default_legality
from .codegen.scan import has_row_sort
from .codegen.tiling import choose_tiling
from .codegen.triton_kernel import KernelSource, KernelWriter, kernel_name
from .ir.values import Buffer, ComputedBuffer, ExternBuffer, ReinterpretView, is_tensor_value
from .lower import GraphLowering
from .lower.extern_args import IN_PLACE_FORMS
from .options import CompileOptions
from .runtime.loader import load_kernel, warn_interpreter_once
from .runtime.aliasing import aliased_slots, may_alias
from .runtime.combine import LaunchIO, combine_launches
from .runtime.program import Alloc, ConstOutput, ExternCall, Free, KernelLaunch, Program, SlotOutput, StridedArg
from .plan.apply import apply_plan, graph_key, plan_from_groups
from .plan.plan import FusionPlan, PlanError
from .schedule.fusion import (FusionGroup, FusionLog, fuse_nodes, is_outer_reduction, lane_order, singleton,
                              topological_groups, reads_strided, writes_along_r)
from .schedule.heuristics import Heuristics
from .schedule.in_place import donated_operands
from .schedule.input_updates import is_update, stored_in_place
from .schedule.loops import r_passes
from .schedule.nodes import itemsize
from .schedule.scheduler import SchedulerGraph
from .strategies import tvm

SECTOR_BYTES = 32  # the DRAM access granularity of NVIDIA GPUs: a scattered element moves a whole sector
SMALL_BLOCK_BYTES = 1 << 20  # the CUDA caching allocator's largest small block (small ones have a pool of their own)
MAX_PEAK_PASSES = 8  # memory planning: rounds of freeing dead buffers held across the program's peak


@dataclass(frozen=True)
class KernelInfo:
    """What explain reports about one kernel of a compiled program."""

    name: str
    kind: str  # "pointwise" | "reduction" | "scan" | "fallback"
    aten_ops: tuple[str, ...]
    nodes: tuple[str, ...]
    numel: int = 0
    rnumel: int = 1
    config: Any = None
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    bytes_read: int = 0
    bytes_written: int = 0
    source: str = ""
    fn_name: str = ""  # the function's name in `source`: one per distinct kernel body (`name` is per site)
    programs: int = 0  # a row kernel with column partials: its programs, each walking numel / programs rows

    def anonymous_source(self) -> str:
        """The source with its function named KERNEL: equal for identical kernels at any site."""
        return self.source.replace(self.fn_name or self.name, "KERNEL")


@dataclass
class CompiledArtifacts:
    program: Program
    kernels: list[KernelInfo]
    fusion_log: FusionLog
    groups: list[FusionGroup] = field(default_factory=list)
    plan: FusionPlan | None = None
    graph: SchedulerGraph | None = None
    source: str = "strategy"  # "strategy", "plan" (given by the caller), "tuning DB" or "autotuned"
    # where the compile's time went, in seconds: "lower_and_group", "measure" (the compile-time autotune),
    # "program" (code generation and the wrapper; Triton compiles the kernels before the first call)
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ScheduledGraph:
    """A graph lowered and grouped, before codegen: what `schedule` hands to the program builder."""

    lowering: GraphLowering
    graph: SchedulerGraph
    placed: list[tuple[FusionGroup, LaunchConfig | None]]  # the groups in execution order, with their configs
    log: FusionLog
    decisions: dict[str, bool]  # realize decisions the lowering took
    strategy: str               # what grouped it: the options' strategy, or the given plan's

    @property
    def groups(self) -> list[FusionGroup]:
        return [g for g, _ in self.placed]

    @property
    def configs(self) -> list[LaunchConfig | None]:
        return [c for _, c in self.placed]


def schedule(gm: torch.fx.GraphModule, args: Sequence[Any], options: CompileOptions) -> ScheduledGraph:
    """Lower and group, by the options' plan or strategy."""
    key = graph_key(gm, args)
    heur = options.heuristics
    log = FusionLog()
    if options.plan is not None:
        plan = options.plan.get(key)
        if plan is None:
            raise PlanError(f"stale plan: no plan for graph {key} (the plan file has plans for "
                            f"{', '.join(sorted(options.plan)) or 'no graph'})")
        if plan.conv_layout is not None:
            heur = replace(heur, conv_layout=plan.conv_layout)
        lowering = GraphLowering(gm, args, heur, plan.realize_decisions()).run()
        graph = SchedulerGraph(lowering.buffers, lowering.outputs)
        return ScheduledGraph(lowering, graph, apply_plan(plan, key, graph), log, plan.realize_decisions(),
                              plan.strategy)
    decisions: dict[str, bool] = {}
    group_of: dict[str, int] = {}
    if options.strategy == "tvm":
        decisions, group_of = tvm.realize_decisions(gm)
    lowering = GraphLowering(gm, args, heur, decisions).run()
    graph = SchedulerGraph(lowering.buffers, lowering.outputs)
    groups = [singleton(n) for n in graph.nodes]
    if options.strategy == "inductor":
        groups = fuse_nodes(groups, graph, heur, log)
    elif options.strategy == "tvm":
        groups = tvm.partition(graph, lowering.buffer_fx, group_of, log)
    plan = plan_from_groups(key, topological_groups(groups, graph), [None] * len(groups), options.strategy, decisions)
    return ScheduledGraph(lowering, graph, apply_plan(plan, key, graph), log, decisions, options.strategy)


def compile_graph(gm: torch.fx.GraphModule, args: Sequence[Any], options: CompileOptions) -> CompiledArtifacts:
    start = time.perf_counter()
    sched = schedule(gm, args, options)
    lowered = time.perf_counter() - start
    artifacts = compile_scheduled(gm, args, options, sched)
    artifacts.seconds = {"lower_and_group": lowered, **artifacts.seconds}
    return artifacts


def compile_scheduled(gm: torch.fx.GraphModule, args: Sequence[Any], options: CompileOptions, sched: ScheduledGraph,
                      configs: Sequence[LaunchConfig | None] | None = None) -> CompiledArtifacts:
    """The program of a graph already lowered and grouped, each group with `configs`' launch config
    (default: the schedule's). Why apart from `compile_graph`: the compile-time autotune measures its
    kernels on one schedule and builds the program from it, instead of lowering the graph again."""
    start = time.perf_counter()
    builder = ProgramBuilder(sched.lowering, sched.graph, sched.groups, options,
                             sched.configs if configs is None else configs, final=True)
    artifacts = builder.build(sched.log)
    artifacts.plan = plan_from_groups(graph_key(gm, args), builder.groups, builder.used_configs, sched.strategy,
                                      sched.decisions, sched.lowering.conv_layout)
    artifacts.graph = sched.graph
    artifacts.source = "plan" if options.plan is not None else "strategy"
    artifacts.program.wrapper  # noqa: B018 - written now, at compile time, not on the first call
    artifacts.seconds = {"program": time.perf_counter() - start}
    return artifacts


def kernel_kind(g: FusionGroup) -> str:
    """"scan", "reduction" or "pointwise": which family of launch configs the group's kernel takes."""
    if any(n.kind == "scan" for n in g.nodes):
        return "scan"
    return "reduction" if g.is_reduction else "pointwise"


def default_config(g: FusionGroup, heur: Heuristics, interpret: bool) -> LaunchConfig:
    """The group's launch config without a plan: the heuristics' rule for its sizes, layout and passes,
    with every option the kernel allows at its default (codegen/options.py)."""
    members = g.placements()
    if rows_per_program(members):
        return heur.column_partial_config(g.numel, g.rnumel, interpret)
    legal = default_legality(KernelView(members, g.is_reduction, g.rnumel), interpret)
    outer = is_outer_reduction(g, heur.persistent_rnumel_max)
    kind = "sort" if has_row_sort(g.nodes) else kernel_kind(g)
    return heur.launch_config(kind, g.numel, g.rnumel, interpret, outer, legal=legal,
                              device=device_facts(g.device),
                              tile=choose_tiling(members) if legal.get("YBLOCK") else None,
                              passes=r_passes(members) if g.is_reduction else 1,
                              writes_rows=outer and writes_along_r(g), strided=reads_strided(g))


class ProgramBuilder:
    """Turns ordered groups into steps: allocations, launches, fallbacks, frees."""

    def __init__(self, lowering: GraphLowering, graph: SchedulerGraph, groups: list[FusionGroup],
                 options: CompileOptions, configs: Sequence[LaunchConfig | None] | None = None,
                 final: bool = False) -> None:
        """final: the program a call runs, whose kernels store input updates into the inputs
        (schedule/input_updates.py) and whose small independent pointwise kernels share launches
        (runtime/combine.py); off where the search runs and times a program's kernels one by one."""
        self.lowering, self.graph, self.groups, self.options = lowering, graph, groups, options
        self.final = final
        self.over_operands: dict[str, str] = {}   # kernel output -> the operand buffer it is stored over
        self.launch_io: dict[int, LaunchIO] = {}
        self.configs = list(configs) if configs is not None else [None] * len(groups)
        self.used_configs: list[LaunchConfig | None] = []
        self.stored_of: dict[int, set[str]] = {}   # group index -> buffers its kernel stores
        self.kernel_index_of: dict[int, int] = {}  # group index -> position in the kernel list
        self.slots: dict[str, int] = {}
        self.num_slots = 0
        self.layouts: dict[str, Any] = {}
        for inp in lowering.inputs:
            if inp is not None:
                self.layouts[inp.name] = inp.layout
        for b in lowering.buffers:
            if isinstance(b, ComputedBuffer):
                self.layouts[b.name] = b.layout
        for n in graph.nodes:
            if n.kind == "extern":
                _walk(n.extern.outputs, lambda o: self.layouts.__setitem__(o.name, o.layout))
        # every kernel's writer takes these: computed once, not once per kernel over every buffer
        self.dtypes = {k: v.dtype for k, v in self.layouts.items()}
        self.spans = {k: v.storage_span() for k, v in self.layouts.items()}

    def slot(self, name: str) -> int:
        if name not in self.slots:  # two names share a slot where a kernel stores into an input
            self.slots[name] = self.num_slots
            self.num_slots += 1
        return self.slots[name]

    def build(self, log: FusionLog) -> CompiledArtifacts:
        input_slots = tuple(self.slot(i.name) if i is not None else None for i in self.lowering.inputs)
        outputs_needed = self.graph.graph_outputs
        readers: dict[str, set[int]] = {}
        for gi, g in enumerate(self.groups):
            for n in g.nodes:
                for r in n.read_names:
                    readers.setdefault(r, set()).add(gi)
        steps: list[Any] = []
        kernels: list[KernelInfo] = []
        step_of_group: list[int] = []
        in_inputs = stored_in_place(self.graph, self.groups, readers) if self.final else {}
        for src, dst in in_inputs.items():
            self.slots[src] = self.slot(dst)
        written: dict[int, tuple[LaunchConfig, KernelWriter, KernelSource]] = {}

        def accesses(gi: int) -> tuple[Access, ...]:
            if gi not in written:
                written[gi] = self._write(self.groups[gi], self._stored_by(gi, readers), self.configs[gi])
            return written[gi][2].accesses

        # a scatter's output lives in its target's memory (ScatterBody), in every program; one
        # without a target in memory of its own, never an operand's (it stores out of order)
        scatters = {n.name: n.buffer.body.target for n in self.graph.nodes if n.is_scatter}
        targets = {s: t for s, t in scatters.items() if t is not None}
        over_operands = donated_operands(self.graph, self.groups, readers, self.layouts,
                                         lambda gi: self._stored_by(gi, readers), may_alias,
                                         set(in_inputs) | set(scatters) | set(targets.values()),
                                         accesses) if self.final else {}
        over_operands.update(targets)
        for w, d in over_operands.items():
            self.slots[w] = self.slot(d)
        self.over_operands = over_operands
        for gi, g in enumerate(self.groups):
            if g.is_extern:
                self.used_configs.append(None)
                k = g.nodes[0].extern
                if is_update(g) and in_inputs:
                    k = _without_updates(k, in_inputs)
                    if not k.args[0]:  # every update is stored by its kernel
                        step_of_group.append(len(steps) - 1)
                        continue
                steps.append(self._extern_step(k, self._updates_in_place(k, gi, readers)))
                generated = getattr(k.op, "generated_source", "")   # an op run by a kernel of ours (flex attention)
                kernels.append(KernelInfo(k.name, "fallback", tuple(sorted(g.nodes[0].origins)),
                                          (g.nodes[0].name,), reads=tuple(sorted(g.nodes[0].read_names)),
                                          writes=g.nodes[0].outputs, source=generated,
                                          fn_name=getattr(k.op, "kernel_name", "") if generated else ""))
            else:
                stored = self._stored_by(gi, readers)
                for w in sorted(stored, key=lambda w: self.graph.by_name[w].order):
                    if w not in in_inputs and w not in over_operands:
                        steps.append(Alloc(self.slot(w), self.layouts[w], poison=self.options.poison))
                self.stored_of[gi], self.kernel_index_of[gi] = stored, len(kernels)
                launch, info = self._kernel_step(g, stored, len(kernels), self.configs[gi], written.get(gi))
                if self.final:   # what combine_launches needs to know of the launch
                    self.launch_io[id(launch)] = LaunchIO(frozenset(self.slot(r) for r in info.reads),
                                                          frozenset(self.slot(w) for w in info.writes), info.source,
                                                          info.fn_name)
                steps.append(launch)
                kernels.append(info)
            step_of_group.append(len(steps) - 1)
        steps = self._plan_memory(steps, readers, step_of_group, outputs_needed)
        if self.final:
            steps = combine_launches(steps, self.launch_io)
        outputs = [self._output_getter(o) for o in self.lowering.outputs]
        layouts = {s: self.layouts[i.name] for i, s in zip(self.lowering.inputs, input_slots) if s is not None}
        program = Program(self.num_slots, input_slots, steps, outputs, kernels, layouts,
                          writes_inputs=bool(in_inputs))
        return CompiledArtifacts(program, kernels, log, self.groups)

    def _stored_by(self, gi: int, readers: dict[str, set[int]]) -> set[str]:
        """The buffers group gi's kernel stores: those returned or read by another group."""
        return {n.name for n in self.groups[gi].nodes
                if n.name in self.graph.graph_outputs or (readers.get(n.name, set()) - {gi})}

    def variant(self, gi: int, config: LaunchConfig) -> tuple[KernelLaunch, KernelInfo]:
        """Group gi's kernel built with another launch config (same buffers and slots), after build():
        the search times the configs of one kernel in place, inside a running program."""
        saved = list(self.used_configs)
        try:
            return self._kernel_step(self.groups[gi], self.stored_of[gi], self.kernel_index_of[gi], config)
        finally:
            self.used_configs = saved

    # ---- steps -----------------------------------------------------------------------------
    def _arg(self, v: Any) -> Any:
        if isinstance(v, ReinterpretView):
            return StridedArg(self.slot(v.buffer.name), v.layout)
        if isinstance(v, Buffer):
            return StridedArg(self.slot(v.name), v.layout.__class__(v.layout.device, v.layout.dtype, v.layout.size,
                                                                  v.layout.stride, 0))
        return v

    def _updates_in_place(self, k: Any, gi: int, readers: dict[str, set[int]]) -> bool:
        """Can extern k (an op with an in-place form) update its first operand instead of a copy? Only a
        buffer of this program (not an input, not returned) that no other step reads or passes twice,
        stored in the layout of k's result."""
        if k.op not in IN_PLACE_FORMS or not k.args:
            return False
        first, out = k.args[0], k.outputs
        if not isinstance(first, (ComputedBuffer, ExternBuffer)) or not isinstance(out, ExternBuffer):
            return False
        names = [a.name if isinstance(a, Buffer) else a.buffer.name
                 for a in tree_leaves((k.args, k.kwargs), is_leaf=is_tensor_value) if is_tensor_value(a)]
        return (first.name not in self.graph.graph_outputs and readers.get(first.name) == {gi}
                and names.count(first.name) == 1 and first.layout == out.layout)

    def _extern_step(self, k: Any, in_place: bool = False) -> ExternCall:
        from torch.utils._pytree import tree_map
        is_leaf = lambda x: is_tensor_value(x)  # noqa: E731
        args = tree_map(self._arg, k.args, is_leaf=is_leaf)
        kwargs = tree_map(self._arg, k.kwargs, is_leaf=is_leaf)
        layouts: dict[int, Any] = {}

        def slots_of(o: Any) -> Any:
            if isinstance(o, ExternBuffer):
                s = self.slot(o.name)
                layouts[s] = o.layout
                return s
            if isinstance(o, (list, tuple)):
                return [slots_of(x) for x in o]
            return None

        return ExternCall(k.name, IN_PLACE_FORMS[k.op] if in_place else k.op, args, kwargs, slots_of(k.outputs), layouts)

    def _write(self, g: FusionGroup, stored: set[str], config: LaunchConfig | None
               ) -> tuple[LaunchConfig, KernelWriter, KernelSource]:
        """Group g's kernel source (config None: the default config)."""
        interpret = g.device.type != "cuda"
        if config is None:
            config = default_config(g, self.options.heuristics, interpret)
        origins = sorted(set().union(*(n.origins for n in g.nodes)))
        # the source names the function without the site index, so identical kernels (a model's
        # repeated layers) have identical source: one module, one Triton compile
        fn_name = kernel_name(kernel_kind(g), config.persistent, origins, None)
        writer = KernelWriter(fn_name, g.placements(), g.numel, g.rnumel, g.is_reduction, stored, self.dtypes, self.spans,
                              config, interpret, lane_order(g, self.options.heuristics.persistent_rnumel_max))
        return config, writer, writer.generate()

    def _kernel_step(self, g: FusionGroup, stored: set[str], index: int, config: LaunchConfig | None,
                     written: tuple[LaunchConfig, KernelWriter, KernelSource] | None = None
                     ) -> tuple[KernelLaunch, KernelInfo]:
        """`written`: the kernel as `_write` made it for these arguments, if it already did."""
        device = g.device
        interpret = device.type != "cuda"
        if interpret:
            warn_interpreter_once()
        kind = kernel_kind(g)
        config, writer, src = written or self._write(g, stored, config)
        self.used_configs.append(config)
        origins = sorted(set().union(*(n.origins for n in g.nodes)))
        name = kernel_name(kind, config.persistent, origins, index)
        fn_name = src.name
        fn = load_kernel(fn_name, src.source, interpret)
        sp = src.split  # a split reduction's workspaces and counters (codegen/split.py)
        launch = KernelLaunch(name, fn, tuple(self.slot(a) for a in src.arg_names), g.numel, g.rnumel,
                              config.XBLOCK, config.RBLOCK, config.num_warps, config.num_stages, g.is_reduction,
                              split=sp.split if sp else 1, device=device,  # the launcher's fast path is per device
                              workspace_dtypes=sp.workspace_dtypes if sp else (),
                              ynumel=src.tile.ynumel if src.tile else 1, yblock=config.YBLOCK if src.tile else 0,
                              programs=src.programs,
                              arg_dtypes=tuple(self.layouts[a].dtype for a in src.arg_names if a in self.layouts))
        reads = tuple(dict.fromkeys(writer.inputs))
        writes = tuple(writer.outputs)
        info = KernelInfo(name, kind, tuple(origins), tuple(n.name for n in g.nodes), g.numel, g.rnumel,
                          config, reads, writes,
                          sum(self._read_bytes(r, writer) for r in reads), sum(self._bytes(w) for w in writes),
                          src.source, fn_name, src.programs)
        return launch, info

    def _bytes(self, name: str) -> int:
        lay = self.layouts[name]
        return lay.numel * itemsize(lay.dtype)

    def _read_bytes(self, name: str, writer: KernelWriter) -> int:
        """The bytes a kernel reads of `name`: the whole buffer, or for a buffer it only gathers, one
        DRAM sector (SECTOR_BYTES) per gathered element, at most the whole buffer. Why: cross-entropy's
        target gather reads 8192 logits of a 524 MB buffer; counted whole, the cost model took that
        kernel for 824 µs, and its model-only plan came out 2.8x slower."""
        full = self._bytes(name)
        n = writer.gathered_elements(name)
        return full if n is None else min(full, n * max(SECTOR_BYTES, itemsize(self.layouts[name].dtype)))

    def _plan_memory(self, steps: list[Any], readers: dict[str, set[int]], step_of_group: list[int],
                     outputs: set[str]) -> list[Any]:
        """Insert frees after last uses; let allocations take over freed storage of equal size."""
        last_use: dict[int, int] = {}
        for name, gis in readers.items():
            if name in self.slots:  # a slot may hold several buffers (a kernel output over its operand)
                s = self.slots[name]
                last_use[s] = max(last_use.get(s, -1), max(step_of_group[g] for g in gis))
        keep = {self.slots[n] for n in outputs if n in self.slots}
        keep |= {self.slot(i.name) for i in self.lowering.inputs if i is not None}
        names_of: dict[int, list[str]] = {}
        for n, s in self.slots.items():
            names_of.setdefault(s, []).append(n)
        by_name = self.graph.by_name
        aliased = aliased_slots(steps)  # an ATen fallback may return these buffers or views of them
        frees_at: dict[int, list[int]] = {}
        for s, st in last_use.items():
            if s not in keep:
                frees_at.setdefault(st, []).append(s)
        # an ATen result's storage may be larger than its layout or start at an offset: it is freed,
        # not taken over
        layout_of = {s: self.layouts.get(names[0]) for s, names in names_of.items()}
        poolable = {s for s, names in names_of.items() if layout_of[s] is not None and s not in aliased
                    and all(n in by_name and by_name[n].kind != "extern" for n in names)}
        # a dead buffer held for a later allocation of its size stays allocated until then: where the
        # program's peak falls inside that wait, or no allocation takes it, it is freed when it dies
        unheld: set[int] = set()
        for _ in range(MAX_PEAK_PASSES):
            out, holds, untaken = _place_frees(steps, frees_at, layout_of, poolable - unheld)
            peak = _peak_step(out)
            spanning = {slot for slot, (died, taken, nbytes) in holds.items()
                        if died < peak < taken and nbytes > SMALL_BLOCK_BYTES}
            if not (spanning or untaken):
                break
            unheld |= spanning | untaken
        return out

    def _output_getter(self, o: Any):
        if isinstance(o, ReinterpretView):
            return StridedArg(self.slot(o.buffer.name), o.layout)
        if isinstance(o, Buffer):
            root = o.name
            while root in self.over_operands:   # stored over an operand: that one's tensor holds it
                root = self.over_operands[root]
            if self.layouts.get(root) != self.layouts.get(o.name):   # of another shape: a view of it
                return StridedArg(self.slot(o.name), self.layouts[o.name])
            return SlotOutput(self.slot(o.name))
        return ConstOutput(o)


def _place_frees(steps: list[Any], frees_at: dict[int, list[int]], layout_of: dict[int, Any], poolable: set[int]
                 ) -> tuple[list[Any], dict[int, tuple[int, int, int]], set[int]]:
    """The steps with frees after last uses and allocations taking over the storage of `poolable`
    dead buffers of their size; also each taken buffer's (position it died at, position taken,
    bytes), and the pooled buffers no allocation took (held until an ATen call or the end)."""
    out: list[Any] = []
    pool: dict[tuple, list[int]] = {}
    died_at: dict[int, int] = {}
    holds: dict[int, tuple[int, int, int]] = {}
    for i, step in enumerate(steps):
        if isinstance(step, ExternCall) and pool:
            # an ATen call allocates its own result, and a dead buffer held for a later taker
            # would sit beside it: one that could hold the result is freed first, so the
            # caching allocator gives its memory to the result (as torch.compile's wrappers
            # pass such buffers as out=; held, ConvNeXt's MLP peaked at twice its activation).
            # A small one stays held: the allocator serves small and large blocks apart
            largest = max((lay.storage_span() * itemsize(lay.dtype) for lay in step.out_layouts.values()),
                          default=0)
            released = [s for key, slots in pool.items() for s in slots
                        if largest and key[2] * itemsize(key[1]) >= max(largest, SMALL_BLOCK_BYTES + 1)]
            if released:
                for key in list(pool):
                    pool[key] = [s for s in pool[key] if s not in released]
                out.append(Free(tuple(released)))
        if isinstance(step, Alloc):
            lay = step.layout
            key = (str(lay.device), lay.dtype, lay.storage_span())
            step.reuse = None
            if pool.get(key) and not step.poison:
                step.reuse = pool[key].pop()
                holds[step.reuse] = (died_at[step.reuse], len(out), lay.storage_span() * itemsize(lay.dtype))
        out.append(step)
        to_free = []
        for s in frees_at.get(i, []):
            lay = layout_of[s]
            if s in poolable:
                pool.setdefault((str(lay.device), lay.dtype, lay.storage_span()), []).append(s)
                died_at[s] = len(out)
            else:
                to_free.append(s)
        if to_free:
            out.append(Free(tuple(to_free)))
    return out, holds, set(died_at) - set(holds)


def live_bytes(steps: Sequence[Any]) -> list[int]:
    """After each step, the bytes of the buffers the program has allocated (not its inputs); a dead
    buffer held for a later taker counts until it is taken."""
    live: dict[int, int] = {}
    total, out = 0, []
    for step in steps:
        if isinstance(step, Alloc):
            nbytes = live.pop(step.reuse) if step.reuse is not None else \
                step.layout.storage_span() * itemsize(step.layout.dtype)
            total += 0 if step.reuse is not None else nbytes
            live[step.slot] = nbytes
        elif isinstance(step, ExternCall):
            for slot, lay in step.out_layouts.items():
                if slot not in live:
                    live[slot] = lay.storage_span() * itemsize(lay.dtype)
                    total += live[slot]
        elif isinstance(step, Free):
            total -= sum(live.pop(slot, 0) for slot in step.slots)
        out.append(total)
    return out


def _peak_step(steps: Sequence[Any]) -> int:
    """The position at which the program's own buffers weigh most (the first, on a tie)."""
    live = live_bytes(steps)
    return max(range(len(live)), key=live.__getitem__, default=0)


def _without_updates(k: Any, stored: dict[str, str]) -> Any:
    """The input-update copy without the updates that their kernels store (`stored`: src -> input)."""
    pairs = [(d, s) for d, s in zip(*k.args[:2]) if getattr(s, "name", None) not in stored]
    return replace(k, args=([d for d, _ in pairs], [s for _, s in pairs]) + tuple(k.args[2:]))


def _walk(o: Any, fn) -> None:
    if isinstance(o, (list, tuple)):
        for x in o:
            _walk(x, fn)
    elif isinstance(o, ExternBuffer):
        fn(o)
