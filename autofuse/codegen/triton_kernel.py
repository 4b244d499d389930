"""Triton source for one fused group: pointwise, persistent reduction, or looped reduction.

Note: node bodies are evaluated on demand through `TritonOps`, with CSE per scope. A load of a
buffer produced inside the kernel returns the producer's value (legality guaranteed it is the
same element), so such a buffer is stored only if something outside the kernel reads it. In a
looped reduction, nodes are split into passes by how many in-kernel reductions they depend on;
pass k is one r loop, a reduction's value exists after its loop, and an r-loop producer needed
by a later pass is recomputed there. A split reduction (config.split > 1) stores partials, and its
last program per x block combines them and runs the epilogue (see split.py). A scan is an r node
whose value combines the row up to each position, carried across the loop's steps (see scan.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import sympy
import torch

from ..ir.index import fold_divmod, simplify_index
from ..ir.ops import MATH_OPS, OpsHandler
from ..schedule.loops import Placement
from ..schedule.nodes import SchedulerNode
from .cache_hints import hint, last_passes, varies_along_x
from .config import LaunchConfig
from .prelude import prelude
from .printer import print_expr, tl_dtype
from .early_loads import early_loads
from .online import LOG2E, chunk_width, online_pairs, strided_rows
from .options import KernelView, why_not_options
from .scan import SCAN_HELPERS, carry_init, is_scan_kernel, reverse_loop, scan_value
from .tiling import Tiling, choose_tiling, tile_header, tile_ranges, tiled_vars
from .split import SplitWorkspaces, combine_header, counter_reset, last_program_header, partial_header, split_chunk

INT32_MAX = 2**31 - 1

REDUCTION_DEFAULTS = {"sum": 0, "prod": 1, "any": 0, "all": 1}


@dataclass(frozen=True)
class KernelSource:
    name: str
    source: str
    arg_names: tuple[str, ...]
    kind: str  # "pointwise" | "reduction"
    numel: int
    rnumel: int
    config: LaunchConfig
    split: SplitWorkspaces | None = None  # a split reduction's workspaces and counters
    tile: Tiling | None = None  # a 2-D tiled pointwise kernel's (y, x) split (tiling.py)


@dataclass
class TV:
    """A Triton value: variable name and its torch dtype."""

    name: str
    dtype: torch.dtype

    def __str__(self) -> str:
        return self.name


def _is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point


def _template(name: str, dtype: torch.dtype) -> str:
    f = _is_float(dtype)
    t = {
        "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "truediv": "{0} / {1}",
        "floordiv": "tl.floor({0} / {1})" if f else "_floordiv({0}, {1})",
        "truncdiv": "_trunc({0} / {1})" if f else "{0} // {1}",
        "remainder": "_remainder_float({0}, {1})" if f else "_remainder_int({0}, {1})",
        "fmod": "{0} % {1}", "neg": "-{0}", "abs": "tl.abs({0})",
        "sign": "({0} > 0).to({T}) - ({0} < 0).to({T})",  # sign(nan) is 0, as in eager
        "reciprocal": "1.0 / {0}", "sqrt": "_sqrt({0})", "rsqrt": "_rsqrt({0})", "exp": "tl.exp({0})",
        "exp2": "tl.exp2({0})", "expm1": "_expm1({0})", "log": "tl.log({0})", "log2": "tl.log2({0})",
        "log1p": "_log1p({0})", "sin": "tl.sin({0})", "cos": "tl.cos({0})", "tan": "_tan({0})",
        "tanh": "_tanh({0})", "sigmoid": "1.0 / (1.0 + tl.exp(-{0}))", "erf": "tl.erf({0})", "pow": "_pow({0}, {1})",
        "floor": "tl.floor({0})", "ceil": "tl.ceil({0})", "round": "_round({0})", "trunc": "_trunc({0})",
        "maximum": "tl.maximum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)" if f else "tl.maximum({0}, {1})",
        "minimum": "tl.minimum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)" if f else "tl.minimum({0}, {1})",
        "relu": "tl.where({0} < 0, 0, {0})",
        "bitwise_and": "{0} & {1}", "bitwise_or": "{0} | {1}", "bitwise_xor": "{0} ^ {1}",
        "bitwise_not": "~{0}", "lshift": "{0} << {1}", "rshift": "{0} >> {1}",
        "lt": "{0} < {1}", "le": "{0} <= {1}", "gt": "{0} > {1}", "ge": "{0} >= {1}", "eq": "{0} == {1}",
        "ne": "{0} != {1}", "logical_and": "{0} & {1}", "logical_or": "{0} | {1}",
        "logical_xor": "{0} ^ {1}", "logical_not": "{0} == 0",
        "isnan": "{0} != {0}", "isinf": "tl.abs({0}) == float('inf')", "where": "tl.where({0}, {1}, {2})",
        "atan": "_atan({0})", "asin": "_asin({0})", "acos": "_acos({0})", "sinh": "_sinh({0})",
        "cosh": "_cosh({0})", "erfc": "_erfc({0})",
    }.get(name)
    if t is None:
        raise NotImplementedError(f"no Triton template for op {name}")
    return t


def _literal(value: Any, dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return "1" if value else "0"
    if _is_float(dtype):
        v = float(value)
        if v != v:
            return 'float("nan")'
        if v in (float("inf"), float("-inf")):
            return 'float("inf")' if v > 0 else 'float("-inf")'
        return repr(v)
    return str(int(value))


def _convert(text: str, dtype: torch.dtype) -> str:
    """Conversion of a value to dtype; bf16 goes through the prelude's correctly rounding helper."""
    if dtype == torch.bfloat16:
        return f"_to_bf16({text})"
    return f"{text}.to({tl_dtype(dtype)})"


class Scope:
    def __init__(self, parent: "Scope | None", indent: int) -> None:
        self.parent = parent
        self.cache: dict[str, TV] = {}
        self.node_values: dict[str, TV] = {}
        self.indent = indent

    def lookup(self, key: str) -> TV | None:
        s: Scope | None = self
        while s is not None:
            if key in s.cache:
                return s.cache[key]
            s = s.parent
        return None

    def node_value(self, name: str) -> TV | None:
        s: Scope | None = self
        while s is not None:
            if name in s.node_values:
                return s.node_values[name]
            s = s.parent
        return None


class KernelWriter(OpsHandler):
    """Emits one kernel. Acts as the ops handler while a node body runs. `role`: "kernel" (the
    whole group), or for a split reduction "partial" (r loop, partials to workspaces), then
    "combine" in the last program's block (partials to values, then the x-loop nodes)."""

    def __init__(self, name: str, members: Sequence[tuple[SchedulerNode, Placement]], numel: int, rnumel: int,
                 reduction_kernel: bool, stored: set[str], dtypes: dict[str, torch.dtype], spans: dict[str, int],
                 config: LaunchConfig, interpret: bool) -> None:
        self.name = name
        self.members = list(members)
        self.by_buffer = {n.name: (n, p) for n, p in members}
        self.numel, self.rnumel = numel, rnumel
        self.reduction_kernel = reduction_kernel
        self.stored = stored
        self.dtypes = dtypes
        self.config = config
        self.interpret = interpret
        self.lines: list[str] = []
        self.scope = Scope(None, 1)
        self.counter = 0
        self.inputs: list[str] = []
        self.outputs: list[str] = []
        self.mask_stack: list[str] = []
        self.current: tuple[SchedulerNode, Placement] | None = None
        self.indirect_names: dict[sympy.Symbol, str] = {}
        self.direct_reads: set[str] = set()              # buffers loaded at an index of x/r alone
        self.gathers: dict[str, dict[str, int]] = {}     # buffer -> {indirect index: elements it loads}
        self.persistent = config.persistent or not reduction_kernel
        self.split = config.split if reduction_kernel else 1
        self.role = "partial" if self.split > 1 else "kernel"
        self.rchunk = split_chunk(rnumel, self.split, config.RBLOCK) if self.split > 1 else 0
        why = why_not_options(config, KernelView(self.members, reduction_kernel, rnumel))
        assert why is None, f"{config} on kernel {name}: {why}"
        # a tiled pointwise kernel (tiling.py): yindex [YBLOCK, 1] and xindex [1, XBLOCK] index its tile
        self.tile = choose_tiling(self.members) if config.YBLOCK and not reduction_kernel else None
        self.online: dict[str, str] = {}  # sum -> the max it runs with, in the max's r loop (online.py)
        if config.online:
            self.online = online_pairs(self.members)
        self.chunk = self._online_chunk() if self.online else 1
        self.pass_index = 0   # the looped reduction's pass being emitted (cache hints)
        self.last_pass: dict[str, int] = {}
        self.workspaces: dict[str, torch.dtype] = {}  # partial kernel: reduction -> its workspace's dtype
        self.hoist: tuple[Scope, int] | None = None  # in an r loop: the scope and line before it (_hoisted_load)
        span = max(numel * max(rnumel, 1), numel * self.split, self.split * self.rchunk)
        self.use_int64 = span > INT32_MAX or any(v > INT32_MAX for v in spans.values())

    def _online_chunk(self) -> int:
        """online.chunk_width for the widest buffer the r loop reads (its load sets the thread layout);
        1 where the rows are strided (online.strided_rows)."""
        if strided_rows(self.members, tuple(self.online.values())):
            return 1
        reads = {r for n, p in self.members if p.cls in ("r", "red") for r in n.read_names} - set(self.by_buffer)
        size = max((self.dtypes[r].itemsize for r in reads if r in self.dtypes), default=4)
        c = self.config
        return chunk_width(c.XBLOCK, c.RBLOCK, c.num_warps, size)

    # ---- emission helpers ---------------------------------------------------------------
    def emit(self, line: str) -> None:
        self.lines.append("    " * self.scope.indent + line)

    def cse(self, expr: str, dtype: torch.dtype) -> TV:
        key = f"{expr}::{dtype}"
        hit = self.scope.lookup(key)
        if hit is not None:
            return hit
        name = f"tmp{self.counter}"
        self.counter += 1
        self.emit(f"{name} = {expr}")
        tv = TV(name, dtype)
        self.scope.cache[key] = tv
        return tv

    def push_scope(self) -> None:
        self.scope = Scope(self.scope, self.scope.indent + 1)

    def pop_scope(self) -> None:
        assert self.scope.parent is not None
        self.scope = self.scope.parent

    # ---- index handling --------------------------------------------------------------------
    def _shape(self, cls: str) -> str:
        if self.tile is not None:
            return "[YBLOCK, XBLOCK]"
        if not self.reduction_kernel:
            return "[XBLOCK]"
        return "[XBLOCK, RBLOCK]" if cls in ("r", "red") else "[XBLOCK, 1]"

    def _mask(self, cls: str) -> str:
        base = "xmask" if (not self.reduction_kernel or cls == "x") else "xrmask"
        if self.mask_stack:
            return " & ".join([base] + self.mask_stack)
        return base

    def index_str(self, index: sympy.Expr, shape_cls: str | None = None) -> str:
        node, pl = self.current
        cls = shape_cls or pl.cls
        # divisions the node's ranges make trivial dropped (a view of a view), then in kernel terms;
        # a contiguous multi-dim index folds back to the flat xindex / rindex
        ranges = dict(zip(node.vars, node.sizes)) | dict(zip(node.rvars, node.rsizes))
        index = simplify_index(sympy.sympify(index), ranges)
        kvars = tiled_vars(node, self.tile) if self.tile is not None else pl.kernel_vars(node)
        index = simplify_index(index.xreplace(kvars), self.kernel_ranges)
        index = fold_divmod(sympy.expand(index))
        if not index.free_symbols:
            return f"tl.full({self._shape(cls)}, {int(index)}, {'tl.int64' if self.use_int64 else 'tl.int32'})"
        return print_expr(index, self.indirect_names)

    @property
    def kernel_ranges(self) -> dict[sympy.Symbol, int]:
        """xindex and rindex below numel and rnumel (a lane past them is masked: its address is never used)."""
        if self.tile is not None:
            return tile_ranges(self.tile)
        return {sympy.Symbol("xindex", integer=True, nonnegative=True): self.numel,
                sympy.Symbol("rindex", integer=True, nonnegative=True): max(self.rnumel, 1)}

    def pointer_index(self, index: sympy.Expr, shape_cls: str) -> str:
        """Offsets of a load/store with the full block shape of `shape_cls`: an index that does not
        vary along x (a size-1 or broadcast dim) or along r would otherwise give a pointer smaller
        than its mask/value, which tl.load/tl.store do not broadcast."""
        text = self.index_str(index, shape_cls)
        if text.startswith("tl.full("):
            return text
        if self.tile is not None:  # a tile's offsets vary along both y and x
            both = "xindex" in text and "yindex" in text
            return text if both else f"tl.broadcast_to({text}, {self._shape(shape_cls)})"
        need_r = self.reduction_kernel and shape_cls in ("r", "red")
        if "xindex" in text and ("rindex" in text or not need_r):
            return text
        return f"tl.broadcast_to({text}, {self._shape(shape_cls)})"

    # ---- OpsHandler --------------------------------------------------------------------------
    def load(self, name: str, index: sympy.Expr) -> TV:
        if name in self.by_buffer:
            return self.value_of(name)
        if name not in self.inputs:
            self.inputs.append(name)
        ptr = f"in_ptr{self.inputs.index(name)}"
        dtype = self.dtypes[name]
        node, pl = self.current
        if sympy.sympify(index).free_symbols & set(self.indirect_names):
            self.gathers.setdefault(name, {})[str(index)] = self.numel * (self.rnumel if pl.cls in ("r", "red") else 1)
        else:
            self.direct_reads.add(name)
        cdt = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
        hoisted = self._hoisted_load(ptr, index, dtype, cdt)
        if hoisted is not None:
            return hoisted
        policy = self._cache_hint(name, index)
        ep = f", eviction_policy='{policy}'" if policy else ""
        text = f"tl.load({ptr} + ({self.pointer_index(index, pl.cls)}), {self._mask(pl.cls)}, other=0{ep})"
        return self.cse(text + self._load_cast(dtype), cdt)

    @staticmethod
    def _load_cast(dtype: torch.dtype) -> str:
        if dtype == torch.bool:
            return ".to(tl.int1)"
        return ".to(tl.float32)" if dtype in (torch.float16, torch.bfloat16) else ""

    def _hoisted_load(self, ptr: str, index: sympy.Expr, dtype: torch.dtype, cdt: torch.dtype) -> TV | None:
        """A load inside an r loop whose address does not vary along r (a norm's shift, a softmax's
        max read back) issued once per row before the loop, as an [XBLOCK, 1] value the loop's blocks
        broadcast against, instead of one broadcast load per r element on every step. Not under
        masked() (its mask may vary along r) nor through an indirect index."""
        node, pl = self.current
        if (self.hoist is None or pl.cls not in ("r", "red") or self.mask_stack
                or sympy.sympify(index).free_symbols & set(self.indirect_names)):
            return None
        text = self.index_str(index, "x")
        if "rindex" in text:
            return None
        scope, _ = self.hoist
        body = f"tl.load({ptr} + ({self.pointer_index(index, 'x')}), xmask, other=0){self._load_cast(dtype)}"
        key = f"{body}::{cdt}"
        hit = scope.lookup(key)
        if hit is not None:
            return hit
        tv = TV(f"tmp{self.counter}", cdt)
        self.counter += 1
        at = self.hoist[1]
        self.lines.insert(at, "    " * scope.indent + f"{tv.name} = {body}")
        self.hoist = (scope, at + 1)
        scope.cache[key] = tv
        return tv

    def gathered_elements(self, name: str) -> int | None:
        """Elements the kernel loads from `name` when every load of it is a gather (its index read
        from memory), else None (the kernel streams the buffer)."""
        if name in self.direct_reads or name not in self.gathers:
            return None
        return sum(self.gathers[name].values())

    def _cache_hint(self, name: str, index: sympy.Expr) -> str | None:
        """cache_hints.py's policy for a direct load of an r-loop node outside masked() regions."""
        node, pl = self.current
        if (not self.config.cache_hints or pl.cls not in ("r", "red") or self.mask_stack
                or sympy.sympify(index).free_symbols & set(self.indirect_names)):
            return None
        return hint(not varies_along_x(index, node, pl), self.persistent, self.pass_index,
                    self.last_pass.get(name, self.pass_index))

    def constant(self, value: Any, dtype: torch.dtype) -> TV:
        # rank of the kernel's blocks: tl.broadcast_to and tl.store do not add leading dims
        shape = "[1, 1]" if self.reduction_kernel or self.tile is not None else "[1]"
        return self.cse(f"tl.full({shape}, {_literal(value, dtype)}, {tl_dtype(dtype)})", dtype)

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> TV:
        if not expr.free_symbols:
            return self.constant(int(expr), dtype)
        return self.cse(_convert(f"({self.index_str(expr)})", dtype), dtype)

    def to_dtype(self, value: TV, dtype: torch.dtype) -> TV:
        if value.dtype == dtype:
            return value
        if dtype == torch.bool:
            return self.cse(f"({value} != 0)", dtype)
        return self.cse(_convert(value.name, dtype), dtype)

    def masked(self, mask: TV, body: Callable[[], TV], other: Any) -> TV:
        self.mask_stack.append(mask.name)
        try:
            result = body()
        finally:
            self.mask_stack.pop()
        o = self.constant(other, result.dtype)
        return self.cse(f"tl.where({mask}, {result}, {o})", result.dtype)

    def indirect(self, value: TV, size: int) -> sympy.Symbol:
        wrapped = self.cse(f"tl.where({value} < 0, {value} + {size}, {value})", value.dtype)
        sym = sympy.Symbol(wrapped.name, integer=True)
        self.indirect_names[sym] = wrapped.name
        return sym

    def op(self, name: str, *args: TV) -> TV:
        rule = MATH_OPS[name]
        dtype = args[0].dtype if rule == "same" else (torch.bool if rule == "bool" else args[1].dtype)
        src = args[0].dtype
        if name == "tanh" and self.config.fast_tanh and src == torch.float32:
            return self.cse(f"_tanh_approx({args[0]})", dtype)  # legality: fast_math.py
        text = _template(name, src).format(*[a.name for a in args], T=tl_dtype(dtype))
        return self.cse(text, dtype)

    # ---- nodes ---------------------------------------------------------------------------------
    def value_of(self, name: str) -> TV:
        hit = self.scope.node_value(name)
        if hit is not None:
            return hit
        node, pl = self.by_buffer[name]
        if pl.cls == "red":
            raise RuntimeError(f"reduction {name} used before its loop finished")
        saved = self.current
        self.current = (node, pl)
        try:
            value = scan_value(self, node) if node.kind == "scan" else node.run_body(self)
        finally:
            self.current = saved
        self.scope.node_values[name] = value
        return value

    def store(self, node: SchedulerNode, pl: Placement, value: TV) -> None:
        if self.role == "partial" and pl.cls == "red":
            self._store_partial(node, value)
            return
        if node.name not in self.stored:
            return
        self.outputs.append(node.name)
        ptr = f"out_ptr{len(self.outputs) - 1}"
        saved = self.current
        self.current = (node, pl)
        # a reduction's value is [XBLOCK, 1]: its store has the shape of an x-loop node's
        shape_cls = "x" if pl.cls == "red" else pl.cls
        idx = self.pointer_index(node.write.index, shape_cls)
        self.current = saved
        dt = node.buffer.dtype
        v = value.name if value.dtype == dt else _convert(value.name, dt)
        mask = "xmask" if (not self.reduction_kernel or pl.cls in ("x", "red")) else "xrmask"
        cm = ", cache_modifier='.cs'" if self.config.cache_hints and not self.reduction_kernel else ""
        self.emit(f"tl.store(out_ptr_placeholder_{ptr} + ({idx}), {v}, {mask}{cm})")

    def emit_pointwise(self, node: SchedulerNode, pl: Placement) -> None:
        self.store(node, pl, self.value_of(node.name))

    # ---- split reductions (split.py) -----------------------------------------------------------
    def _store_partial(self, node: SchedulerNode, value: TV) -> None:
        """This chunk's partial goes to row rsplit_id of the reduction's workspace [split, numel]."""
        ws_dtype = torch.int8 if value.dtype == torch.bool else value.dtype
        k = len(self.workspaces)
        self.workspaces[node.name] = ws_dtype
        v = value.name if value.dtype == ws_dtype else _convert(value.name, ws_dtype)
        self.emit(f"tl.store(ws_ptr{k} + (rsplit_id * xnumel + xindex), {v}, xmask)")

    def _combine_partials(self, node: SchedulerNode, pl: Placement, workspaces: dict[str, torch.dtype]) -> None:
        """The reduction's value from its partials, reduced like the r loop's final step."""
        rtype = node.buffer.body.reduction_type
        vals = self._partials(node.name, rtype, workspaces)
        if node.name in self.online:
            result = self._combine_online(node, vals, workspaces)
        else:
            result = self._finish(rtype, vals, None)
        self.scope.node_values[node.name] = result
        self.store(node, pl, result)

    def _partials(self, name: str, rtype: str, workspaces: dict[str, torch.dtype]) -> TV:
        k, dtype = list(workspaces).index(name), workspaces[name]
        # .cg: from L2, where the other programs' partials are (the acq_rel ticket orders them)
        return self.cse(f"tl.load(ws_ptr{k} + (sindex * xnumel + xindex), xsmask, "
                        f"other={self._default(rtype, dtype)}, cache_modifier=\".cg\")", dtype)

    def _combine_online(self, node: SchedulerNode, sums: TV, workspaces: dict[str, torch.dtype]) -> TV:
        """An online sum from its chunks' sums, each relative to its chunk's max: brought to the
        row's max M (its max's combined value) by exp(m_chunk - M); an empty or all -inf chunk
        adds 0; a row of -inf or with a NaN is NaN, as in eager."""
        a = self.online[node.name]
        maxes = self._partials(a, "max", workspaces)
        m = self.scope.node_value(a)
        terms = self.cse(f"tl.where({sums} == 0, 0.0, {sums} * tl.exp({maxes} - {m}))", sums.dtype)
        total = self.cse(f"tl.reduce({terms}, 1, _fast_sum)[:, None]", sums.dtype)
        return self.cse(f"tl.where({m} > float(\"-inf\"), {total}, float(\"nan\"))", sums.dtype)

    # ---- reductions --------------------------------------------------------------------------
    def _default(self, rtype: str, dtype: torch.dtype) -> str:
        if rtype in REDUCTION_DEFAULTS:
            return _literal(REDUCTION_DEFAULTS[rtype], dtype)
        lo = rtype in ("max", "argmax")
        if _is_float(dtype):
            return 'float("-inf")' if lo else 'float("inf")'
        if dtype == torch.bool:
            return "0" if lo else "1"
        info = torch.iinfo(dtype)
        return str(info.min if lo else info.max)

    def _reduction_input(self, node: SchedulerNode, pl: Placement) -> tuple[TV, str]:
        saved = self.current
        self.current = (node, pl)
        try:
            v = node.run_body(self)
        finally:
            self.current = saved
        rtype = node.buffer.body.reduction_type
        acc_dtype = node.buffer.body.src_dtype if rtype not in ("any", "all") else torch.bool
        if v.dtype != acc_dtype:
            v = self.to_dtype(v, acc_dtype)
        if acc_dtype == torch.bool:
            v = self.cse(f"{v}.to(tl.int8)", torch.int8)
        default = self._default(rtype, v.dtype)
        b = self.cse(f"tl.where(xrmask, tl.broadcast_to({v}, [XBLOCK, RBLOCK]), {default})", v.dtype)
        return b, default

    def _finish(self, rtype: str, vals: TV, idx: TV | None) -> TV:
        """Reduce [XBLOCK, RBLOCK] values (and indices) along r to [XBLOCK, 1], NaN like torch."""
        if rtype == "sum":
            return self.cse(f"tl.reduce({vals}, 1, _fast_sum)[:, None]", vals.dtype)
        if rtype == "prod":
            return self.cse(f"tl.reduce({vals}, 1, _prod_combine)[:, None]", vals.dtype)
        if rtype == "any":
            return self.cse(f"(tl.reduce({vals}, 1, _fast_max)[:, None] != 0)", torch.bool)
        if rtype == "all":
            return self.cse(f"(tl.reduce({vals}, 1, _fast_min)[:, None] != 0)", torch.bool)
        if rtype in ("max", "min") and _is_float(vals.dtype) and not self.interpret:
            # one reduction: the NaN-propagating max/min instruction is the combine
            return self.cse(f"tl.reduce({vals}, 1, _{rtype}_nan)[:, None]", vals.dtype)
        fast = "_fast_max" if rtype in ("max", "argmax") else "_fast_min"
        best = self.cse(f"tl.reduce({vals}, 1, {fast})[:, None]", vals.dtype)
        if rtype in ("max", "min"):
            if not _is_float(vals.dtype):
                return best
            # the interpreter reduces a jit combine element by element: Triton's own max/min and a NaN test
            isnan = self.cse(f"({vals} != {vals})", torch.bool)
            has_nan = self.cse(f"(tl.reduce({isnan}.to(tl.int8), 1, _fast_max)[:, None] != 0)", torch.bool)
            return self.cse(f"tl.where({has_nan}, float(\"nan\"), {best})", vals.dtype)
        if not _is_float(vals.dtype):
            pick = self.cse(f"tl.where({vals} == {best}, {idx}, 2147483647)", idx.dtype)
            return self.cse(f"tl.reduce({pick}, 1, _fast_min)[:, None].to(tl.int64)", torch.int64)
        # a NaN wins (torch): its index taken below 0 by the r extent, so one min finds the first
        # NaN if there is one, else the first best value (`best` ignores NaNs)
        r = max(self.rnumel, 1)
        pick = self.cse(f"tl.where({vals} != {vals}, {idx} - {r}, tl.where({vals} == {best}, {idx}, 2147483647))",
                        idx.dtype)
        first = self.cse(f"tl.reduce({pick}, 1, _fast_min)[:, None]", idx.dtype)
        return self.cse(f"tl.where({first} < 0, {first} + {r}, {first}).to(tl.int64)", torch.int64)

    def emit_persistent_reduction(self, node: SchedulerNode, pl: Placement) -> None:
        rtype = node.buffer.body.reduction_type
        v, _ = self._reduction_input(node, pl)
        idx = None
        if rtype in ("argmax", "argmin"):
            idx = self.cse("tl.broadcast_to(rindex, [XBLOCK, RBLOCK])", torch.int32)
        result = self._finish(rtype, v, idx)
        self.scope.node_values[node.name] = result
        self.store(node, pl, result)

    # ---- whole kernel ---------------------------------------------------------------------------
    def _full_x(self) -> bool:
        """Every x lane of every block is in range, so the mask is a constant Triton folds away (no
        compare, no select, unpredicated loads): the sizes are fixed per specialization."""
        return self.config.XBLOCK > 0 and self.numel % self.config.XBLOCK == 0

    def _full_r(self) -> bool:
        """The same along r: a persistent row fits RBLOCK exactly, or the loop's steps (a split's
        chunks, each a multiple of RBLOCK) tile rnumel exactly."""
        rb = self.config.RBLOCK
        if self.split > 1:
            return self.rchunk * self.split == self.rnumel
        return self.rnumel == rb if self.persistent else rb > 0 and self.rnumel % rb == 0

    def _mask_line(self, name: str, cond: str, full: bool, shape: str) -> str:
        return f"{name} = tl.full({shape}, True, tl.int1)" if full else f"{name} = {cond}"

    def _rmask(self) -> str:
        return self._mask_line("rmask", "rindex < rnumel", self._full_r(), "[1, RBLOCK]")

    def _loop_header(self) -> list[str]:
        i64 = ".to(tl.int64)" if self.use_int64 else ""
        full_x = self._full_x()
        if self.tile is not None:
            return tile_header(self.tile, self.config.YBLOCK, self.config.XBLOCK, i64)
        if not self.reduction_kernel:
            return [f"xoffset = tl.program_id(0){i64} * XBLOCK",
                    "xindex = xoffset + tl.arange(0, XBLOCK)",
                    self._mask_line("xmask", "xindex < xnumel", full_x, "[XBLOCK]")]
        lines = [f"xoffset = tl.program_id(0){i64} * XBLOCK",
                 "xindex = xoffset + tl.arange(0, XBLOCK)[:, None]",
                 self._mask_line("xmask", "xindex < xnumel", full_x, "[XBLOCK, 1]")]
        if self.role == "partial":
            lines += partial_header(self.rchunk, i64)
        return lines

    def phases(self) -> dict[str, int]:
        phase: dict[str, int] = {}
        for node, pl in self.members:
            p = 0
            for dep in node.read_names:
                if dep in self.by_buffer and dep in phase:
                    prod_node, prod_pl = self.by_buffer[dep]
                    after = prod_pl.cls == "red" and self.online.get(node.name) != dep
                    p = max(p, phase[dep] + (1 if after else 0))
            phase[node.name] = p
        return phase

    def generate(self) -> KernelSource:
        for line in self._loop_header():
            self.emit(line)
        i64 = ".to(tl.int64)" if self.use_int64 else ""
        x_loop = self.role != "partial"  # a split kernel's x-loop nodes run in its last program's block
        if not self.reduction_kernel:
            for node, pl in self.members:
                self.emit_pointwise(node, pl)
        elif self.persistent:
            base = "rsplit_start + " if self.role == "partial" else ""
            self.emit(f"rindex = {base}tl.arange(0, RBLOCK)[None, :]{i64}")
            self.emit(self._rmask())
            self.emit("xrmask = xmask & rmask")
            if self.config.early_loads:
                self._emit_early_loads()
            for node, pl in self.members:
                if pl.cls == "red":
                    self.emit_persistent_reduction(node, pl)
                elif x_loop or pl.cls == "r":
                    self.emit_pointwise(node, pl)
        else:
            self._generate_looped(i64, x_loop)
        if self.role == "partial":
            self._emit_last_program(i64)
        return self._assemble()

    def _emit_last_program(self, i64: str) -> None:
        """split.py's tail: the x block's last program reduces each reduction's partials, then runs
        the x-loop nodes, in member order."""
        for line in last_program_header(self.split):
            self.emit(line)
        self.role = "combine"
        self.push_scope()
        for line in combine_header(self.split, i64):
            self.emit(line)
        for node, pl in self.members:
            if pl.cls == "red":
                self._combine_partials(node, pl, self.workspaces)
            elif pl.cls == "x":
                self.emit_pointwise(node, pl)
        self.emit(counter_reset())
        self.pop_scope()
        self.role = "partial"

    def _emit_early_loads(self) -> None:
        """early_loads.py: the loads of nodes after a reduction, first; the nodes' bodies find them in
        the CSE cache of this (the kernel's) scope when they run."""
        for node, pl, loads in early_loads(self.members):
            saved = self.current
            self.current = (node, pl)
            try:
                for name, index in loads:
                    self.load(name, index)
            finally:
                self.current = saved

    def _generate_looped(self, i64: str, x_loop: bool) -> None:
        phase = self.phases()
        self.last_pass = last_passes(self.members, phase)
        rnodes = [(n, p) for n, p in self.members if p.cls in ("r", "red")]
        npasses = 1 + max([phase[n.name] for n, _ in rnodes], default=0)
        read_in_loop = set().union(*(n.read_names for n, p in rnodes))
        for k in range(npasses + 1):
            for node, pl in self.members:
                if pl.cls != "x" or phase[node.name] != k:
                    continue
                if x_loop:
                    self.emit_pointwise(node, pl)
                elif k == 0 and node.name in read_in_loop:  # stored by the combine; computed once, before the loop
                    self.value_of(node.name)
            if k == npasses:
                break
            in_pass = [(n, p) for n, p in rnodes if phase[n.name] == k]
            if not in_pass:
                continue
            reds = [(n, p) for n, p in in_pass if p.cls == "red"]
            accs: dict[str, tuple[str, str | None, torch.dtype]] = {}
            for node, pl in reds:
                acc = f"acc_{node.name}"
                rtype = node.buffer.body.reduction_type
                dt = node.buffer.body.src_dtype if rtype not in ("any", "all") else torch.int8
                if dt == torch.bool:
                    dt = torch.int8  # bools reduce as int8 (see _reduction_input): a loop-carried type must not change
                chunked = self.chunk > 1 and (node.name in self.online or node.name in self.online.values())
                shape = f"[XBLOCK, RBLOCK // {self.chunk}]" if chunked else "[XBLOCK, RBLOCK]"
                self.emit(f"{acc} = tl.full({shape}, {self._default(rtype, dt)}, {tl_dtype(dt)})")
                idx = None
                if rtype in ("argmax", "argmin"):
                    idx = f"accidx_{node.name}"
                    self.emit(f"{idx} = tl.full([XBLOCK, RBLOCK], 2147483647, tl.int32)")
                accs[node.name] = (acc, idx, dt)
            self.pass_index = k
            for node, pl in in_pass:
                if node.kind == "scan":
                    self.emit(carry_init(node))
            reverse = reverse_loop(in_pass)
            self.hoist = (self.scope, len(self.lines))
            if self.role == "partial":  # this program's chunk; rmask cuts the last one at rnumel
                self.emit(f"for roffset in range(0, {self.rchunk}, RBLOCK):")
            elif reverse:  # a reverse scan's chunks, from the last (scan.py)
                self.emit(f"for rstep in range(0, {self.rnumel}, RBLOCK):")
            else:  # the trip count a literal, as the sizes are (Inductor's loops too): the compiler sees it
                self.emit(f"for roffset in range(0, {self.rnumel}, RBLOCK):")
            self.push_scope()
            if reverse:
                self.emit(f"roffset = ({self.rnumel - 1} // RBLOCK) * RBLOCK - rstep")
            base = "rsplit_start + " if self.role == "partial" else ""
            self.emit(f"rindex = {base}roffset + tl.arange(0, RBLOCK)[None, :]{i64}")
            self.emit(self._rmask())
            self.emit("xrmask = xmask & rmask")
            for node, pl in in_pass:
                if pl.cls == "r":
                    self.emit_pointwise(node, pl)
                    continue
                if node.name in self.online:
                    continue  # updated with its max (_online_update)
                rtype = node.buffer.body.reduction_type
                acc, idx, dt = accs[node.name]
                v, _ = self._reduction_input(node, pl)
                if node.name in self.online.values():
                    if self.chunk > 1:
                        self._online_chunk_update(node, v, accs)
                        continue  # the max's own update is the chunk's
                    self._online_update(node, v, accs)
                if rtype == "sum":
                    self.emit(f"{acc} = {acc} + {v}")
                elif rtype in ("max", "min") and _is_float(dt):
                    # one NaN-propagating max/min instruction instead of compare-and-select
                    self.emit(f"{acc} = tl.{rtype}imum({acc}, {v}, propagate_nan=tl.PropagateNan.ALL)")
                elif rtype in ("max", "min", "prod"):
                    self.emit(f"{acc} = _{rtype}_combine({acc}, {v})")
                elif rtype == "any":
                    self.emit(f"{acc} = tl.maximum({acc}, {v})")
                elif rtype == "all":
                    self.emit(f"{acc} = tl.minimum({acc}, {v})")
                else:
                    self.emit(f"{acc}_n, {idx}_n = _{rtype}_combine({acc}, {idx}, {v}, "
                              f"tl.broadcast_to(rindex.to(tl.int32), [XBLOCK, RBLOCK]))")
                    self.emit(f"{acc} = tl.where(xrmask, {acc}_n, {acc})")
                    self.emit(f"{idx} = tl.where(xrmask, {idx}_n, {idx})")
            self.pop_scope()
            self.hoist = None
            for node, pl in reds:
                rtype = node.buffer.body.reduction_type
                acc, idx, dt = accs[node.name]
                if node.name in self.online:
                    result = self._online_finish(node, accs)
                else:
                    result = self._finish(rtype, TV(acc, dt), TV(idx, torch.int32) if idx else None)
                self.scope.node_values[node.name] = result
                self.store(node, pl, result)

    def _online_update(self, node: SchedulerNode, v: TV, accs: dict) -> None:
        """Before the max's update: each partner sum (of exp(v - max), online.py) relative to the
        lane's running max m. With d = v - m, one exp per element: v <= m adds exp(d); v > m
        rescales the sum by exp(-d) and adds 1 (v is the new max). A NaN d (v = m = -inf, or a NaN)
        adds nothing: the non-propagating max turns it into exp(-inf) = 0 — the final step makes a
        row with a NaN NaN. Few instructions matter: this runs on every element of a long row."""
        m, _, dt = accs[node.name]
        d = self.cse(f"{v} - {m}", dt)
        up = self.cse(f"{d} > 0", torch.bool)
        e = self.cse(f"tl.exp(tl.maximum(-tl.abs({d}), float(\"-inf\")))", dt)
        for b, a in self.online.items():
            if a == node.name:
                bacc = accs[b][0]
                self.emit(f"{bacc} = tl.where({up}, {bacc} * {e} + 1.0, {bacc} + {e})")

    def _online_chunk_update(self, node: SchedulerNode, v: TV, accs: dict) -> None:
        """online.py's chunked update: per chunk of `self.chunk` elements its max m' (NaN-propagating),
        R = m'·log2(e) (0 for a chunk of -inf, so -inf adds exp2(-inf) = 0), then each partner sum
        s·2^(R_old − R) + Σ 2^(v·log2(e) − R), with R_old = -inf (scale 0, s is 0) while the lane
        has seen only -inf; the max's accumulator becomes m'."""
        m, _, dt = accs[node.name]
        f32 = "" if dt == torch.float32 else ".to(tl.float32)"
        v3 = self.cse(f"tl.reshape({v}, [XBLOCK, RBLOCK // {self.chunk}, {self.chunk}])", dt)
        mn = self.cse(f"tl.maximum({m}, tl.reduce({v3}, 2, _max_nan), propagate_nan=tl.PropagateNan.ALL)", dt)
        # _log2e_mul: one rounding, the same wherever R is used (a compiler-fused FMA would differ)
        ref = self.cse(f"_log2e_mul(tl.where({mn} == float(\"-inf\"), 0.0, {mn}){f32})", torch.float32)
        old = self.cse(f"_log2e_mul({m}{f32})", torch.float32)  # -inf before the first finite value: scale 0
        scale = self.cse(f"_exp2_ftz({old} - {ref})", torch.float32)
        # one FMA: the product v·log2(e) unrounded, so the error is that of ref alone (online.py)
        total = self.cse(f"tl.reduce(_exp2_ftz(tl.fma({v3}{f32}, {LOG2E}, -{ref}[:, :, None])), 2, _fast_sum)",
                         torch.float32)
        for b, a in self.online.items():
            if a == node.name:
                bacc, _, bdt = accs[b]
                cast = "" if bdt == torch.float32 else f".to({tl_dtype(bdt)})"
                self.emit(f"{bacc} = ({bacc} * {scale} + {total}){cast}")
        self.emit(f"{m} = {mn}")

    def _online_finish(self, node: SchedulerNode, accs: dict) -> TV:
        """The sum relative to the final max: each lane's sum times exp(lane max - max) (chunked:
        2^(R - max·log2(e)), R the lane's reference); a row of -inf (exp(-inf - -inf)) or with a
        NaN is NaN, as in eager."""
        a = self.online[node.name]
        acc, _, dt = accs[node.name]
        m = self.scope.node_value(a)
        if self.chunk > 1:
            f32 = "" if accs[a][2] == torch.float32 else ".to(tl.float32)"
            ref = self.cse(f"_log2e_mul(tl.where({accs[a][0]} == float(\"-inf\"), 0.0, {accs[a][0]}){f32})",
                           torch.float32)
            lanes = self.cse(f"tl.where({acc} == 0, 0.0, {acc} * tl.exp2(tl.fma(-{m}{f32}, {LOG2E}, {ref})))", dt)
        else:
            lanes = self.cse(f"tl.where({acc} == 0, 0.0, {acc} * tl.exp({accs[a][0]} - {m}))", dt)
        total = self.cse(f"tl.reduce({lanes}, 1, _fast_sum)[:, None]", dt)
        if self.role == "partial":  # the chunk's sum relative to the chunk's max (_combine_online)
            return total
        return self.cse(f"tl.where({m} > float(\"-inf\"), {total}, float(\"nan\"))", dt)

    def _buffer_params(self, workspaces: int) -> list[str]:
        return ([f"in_ptr{i}" for i in range(len(self.inputs))] + [f"out_ptr{i}" for i in range(len(self.outputs))]
                + [f"ws_ptr{i}" for i in range(workspaces)])

    def _function(self, params: list[str]) -> str:
        body = "\n".join(self.lines).replace("out_ptr_placeholder_", "")
        return f"\n\n@triton.jit\ndef {self.name}({', '.join(params)}):\n{body}\n"

    def _assemble(self) -> KernelSource:
        split = SplitWorkspaces(self.split, tuple(self.workspaces.values())) if self.role == "partial" else None
        params = self._buffer_params(len(self.workspaces)) + (["split_counter"] if split else [])
        params += ["xnumel"] + (["rnumel"] if self.reduction_kernel else [])
        params += ["XBLOCK: tl.constexpr"] + (["RBLOCK: tl.constexpr"] if self.reduction_kernel else [])
        if self.tile is not None:  # a tiled kernel: ynumel, xnumel, YBLOCK, XBLOCK (the launcher's order)
            params = params[:-2] + ["ynumel", "xnumel", "YBLOCK: tl.constexpr", "XBLOCK: tl.constexpr"]
        src = prelude(self.interpret) + (SCAN_HELPERS if is_scan_kernel(self.members) else "") + self._function(params)
        return KernelSource(self.name, src, tuple(self.inputs) + tuple(self.outputs),
                            "reduction" if self.reduction_kernel else "pointwise", self.numel, self.rnumel,
                            self.config, split, self.tile)


def kernel_name(kind: str, persistent: bool, origins: Sequence[str], index: int | None, max_ops: int = 8) -> str:
    """`triton_{poi|per|red|scan}_fused_{ops}_{index}`; without the index for a kernel's source."""
    prefix = "poi" if kind == "pointwise" else "scan" if kind == "scan" else ("per" if persistent else "red")
    ops = sorted(set(origins))
    if len(ops) > max_ops:
        ops = ops[:max_ops]
    base = f"triton_{prefix}_fused_{'_'.join(ops) or 'copy'}"
    return base if index is None else f"{base}_{index}"
