"""The Dynamo backend: Dynamo + AOTAutograd capture, then one CompiledGraph per ATen graph.

Note: a CompiledGraph is specialized lazily: each new input signature (shapes, strides, dtypes,
devices, integer values) is lowered and compiled once, so graphs whose sizes Dynamo made
symbolic run specialized instead of failing. Forward and backward graphs take the same path.
Kernels are generated for one size each, so a graph that meets a new size at every call (a
decoder's key/value cache growing by one token per step) would compile at every call: past
`CompileOptions.max_sizes` signatures a graph's new ones run with ATen ops (warned once, listed
by `explain`), as Dynamo itself runs a frame eagerly past its recompile limit.
"""
from __future__ import annotations

import logging
import warnings
from typing import Any, Callable, Sequence

import torch
import torch.fx

from ..logs import logger
from ..options import CompileOptions
from .attention_masks import fold_attention_masks
from .constants import lift_constants, place_constants
from .cse import eliminate_common_subexpressions
from .decompositions import decomposition_table
from .host_constants import fold_host_constants
from .grouped_heads import group_matmul_heads, read_grouped_heads
from .complex_pairs import complex_as_real_pairs
from .random_ops import generate_random
from .regions import RegionProgram, RegionsBySize, describe, split_by_symbols, worth_splitting
from .training import mark_saved_outputs, save_compared_inputs

log = logging.getLogger("autofuse")
compile_log = logger("compile")


def signature(args: Sequence[Any]) -> tuple:
    """The specialization key of a call (checked on every call of a graph Dynamo does not guard:
    one list comprehension, torch.Size and torch.device taken as they are)."""
    return tuple([(a.shape, a.stride(), a.dtype, a.device) if isinstance(a, torch.Tensor) else _value_key(a)
                  for a in args])


_stride = torch.Tensor.stride


def _strides(args: Sequence[Any]) -> tuple | None:
    """The inputs' strides, or None where an input is not a tensor (the full `signature` decides)."""
    try:
        return tuple(map(_stride, args))
    except TypeError:
        return None


def _value_key(a: Any) -> Any:
    if isinstance(a, torch.SymInt):
        return int(a)
    return a if isinstance(a, (int, float, bool, type(None))) else type(a).__name__


class CompiledGraph:
    """Callable for one ATen graph (boxed calling convention)."""

    def __init__(self, gm: torch.fx.GraphModule, options: CompileOptions, label: str,
                 unguarded: tuple[int, ...] | None = None) -> None:
        # on the instance: the wrappers Dynamo puts around a backward compiler copy the instance's
        # attributes (functools.wraps), not its class's, and AOTAutograd calls an unmarked one unboxed
        self._boxed_call = True
        fold_host_constants(gm)   # host work of constant values done once, at compile time
        self.constants = lift_constants(gm)  # appended to every call's inputs
        # what runs op by op where a signature is not compiled: ATen's own draws, not Philox in ATen ops
        self.eager_gm = gm
        self.gm = complex_as_real_pairs(gm if options.fallback_random else generate_random(gm))
        self._placed: tuple | None = None
        self.options = options
        self.label = label
        self.programs: dict[tuple, Any] = {}
        self.graphs: dict[tuple, Any] = {}  # CUDA-graphed programs, with options.cudagraphs
        # Dynamo guards the sizes, strides and dtypes of a graph it traced with static shapes, so such
        # a forward graph always sees one signature: the per-call signature check can be skipped
        sizes_static = _static_placeholders(gm)
        self.static = unguarded is None and label in ("forward", "inference") and sizes_static
        # a backward graph of static sizes gets its inputs' sizes, dtypes and devices from the
        # forward Dynamo guards; only strides could differ (a tangent AOTAutograd coerces to the
        # traced memory format, whose size-1 dims may keep other strides): the program is found by
        # the inputs' strides alone, one C-level stride() per input instead of `signature`'s four
        # a region of a split graph (`regions.py`) takes some inputs from ATen ops run between calls:
        # their sizes are known, their strides are whatever ATen returns, so the program is found by
        # the strides of those inputs (`unguarded`, their positions) alone
        self.unguarded = unguarded
        self.by_strides: dict[tuple, Any] | None = (
            {} if (label == "backward" and sizes_static) or unguarded is not None else None)
        # a graph with symbolic sizes is specialized anew for every size it meets (a growing sequence):
        # each specialization keeps the rules' configs instead of measuring candidates again
        self.compile_options = options if sizes_static else options.with_(autotune=False)
        self.lookups: list[Any] = []  # one Lookup per specialization that consulted the tuning DB
        self.compiled_sizes = 0       # signatures compiled (at most options.max_sizes)
        self._beyond: _EagerProgram | None = None  # runs the signatures past the limit
        # an inference graph with symbolic sizes whose compute is mostly of static sizes (a decoding
        # step over a growing cache) runs as static regions compiled once, for every size it meets
        # (a region of such a split, whose sizes are fixed per program, is not split again)
        self.regions = (self._split(gm) if label == "inference" and not sizes_static and self.gm is gm
                        and unguarded is None else None)

    def _split(self, gm: torch.fx.GraphModule) -> RegionProgram | RegionsBySize | None:
        region_options = self.options.with_(cudagraphs=False)

        def make_region(sub: torch.fx.GraphModule, unguarded: tuple[int, ...]) -> CompiledGraph:
            return CompiledGraph(sub, region_options, self.label, unguarded=unguarded)
        split = worth_splitting(gm)
        by_symbols = split_by_symbols(gm) if split is None else None
        if split is None and by_symbols is None:
            return None
        try:
            if split is not None:
                program: RegionProgram | RegionsBySize = RegionProgram(gm, split, make_region)
            else:
                fixed, split = by_symbols
                program = RegionsBySize(gm, fixed, split, make_region, self.options.max_sizes)
        except ValueError:
            return None
        compile_log.info("%s graph with symbolic sizes: %s", self.label, describe(program))
        return program

    def specialize(self, args: Sequence[Any]) -> Any:
        if isinstance(self.regions, RegionsBySize):
            return self.regions.program(args) or self._past_the_limit()
        if self.regions is not None:
            return self.regions
        key = signature(args)
        prog = self.programs.get(key)
        if prog is None and self.compiled_sizes >= self.options.max_sizes:
            prog = self.programs[key] = self._past_the_limit()
        if prog is None:
            self.compiled_sizes += 1
            try:
                artifacts = self._compile(args)
                prog = artifacts.program
                if self.options.recorder is not None:
                    self.options.recorder.record(self.label, self.gm, artifacts)
                if self.options.verbose:
                    log.warning("autofuse: compiled %s graph: %d kernels", self.label, len(artifacts.kernels))
                compile_log.info("%s graph compiled: %d kernels", self.label, len(artifacts.kernels))
            except Exception as e:  # noqa: BLE001 - the safety net is the point
                from ..plan.plan import PlanError
                if self.options.strict or isinstance(e, PlanError):
                    raise
                reason = f"{type(e).__name__}: {e}"
                warnings.warn(f"autofuse: could not compile a {self.label} graph ({reason}); "
                              "running it with ATen ops instead (strict=True raises; autofuse.explain lists it)")
                if self.options.recorder is not None:
                    self.options.recorder.record_eager(self.label, self.gm, reason)
                compile_log.info("%s graph left to ATen ops: %s", self.label, reason)
                prog = _EagerProgram(self.eager_gm)
            self.programs[key] = prog
        return prog

    def _past_the_limit(self) -> "_EagerProgram":
        if self._beyond is None:
            reason = (f"met more than {self.options.max_sizes} input sizes (max_sizes); kernels are generated per "
                      "size, so its other sizes run with ATen ops")
            warnings.warn(f"autofuse: a {self.label} graph {reason}")
            if self.options.recorder is not None:
                self.options.recorder.record_eager(self.label, self.gm, reason)
            compile_log.info("%s graph left to ATen ops for new sizes: %s", self.label, reason)
            self._beyond = _EagerProgram(self.eager_gm)
        return self._beyond

    def _compile(self, args: Sequence[Any]) -> Any:
        from ..driver import build
        artifacts, lookup = build(self.gm, args, self.label, self.compile_options)
        if lookup is not None:
            self.lookups.append(lookup)
        return artifacts

    def __call__(self, *call_args: Any) -> list:
        # boxed (one list of inputs, AOTAutograd's convention: the list is handed over, and emptied so
        # that each input is freed after its last use) or plain positional inputs
        boxed = len(call_args) == 1 and isinstance(call_args[0], list)
        args = call_args[0] if boxed else list(call_args)
        if self.constants:
            if self._placed is None:
                self._placed = place_constants(self.constants, args)
            given, args = args, [*args, *self._placed]
            given.clear()
        if self.static and len(self.programs) == 1:
            prog = next(iter(self.programs.values()))
        elif self.regions is not None:
            prog = self.regions if isinstance(self.regions, RegionProgram) else self.specialize(args)
        elif self.by_strides is not None:
            key = _strides(args) if self.unguarded is None else tuple([args[i].stride() for i in self.unguarded])
            prog = self.by_strides.get(key) if key is not None else None
            if prog is None:
                prog = self.specialize(args)
                if key is not None:
                    self.by_strides[key] = prog
        else:
            prog = self.specialize(args)
        # inference graphs only: a training graph's outputs are saved activations and gradients that
        # autograd keeps (a gradient can become .grad itself), which a replay would overwrite
        if self.options.cudagraphs and self.label == "inference" and not isinstance(prog, (_EagerProgram, RegionProgram)):
            return self._graphed(prog, args)
        return prog(args, steal=True)

    def _graphed(self, prog: Any, args: list) -> list:
        from ..runtime.cudagraph import GraphedProgram, can_graph
        if not can_graph(args):
            return prog(args)
        key = None if self.static else signature(args)  # a static graph has one signature
        g = self.graphs.get(key)
        if g is None:
            # a program that updates its inputs runs as it is: a replay would update static copies
            g = self.graphs[key] = prog if getattr(prog, "mutates_inputs", False) else GraphedProgram(prog, args)
        return g(args)


def _static_placeholders(gm: torch.fx.GraphModule) -> bool:
    """No input of the graph has a symbolic size or stride (and every input's meta value is known)."""
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        v = n.meta.get("val")
        if v is None or isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return False
        if isinstance(v, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in (*v.shape, *v.stride())):
            return False
    return True


class _EagerProgram:
    def __init__(self, gm: torch.fx.GraphModule) -> None:
        self.gm = gm
        self.kernels: list = []

    def __call__(self, args: Sequence[Any], steal: bool = False) -> list:
        out = self.gm(*args)
        return list(out) if isinstance(out, (list, tuple)) else [out]


def make_backend(options: CompileOptions | None = None) -> Callable[..., Any]:
    """A torch.compile backend that compiles every captured graph with autofuse."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    options = options or CompileOptions()

    def fw(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> CompiledGraph:
        mark_saved_outputs(gm)
        return CompiledGraph(gm, options, "forward")

    def bw(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> CompiledGraph:
        return CompiledGraph(gm, options, "backward")

    def inference(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> CompiledGraph:
        eliminate_common_subexpressions(gm)   # the partitioner does this for training graphs only
        read_grouped_heads(gm)
        group_matmul_heads(gm)
        return CompiledGraph(gm, options, "inference")

    # input mutations AOTAutograd can keep in the graph (BatchNorm's running statistics, a cache
    # buffer's update) run inside the compiled program, as with Inductor, instead of one copy_ call
    # per mutated input after it (`lower/mutation.py`). The forward saves what Inductor's forward
    # saves: the min-cut partition recomputes in the backward what fused pointwise work can
    # recompute from fewer saved bytes (a SwiGLU saves its two inputs, not silu(a) too), except
    # the inputs an amax's backward compares with its result (`save_compared_inputs`)
    def partition(joint: torch.fx.GraphModule, joint_inputs: Any, **kw: Any) -> Any:
        save_compared_inputs(joint)
        return min_cut_rematerialization_partition(joint, joint_inputs, compiler="inductor", **kw)

    return masks_folded(aot_autograd(fw_compiler=fw, bw_compiler=bw, inference_compiler=inference,
                                        partition_fn=partition,
                                        decompositions=decomposition_table(), keep_inference_input_mutations=True))


def masks_folded(backend: Callable[..., Any]) -> Callable[..., Any]:
    """backend, run on the Dynamo graph after its constant attention masks were folded."""

    def fold_then(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> Any:
        fold_attention_masks(gm, example_inputs)
        return backend(gm, example_inputs, **kwargs)

    return fold_then


def autofuse_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> Any:
    """Entry point registered as torch.compile(backend="autofuse")."""
    options = kwargs.pop("options", None)
    mode = kwargs.pop("mode", None)
    if isinstance(options, dict):  # torch.compile(m, backend="autofuse", options={...})
        options = CompileOptions.from_dict(options)
    elif mode is not None:         # torch.compile(m, backend="autofuse", mode="max-autotune")
        options = CompileOptions.from_mode(mode)
    return make_backend(options)(gm, example_inputs, **kwargs)


def register() -> None:
    """Make backend="autofuse" known to Dynamo even without the installed entry point."""
    from torch._dynamo.backends.registry import _BACKENDS, register_backend
    if "autofuse" not in _BACKENDS:
        register_backend(name="autofuse")(autofuse_backend)
