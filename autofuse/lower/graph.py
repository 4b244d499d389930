"""GraphLowering: one pass over a functional ATen FX graph, concrete shapes, producing IR.

Note: the graph is specialized to the real inputs of a call. Output metadata of every node comes
from running the op under FakeTensorMode on fakes of those inputs, so each lowering knows eager's
output size, dtype and strides. An op with no lowering, or whose lowering raises `Unsupported`,
becomes an `ExternKernel` (ATen fallback); its tensor inputs are realized first. An op whose
output shape depends on input data raises `DataDependentError`: the graph runs with ATen ops
(with a warning), or the error is raised under strict.
"""
from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch
import torch.fx
from torch._subclasses.fake_tensor import (
    DataDependentOutputException, DynamicOutputShapeException, FakeTensorMode,
)
from torch.utils._pytree import tree_map

from ..ir.index import contiguous_strides, is_dense, make_vars, non_overlapping
from ..ir.ops import analyze
from ..ir.values import (
    Buffer, ComputedBuffer, ExternBuffer, ExternKernel, InputBuffer, Layout, Pointwise, PointwiseBody,
    ReinterpretView, TensorValue, is_tensor_value,
)
from .eager_strides import with_eager_strides
from .convolution import channels_last_strides
from .column_partials import split_column_sums
from .conv_layout import conv_sites, is_training_graph
from .extern_args import align_operands, broadcast_operands
from .registry import LOWERINGS, Unsupported


class LoweringError(RuntimeError):
    pass


# output-node meta key set by capture: the index of the first output that only the backward graph
# reads (a training forward graph's saved activations), whose layout the lowering is free to keep
SAVED_FROM = "autofuse_saved_from"


class DataDependentError(LoweringError):
    """An op whose output shape or value depends on input data (nonzero, a boolean-mask index,
    item): the graph cannot be specialized to concrete shapes and runs eagerly instead."""


def op_name(target: object) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return target.overloadpacket.__name__.lstrip("_")
    return getattr(target, "__name__", str(target))


@dataclass(frozen=True)
class ValuesOf:
    """An op that returns a dict (a user Triton kernel's wrapper returns the tensors it wrote by
    argument name), called for the tuple of its values in `keys` order."""
    op: Any
    keys: tuple

    def __call__(self, *args: Any, **kwargs: Any) -> tuple:
        out = self.op(*args, **kwargs)
        return tuple(out[k] for k in self.keys)


class GraphLowering:
    """Lowers one FX graph for one input signature; `buffers` lists realized nodes in order."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any], heuristics: "object",
                 realize_decisions: Mapping[str, bool] | None = None) -> None:
        self.gm = gm
        # FX node name -> realize (True) or recompute (False) a multi-use value; overrides heuristics
        self.realize_decisions = dict(realize_decisions or {})
        self.buffer_fx: dict[str, str] = {}  # buffer name -> FX node whose value it holds
        self.example_inputs = list(example_inputs)
        self.heuristics = heuristics
        self.buffers: list[ComputedBuffer | ExternKernel] = []
        self.inputs: list[InputBuffer | None] = []
        self.outputs: list[object] = []
        self.node: torch.fx.Node | None = None
        self.out: Any = None
        self._ids = itertools.count()
        self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
        self.env: dict[torch.fx.Node, Any] = {}
        self.fake_env: dict[torch.fx.Node, Any] = {}
        self.layout_copies: dict[int, tuple[Any, Any]] = {}  # id(value) -> (value, its copy in another layout)
        self.conv_layout: str | None = None  # the layout convolutions were lowered in, once one was
        self.conv_sites = conv_sites(gm)   # what the default conv layout is decided from
        self.graph_nodes = len(gm.graph.nodes)
        # a graph of GPU work runs its CPU ops (a value the model makes on the host from an input)
        # with ATen: generated for the CPU they would be the Triton interpreter's, far slower
        self.gpu_graph = any(_on_gpu(n.meta.get("val")) for n in gm.graph.nodes) or any(
            _on_gpu(a) for a in example_inputs)
        self.training = is_training_graph(gm)
        self.feeds_returned_activation = _feeds_returned_activation(gm)
        self.input_updates: list[tuple[InputBuffer, TensorValue]] = []  # (input, its new value): lower/mutation.py
        # buffers whose rows are padded to 16 bytes with zeros, the value a view of their first
        # columns: padded products' results (lower/matmul.py)
        self.padded_rows: set[str] = set()
        # a counting sort's outputs (buffer names) -> what it computed on the way (lower/sort.py):
        # each key's count, each key's rank, which later ops read instead of computing again
        self.counting_sorts: dict[str, Any] = {}

    # ---- naming and buffers -------------------------------------------------------------
    def new_name(self, prefix: str = "buf") -> str:
        return f"{prefix}{next(self._ids)}"

    def realize(self, value: TensorValue, like: torch.Tensor | None = None) -> Buffer | ReinterpretView:
        """Put a lazy value in memory (eager's strides when known and dense). Every FX node bound
        to the same lazy value reads the buffer from then on instead of recomputing it."""
        if not isinstance(value, Pointwise):
            return value
        holders = [n for n, v in self.env.items() if v is value]
        if like is None and holders and isinstance(self.fake_env.get(holders[0]), torch.Tensor):
            like = self.fake_env[holders[0]]
        size = tuple(value.size)
        if like is not None and tuple(like.shape) == size and is_dense(size, like.stride()):
            layout = Layout(value.device, value.dtype, size, tuple(int(s) for s in like.stride()))
        else:
            layout = Layout.contiguous(value.device, value.dtype, size)
        buf = ComputedBuffer(self.new_name(), layout, PointwiseBody(size, value.inner_fn), value.origins)
        self.buffers.append(buf)
        self._rebind(value, buf, holders)
        return buf

    def _rebind(self, value: Pointwise, stored: Buffer | ReinterpretView, holders: list[torch.fx.Node]) -> None:
        """The FX nodes bound to lazy `value` read `stored` from now on."""
        if holders:
            name = stored.name if isinstance(stored, Buffer) else stored.buffer.name
            self.buffer_fx[name] = holders[0].name
        for n in holders:
            self.env[n] = stored

    def realize_broadcast(self, value: Pointwise, like: Any) -> ReinterpretView | None:
        """A value eager lays out expanded (`like`: its FakeTensor, stride 0 along broadcast dims),
        stored once along those dims and viewed with eager's strides; None when like is not a tensor
        of the value's size, no dim is broadcast or the other dims overlap."""
        size = tuple(int(s) for s in value.size)
        if not isinstance(like, torch.Tensor) or tuple(like.shape) != size:
            return None
        stride = tuple(int(s) for s in like.stride())
        stored = tuple(1 if st == 0 else sz for sz, st in zip(size, stride))
        if stored == size or not non_overlapping(stored, stride):
            return None
        layout = Layout(value.device, value.dtype, stored, stride, 0)
        buf = self.add_computed(ComputedBuffer(self.new_name(), layout, PointwiseBody(stored, value.inner_fn),
                                               value.origins))
        return ReinterpretView(buf, Layout(value.device, value.dtype, size, stride, 0))

    def add_computed(self, buf: ComputedBuffer) -> ComputedBuffer:
        self.buffers.append(buf)
        return buf

    def current_origins(self) -> frozenset[str]:
        return frozenset([op_name(self.node.target)]) if self.node is not None else frozenset()

    # ---- fallback ---------------------------------------------------------------------------
    def fallback(self, target: object, args: tuple, kwargs: dict, fake_out: Any) -> Any:
        reads: list[str] = []

        def prep(v: Any) -> Any:
            if is_tensor_value(v):
                r = self._realize_intermediate(v, None) if isinstance(v, Pointwise) else v
                reads.append(r.buffer.name if isinstance(r, ReinterpretView) else r.name)
                return r
            return v

        args, kwargs = broadcast_operands(self, target, tuple(args), kwargs)
        args = tree_map(prep, align_operands(self, target, args))
        kwargs = tree_map(prep, kwargs)
        fake_out = self._fake_for_layouts(target, args, kwargs, fake_out)
        keys = None
        if isinstance(fake_out, dict):   # outputs by name: the program's slots take them in key order
            keys = tuple(fake_out)
            target, fake_out = ValuesOf(target, keys), tuple(fake_out[k] for k in keys)
        name = self.new_name("extern")
        kernel = ExternKernel(name, target, args, kwargs, [], reads, self.current_origins())
        schema = getattr(target, "_schema", None)
        kernel.is_mutating = bool(schema is not None and schema.is_mutable)

        def make_out(t: Any) -> Any:
            if isinstance(t, torch.Tensor):
                b = ExternBuffer(self.new_name(), Layout.like(t), kernel)
                return b
            return t

        kernel.outputs = tree_map(make_out, fake_out)
        self.buffers.append(kernel)
        return kernel.outputs if keys is None else dict(zip(keys, kernel.outputs))

    # ---- main loop ----------------------------------------------------------------------------
    def run(self) -> "GraphLowering":
        placeholder_idx = 0
        for node in self.gm.graph.nodes:
            self.node = node
            if node.op == "placeholder":
                real = self.example_inputs[placeholder_idx]
                if isinstance(real, torch.Tensor):
                    buf = InputBuffer(f"arg{placeholder_idx}", Layout.like(real), placeholder_idx)
                    self.inputs.append(buf)
                    self.env[node] = buf
                    self.fake_env[node] = self.fake_mode.from_tensor(real)
                else:
                    self.inputs.append(None)
                    self.env[node] = real
                    self.fake_env[node] = real
                placeholder_idx += 1
            elif node.op == "call_function":
                before = len(self.buffers)
                self._lower_call(node)
                self._name_new_buffers(before, node.name)
            elif node.op == "get_attr":
                sub = getattr(self.gm, node.target)
                if isinstance(sub, torch.fx.GraphModule):   # a higher-order op's body (cond, flex_attention)
                    self.env[node] = self.fake_env[node] = sub
                    continue
                # CompiledGraph lifts tensor constants to inputs first (capture/constants.py)
                raise LoweringError(f"get_attr {node.target}: lift constant tensors to graph inputs "
                                    "(autofuse.capture.constants.lift_constants) before lowering")
            elif node.op == "output":
                before = len(self.buffers)
                self._lower_output(node)
                self._name_new_buffers(before, "output")
        self.node = None
        split_column_sums(self)
        return self

    def _name_new_buffers(self, start: int, base: str) -> None:
        """Stable ids: FX node names are structural (op name + occurrence), as is lowering order."""
        for k, b in enumerate(self.buffers[start:]):
            b.node_id = base if k == 0 else f"{base}.{k}"
            self.buffer_fx.setdefault(b.name, base)

    def _lower_call(self, node: torch.fx.Node) -> None:
        args = torch.fx.node.map_arg(node.args, lambda n: self.env[n])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: self.env[n])
        fargs = torch.fx.node.map_arg(node.args, lambda n: self.fake_env[n])
        fkwargs = torch.fx.node.map_arg(node.kwargs, lambda n: self.fake_env[n])
        if node.target is operator.getitem:   # one output of a multi-output lowering (max pooling's values)
            item = args[0][args[1]]
            self.fake_env[node] = fargs[0][fargs[1]]
            is_lazy = isinstance(item, Pointwise)
            self.env[node] = self._maybe_realize(node, item, self.fake_env[node]) if is_lazy else item
            return
        try:
            fake_out = self._fake_call(node, fargs, fkwargs)
        except (DynamicOutputShapeException, DataDependentOutputException) as e:
            raise DataDependentError(
                f"{node.target} ({node.name}): its output depends on the values of its inputs "
                f"({type(e).__name__}: {e}), and autofuse lowers graphs of concrete shapes only") from e
        fake_out = with_eager_strides(node.target, fargs, fkwargs, fake_out, self.fake_mode)
        self.fake_env[node] = fake_out
        self.out = fake_out
        self._fake_args = fargs
        # complex values have no Triton type: every op that reads or makes one runs as ATen
        aten_only = _touches_complex(fargs, fkwargs, fake_out) or (self.gpu_graph and _on_host(fake_out))
        lowering = None if aten_only else LOWERINGS.lookup(node.target)
        result = None
        if lowering is not None:
            try:
                result = lowering(self, *args, **kwargs)
            except Unsupported:
                result = None
        self.out = None  # a body that reads g.out after its node was lowered fails loudly, not wrongly
        if result is None:
            if self._realize_viewed_operands(node):
                args = torch.fx.node.map_arg(node.args, lambda n: self.env[n])
                kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: self.env[n])
            self.node, self._fake_args = node, fargs
            self.out = fake_out
            result = self.fallback(node.target, args, kwargs, fake_out)
            self.out = None
        elif isinstance(result, Pointwise):
            result = result.with_origins(self.current_origins())
            result = self._maybe_realize(node, result, fake_out)
        self.env[node] = result

    def _fake_call(self, node: torch.fx.Node, fargs: Any, fkwargs: Any) -> Any:
        """The op run on fakes. A higher-order op whose fake rule needs a symbolic shape environment
        (`while_loop`; this mode has none, since shapes are concrete) takes the outputs the capture
        recorded on the node instead."""
        try:
            with self.fake_mode:
                return node.target(*fargs, **fkwargs)
        except AttributeError:
            recorded = node.meta.get("val")
            if not isinstance(node.target, torch._ops.HigherOrderOperator) or recorded is None:
                raise

            def fake(t: Any) -> Any:
                if not isinstance(t, torch.Tensor):
                    return t
                with self.fake_mode:
                    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
            return tree_map(fake, recorded)

    def _realize_viewed_operands(self, node: torch.fx.Node) -> bool:
        """An extern op reading a view of a lazy value that is transposed (the backward's
        `permute(grad)` fed to a matrix product) or that the graph returns (attention weights
        returned and multiplied by the values): realize the value in eager's layout and re-lower the
        views over its buffer, so the op reads a strided view of it. Lowered lazily instead, the view
        would be written out as its own buffer — in the view's order, its loads or its stores
        strided; beside the returned value, the same bytes stored twice. True when an operand changed."""
        changed = False
        for arg in node.all_input_nodes:
            chain, src = self._view_chain(arg, _OPERAND_VIEW_PACKETS)
            if not chain or not isinstance(self.env.get(src), Pointwise):
                continue
            if not (any(n.target in _TRANSPOSING_VIEW_OPS for n in chain) or any(u.op == "output" for u in src.users)):
                continue
            fake = self.fake_env.get(src)
            if not isinstance(fake, torch.Tensor) or not is_dense(tuple(fake.shape), fake.stride()):
                continue
            self.node = src
            self.realize(self.env[src], fake)
            before = [self.env[v] for v in chain]
            self._relower_views(chain)
            changed |= any(self.env[v] is not b for v, b in zip(chain, before))
        return changed

    def _fake_for_layouts(self, target: object, args: tuple, kwargs: dict, fake_out: Any) -> Any:
        """The op's output for operands in the layouts they have here: where one is not in eager's
        layout (a channels-last activation), ATen's result follows it (a channels-last max pool), and
        the program must expect that layout rather than copy the result back on every call."""
        fargs = getattr(self, "_fake_args", None)
        if not isinstance(fargs, (list, tuple)) or len(fargs) != len(args) or kwargs and any(
                is_tensor_value(v) for v in kwargs.values()):
            return fake_out
        differ = False
        for a, f in zip(args, fargs):
            lay = getattr(a, "layout", None) if is_tensor_value(a) else None
            if lay is None:
                continue
            if not isinstance(f, torch.Tensor) or lay.offset or tuple(f.shape) != tuple(lay.size):
                return fake_out
            differ = differ or any(st != fs for st, fs, n in zip(lay.stride, f.stride(), lay.size) if n != 1)
        if not differ:
            return fake_out
        try:
            with self.fake_mode:
                fakes = [torch.empty_strided(a.layout.size, a.layout.stride, dtype=a.layout.dtype,
                                             device=a.layout.device) if is_tensor_value(a) else a for a in args]
                out = target(*fakes, **kwargs)
            out = with_eager_strides(target, fakes, kwargs, out, self.fake_mode)
        except Exception:  # noqa: BLE001 - no better prediction: the eager one (a mismatch is copied at run time)
            return fake_out
        same_shapes = tree_map(lambda t: tuple(t.shape) if isinstance(t, torch.Tensor) else None, out) == \
            tree_map(lambda t: tuple(t.shape) if isinstance(t, torch.Tensor) else None, fake_out)
        return out if same_shapes else fake_out

    def fake_arg(self, i: int) -> Any:
        return self._fake_args[i]

    def _maybe_realize(self, node: torch.fx.Node, value: Pointwise, fake_out: Any) -> TensorValue:
        info = analyze(value.inner_fn, make_vars("i", len(value.size)))
        num_uses = sum(_count_uses(u, node) for u in node.users)
        if node.name in self.realize_decisions:
            decided = self.realize_decisions[node.name]
            return self._realize_intermediate(value, fake_out, info.read_names) if decided else value
        if self.heuristics.should_realize(num_uses, info.num_reads, len(info.read_names), info.op_count):
            if self.conv_layout != "channels_last" and _permuted(fake_out) and not _returned_through_views(node):
                # read again by this graph's kernels only: row-major, as Inductor lays out its buffers
                return self.realize(value, torch.empty(tuple(value.size), device="meta"))
            return self._realize_intermediate(value, fake_out, info.read_names)
        return value

    def _realize_intermediate(self, value: Pointwise, fake_out: Any, reads: Sequence[str] | None = None) -> TensorValue:
        """A value the graph does not return, realized: in eager's layout, except that in a graph
        whose convolutions run channels-last a value computed from a channels-last buffer of its
        batch and channels (of its size, or pooled or resized from one) is stored channels-last
        too (`realize_channels_last`), so the activations between convolutions never change
        layout, nor do the max pool's indices beside its values."""
        size = tuple(int(s) for s in value.size)
        if self.conv_layout == "channels_last" and len(size) in (4, 5):
            if reads is None:  # the value's loads, found only where the answer matters
                reads = analyze(value.inner_fn, make_vars("i", len(size))).read_names
            layouts = self._layouts_by_name()

            def channels_last_of_its_kind(lay: Any) -> bool:
                have, stride = tuple(int(d) for d in lay.size), tuple(lay.stride)
                return len(have) == len(size) and (
                    (have[:2] == size[:2] and stride == channels_last_strides(have))
                    or _filled_in_memory_order(lay, size))
            if any((lay := layouts.get(r)) is not None and channels_last_of_its_kind(lay) for r in set(reads)):
                return self.realize_channels_last(value)
        return self.realize(value, fake_out if isinstance(fake_out, torch.Tensor) else None)

    def _layouts_by_name(self) -> dict[str, Layout]:
        """The layout of every buffer lowered so far, by name."""
        out: dict[str, Layout] = {b.name: b.layout for b in self.inputs if b is not None}

        def add(o: Any) -> None:
            if isinstance(o, Buffer):
                out[o.name] = o.layout
            elif isinstance(o, (list, tuple)):
                for x in o:
                    add(x)
        for b in self.buffers:
            add(b.outputs if isinstance(b, ExternKernel) else b)
        return out

    def _realize_output(self, value: Pointwise, like: Any) -> Buffer | ReinterpretView:
        """A graph output in eager's strides. When those are a permutation of a contiguous layout
        (an element-wise result over a transposed input keeps the input's strides), the kernel
        iterates in that memory order — its stores, and the loads of inputs laid out alike, are
        contiguous — and the output is a strided view of the buffer it fills."""
        size = tuple(value.size)
        if not (isinstance(like, torch.Tensor) and tuple(like.shape) == size and is_dense(size, like.stride())):
            return self.realize(value, like)
        stride = tuple(int(s) for s in like.stride())
        if all(stride[d] == s or size[d] == 1 for d, s in enumerate(contiguous_strides(size))):
            return self.realize(value, like)
        perm = tuple(sorted(range(len(size)), key=lambda d: (-stride[d], d)))
        return self.realize_in_order(value, perm, stride)

    def reads_memory_order(self, value: TensorValue) -> bool:
        """Does the value read a buffer that `realize_in_order` filled in channels-last memory order
        (N, *spatial, C)? A copy of it computed in that order too can share the buffer's kernel."""
        if not isinstance(value, Pointwise) or len(value.size) not in (4, 5):
            return False
        size = tuple(int(s) for s in value.size)
        layouts = self._layouts_by_name()
        reads = analyze(value.inner_fn, make_vars("i", len(size))).read_names
        return any((lay := layouts.get(r)) is not None and _filled_in_memory_order(lay, size) for r in set(reads))

    def realize_channels_last(self, value: TensorValue, order: str | None = None) -> Buffer | ReinterpretView:
        """The value stored channels-last, computed in the order `order` or else
        `Heuristics.channels_last_loops` says:
        in memory order (N, *spatial, C; loads and stores contiguous in one dim), or in logical order
        as 2-D tiles, which a consumer iterating N, C, *spatial (an NCHW output) can share. As with
        `realize`, the FX nodes bound to a lazy value read the stored one from then on: a ConvNeXt
        block's output, stored for the next block's depthwise convolution, was recomputed from the
        block's input and its MLP's output in the next residual add, which kept both alive across
        the next MLP's expansion."""
        size = tuple(int(s) for s in value.size)
        want = channels_last_strides(size)
        loops = order or self.heuristics.channels_last_loops
        logical = loops == "logical" or (loops == "auto" and self.node in self.feeds_returned_activation)
        if logical and isinstance(value, Pointwise):
            return self.realize(value, torch.empty_strided(size, want, device="meta"))
        stored = self.realize_in_order(value, (0, *range(2, len(size)), 1), want)
        if isinstance(value, Pointwise):
            self._rebind(value, stored, [n for n, v in self.env.items() if v is value])
        return stored

    def realize_in_order(self, value: TensorValue, perm: Sequence[int], stride: Sequence[int]) -> ReinterpretView:
        """The value written by a kernel that iterates its dims in the order `perm` (outermost
        first), so its stores are contiguous, and read back as a view with `stride` (the layout
        that order gives)."""
        size = tuple(int(s) for s in value.size)
        load = value.loader()

        def inner(ops, idx):
            src = [None] * len(size)
            for k, d in enumerate(perm):
                src[d] = idx[k]
            return load(ops, src)

        psize = tuple(size[d] for d in perm)
        stored = self.realize(Pointwise(value.device, value.dtype, psize, inner, getattr(value, "origins", frozenset())))
        return ReinterpretView(stored, Layout(value.device, value.dtype, size, tuple(stride)))

    def _view_chain(self, node: torch.fx.Node, packets: frozenset) -> tuple[list[torch.fx.Node], torch.fx.Node]:
        """The lazily lowered view ops (of these op packets) from node back to the value they view
        (last first), and that value."""
        chain, src = [], node
        while (src.op == "call_function" and getattr(src.target, "overloadpacket", None) in packets
               and src.target is not _aten.view.dtype   # a bitcast, not a strided view
               and isinstance(self.env.get(src), Pointwise) and src.args and isinstance(src.args[0], torch.fx.Node)):
            chain.append(src)
            src = src.args[0]
        return chain, src

    def _relower_views(self, chain: list[torch.fx.Node]) -> None:
        """Lower the view ops of chain again, over the buffer their source now is (first op first);
        a view that is not a strided view of it stays as it was, and so do the ops after it."""
        for view in reversed(chain):
            self.node, self.out = view, self.fake_env[view]
            self._fake_args = torch.fx.node.map_arg(view.args, lambda n: self.fake_env[n])
            lowered = LOWERINGS.lookup(view.target)(
                self, *torch.fx.node.map_arg(view.args, lambda n: self.env[n]),
                **torch.fx.node.map_arg(view.kwargs, lambda n: self.env[n]))
            self.out = None
            if not isinstance(lowered, (Buffer, ReinterpretView)):
                return
            self.env[view] = lowered

    def _realize_aliased_outputs(self, outputs: Sequence[Any]) -> None:
        """Outputs that eager returns as views of one value (y with y[0] and y.view(-1); two views of
        an intermediate) share its storage here too: the value is realized in eager's layout and the
        views are lowered over its buffer. Lowered lazily, each would be written out as a buffer of
        its own, and an in-place update of one returned tensor would not show in the others."""
        chains: dict[torch.fx.Node, list[list[torch.fx.Node]]] = {}
        for o in outputs:
            if isinstance(o, torch.fx.Node) and isinstance(self.env.get(o), (Pointwise, ComputedBuffer)):
                chain, src = self._view_chain(o, _ALIAS_VIEW_PACKETS)
                # the viewed value: lazy, or realized after its views were lowered (lazily)
                if isinstance(self.env.get(src), (Pointwise, ComputedBuffer)):
                    chains.setdefault(src, []).append(chain)
        for src, views in chains.items():
            if len(views) < 2 or not any(views):
                continue  # one returned tensor per value: no aliasing to keep
            fake = self.fake_env.get(src)
            if not isinstance(fake, torch.Tensor) or not is_dense(tuple(fake.shape), fake.stride()):
                continue
            if isinstance(self.env[src], Pointwise):
                self.node = src
                self.realize(self.env[src], fake)
            elif _strides_differ(self.env[src].layout, fake):
                continue  # stored in another layout than eager's: the outputs are copies either way
            for chain in views:
                self._relower_views(chain)

    def _lower_output(self, node: torch.fx.Node) -> None:
        if self.input_updates:  # after every other node; one multi-tensor launch per dtype and device
            groups: dict[tuple, list] = {}  # (a mixed list takes ATen's one-copy-per-tensor path)
            for dst, src in self.input_updates:
                groups.setdefault((dst.layout.dtype, str(dst.layout.device)), []).append((dst, src))
            self.node = node.prev  # the last update: the kernel's origin is copy_
            for pairs in groups.values():
                dsts, srcs = zip(*pairs)
                self.fallback(torch.ops.aten._foreach_copy_.default, (list(dsts), list(srcs)), {}, None)
            self.node = node
        outs = node.args[0]
        flat = outs if isinstance(outs, (list, tuple)) else [outs]
        saved_from = node.meta.get(SAVED_FROM, len(flat))
        self._realize_aliased_outputs(flat[:saved_from])
        for k, o in enumerate(flat):
            v = self.env[o] if isinstance(o, torch.fx.Node) else o
            fake = self.fake_env[o] if isinstance(o, torch.fx.Node) else None
            if k >= saved_from:  # read only by the backward graph: kept in the layout it was computed in
                if isinstance(v, Pointwise):
                    v = self._realize_intermediate(v, fake)
            elif isinstance(v, Pointwise) and (view := self.realize_broadcast(v, fake)) is not None:
                v = view  # returned expanded (through an alias of a view): eager's strides
            elif isinstance(v, Pointwise) and isinstance(o, torch.fx.Node) and len(o.users) == 1:
                v = self._realize_output(v, fake)  # read by nothing else: free to pick its loop order
            elif isinstance(v, Pointwise):
                v = self.realize(v, fake)
            elif isinstance(v, (ComputedBuffer, ExternBuffer, ReinterpretView)) and _strides_differ(v.layout, fake) \
                    and not (isinstance(v, ReinterpretView) and v.buffer.name in self.padded_rows):
                # computed in another layout (a channels-last convolution or activation): the graph
                # returns eager's strides. A product's padded rows are returned as the view of
                # them, as torch.compile returns them (lower/matmul.py)
                v = self.realize(Pointwise(v.device, v.dtype, tuple(v.size), v.loader()), fake)
            self.outputs.append(v)


_TRANSPOSING_VIEW_OPS = frozenset([torch.ops.aten.permute.default, torch.ops.aten.t.default,
                                   torch.ops.aten.transpose.int])
_aten = torch.ops.aten
# reshapes and transposes
_VIEW_PACKETS = frozenset([_aten.view, _aten._unsafe_view, _aten.reshape, _aten.permute, _aten.t, _aten.transpose])
# the views an extern operand is re-lowered through (_realize_viewed_operands): those, and the
# broadcast a matrix product's decomposition puts before them (a no-op expand)
_OPERAND_VIEW_PACKETS = _VIEW_PACKETS | {_aten.expand}
# every view op whose result, over a buffer, is a strided view of it (outputs keep eager's aliasing)
_ALIAS_VIEW_PACKETS = _VIEW_PACKETS | {_aten.expand, _aten.squeeze, _aten.unsqueeze, _aten.slice, _aten.select,
                                       _aten.as_strided, _aten.diagonal, _aten.narrow, _aten.alias}


def _filled_in_memory_order(lay: Layout, size: tuple[int, ...]) -> bool:
    """Is `lay` a buffer that `realize_in_order` filled in (N, *spatial, C) order, for a value of
    logical `size` (N, C, *spatial)?"""
    have = tuple(int(d) for d in lay.size)
    return len(have) == len(size) and (have[0], have[-1]) == size[:2] and tuple(lay.stride) == contiguous_strides(have)


def _feeds_returned_activation(gm: torch.fx.GraphModule) -> set[torch.fx.Node]:
    """The nodes from which a returned 4-D or 5-D value (one the caller sees, in eager's strides) is
    computed without a convolution between them (Heuristics.channels_last_loops "auto")."""
    output = next((n for n in reversed(gm.graph.nodes) if n.op == "output"), None)
    if output is None:
        return set()
    outs = output.args[0] if isinstance(output.args[0], (list, tuple)) else [output.args[0]]
    saved_from = output.meta.get(SAVED_FROM, len(outs))
    todo = [o for o in outs[:saved_from] if isinstance(o, torch.fx.Node)
            and isinstance(o.meta.get("val"), torch.Tensor) and o.meta["val"].dim() in (4, 5)]
    seen: set[torch.fx.Node] = set()
    while todo:
        n = todo.pop()
        if n in seen or n.op != "call_function":
            continue
        seen.add(n)
        if n.target is not torch.ops.aten.convolution.default:
            todo.extend(a for a in n.all_input_nodes)
    return seen


def _returned_through_views(node: torch.fx.Node) -> bool:
    """Does the graph return the node's value or a view of it? A returned tensor (a saved activation
    too: the backward graph was traced with its strides) keeps eager's layout."""
    todo, seen = [node], set()
    while todo:
        n = todo.pop()
        for u in n.users:
            if u.op == "output":
                return True
            if u not in seen and (getattr(u.target, "overloadpacket", None) in _ALIAS_VIEW_PACKETS
                                  or u.target is operator.getitem):
                seen.add(u)
                todo.append(u)
    return False


def _permuted(fake: Any) -> bool:
    """Is `fake` dense with strides other than row-major's (eager's result of an op over a
    transposed operand: Whisper's residual stream, added to its permuted convolution output)?
    Channels-last activations are not: a backward graph's gradients are channels-last because its
    convolutions run so, and its convolutions and norms read them in that layout."""
    if not isinstance(fake, torch.Tensor) or not is_dense(tuple(fake.shape), fake.stride()):
        return False
    size = tuple(int(s) for s in fake.shape)

    def laid_out(strides: tuple[int, ...]) -> bool:   # size-1 dims take any stride
        return all(st == c or n == 1 for st, c, n in zip(fake.stride(), strides, size))
    return not laid_out(contiguous_strides(size)) and not (len(size) in (4, 5) and laid_out(channels_last_strides(size)))


def _strides_differ(layout: Layout, fake: Any) -> bool:
    """Is `fake` a dense tensor of the layout's size with other strides?"""
    if not isinstance(fake, torch.Tensor) or tuple(fake.shape) != tuple(layout.size):
        return False
    size = tuple(layout.size)
    return is_dense(size, fake.stride()) and any(
        a != b for a, b, n in zip(layout.stride, fake.stride(), size) if n != 1)


def _count_uses(user: torch.fx.Node, node: torch.fx.Node) -> int:
    count = 0

    def visit(a: Any) -> Any:
        nonlocal count
        if a is node:
            count += 1
        return a

    torch.fx.node.map_aggregate((user.args, user.kwargs), visit)
    return count


def _on_gpu(v: Any) -> bool:
    return isinstance(v, torch.Tensor) and v.device.type == "cuda"


def _on_host(out: Any) -> bool:
    """Every tensor an op makes is on the CPU, one of them more than a scalar. A 0-dim CPU value
    (a scale computed from `torch.tensor(d)`) stays lowered: its ops fold into the GPU kernel that
    reads it, reading the lifted constant the program moves to the GPU (`place_constants`)."""
    tensors = [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
    return (bool(tensors) and all(t.device.type == "cpu" for t in tensors)
            and any(t.dim() > 0 for t in tensors))


def _touches_complex(*values: Any) -> bool:
    """Some tensor among values (nested in lists and tuples) has a complex dtype."""
    found = []
    tree_map(lambda v: found.append(isinstance(v, torch.Tensor) and v.is_complex()), values)
    return any(found)
