"""Loads, stores, masks and indices of a kernel: how a node's buffer accesses become pointers.

Note: a node's index (sympy, in the node's loop variables) is simplified under the node's ranges,
rewritten in kernel terms (xindex, rindex; yindex in a tile) and folded back to the flat index
where a multi-dim index is contiguous. A pointer gets the full block shape of its class (x or r),
since tl.load/tl.store do not broadcast a pointer against its mask. A load inside an r loop whose
address does not vary along r is hoisted before the loop (one [XBLOCK, 1] load per row). Gathered
loads (index read from memory) are counted, so the cost model charges a sector per element, not
the whole buffer.
"""
from __future__ import annotations

import sympy
import torch

from ..ir.index import fold_divmod, simplify_index
from ..schedule.loops import Placement
from ..schedule.nodes import SchedulerNode
from .accesses import Access
from .cache_hints import hint, varies_along_x
from .emitter import TV
from .expressions import FLOAT8_READS, convert
from .printer import print_expr
from .tiling import tile_ranges, tiled_vars

# a scatter's combining store per ScatterBody.reduce
ATOMIC_OPS = {"sum": "tl.atomic_add", "amax": "tl.atomic_max", "amin": "tl.atomic_min"}


# stored narrower than they compute: loaded and computed in float32
COMPUTED_IN_F32 = (torch.float16, torch.bfloat16, *FLOAT8_READS)


def load_cast(text: str, dtype: torch.dtype) -> str:
    """A loaded value as it computes: half and float8 types in float32 (float8 through the prelude's
    helper), bools as int1."""
    if dtype == torch.bool:
        return f"{text}.to(tl.int1)"
    if dtype in FLOAT8_READS:
        return f"{FLOAT8_READS[dtype]}({text})"
    return f"{text}.to(tl.float32)" if dtype in COMPUTED_IN_F32 else text


def masked_other(dtype: torch.dtype) -> str:
    """A masked load's `other`: a float for float8 (Triton's interpreter cannot cast an int to it)."""
    return "other=0.0" if dtype in FLOAT8_READS else "other=0"


class MemoryMixin:
    """KernelWriter's index, mask, load and store emission (reads the writer's state, set in
    KernelWriter.__init__)."""

    def _shape(self, cls: str) -> str:
        if self.tile is not None:
            return "[YBLOCK, XBLOCK]"
        if not self.reduction_kernel:
            return "[XBLOCK]"
        return "[XBLOCK, RBLOCK]" if cls in ("r", "red", "col") else "[XBLOCK, 1]"

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
        if self.tile is None:
            index = pl.viewed(node, index)
        kvars = tiled_vars(node, self.tile) if self.tile is not None else pl.kernel_vars(node)
        index = index.xreplace(kvars)
        if self.x_lanes is not None:
            index = self._in_lane_order(index)
        index = simplify_index(index, self.kernel_ranges)
        index = fold_divmod(sympy.expand(index))
        if not index.free_symbols:
            return f"tl.full({self._shape(cls)}, {int(index)}, {'tl.int64' if self.use_int64 else 'tl.int32'})"
        return print_expr(index, self.indirect_names, self.kernel_ranges)

    def _in_lane_order(self, index: sympy.Expr) -> sympy.Expr:
        """An index in the kernel's logical x, rewritten for lanes that walk x in another order
        (`self.x_lanes`): the logical x as its digits (simplified while they are symbols, so a node's own
        row-major split of x becomes those digits), then each digit as the lanes compute it."""
        xsym = sympy.Symbol("xindex", integer=True, nonnegative=True)
        flat, digit_ranges, lanes = self.x_lanes
        rsym = sympy.Symbol("rindex", integer=True, nonnegative=True)
        index = simplify_index(index.xreplace({xsym: flat}), digit_ranges | {rsym: max(self.rnumel, 1)})
        return index.xreplace(lanes)

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
        return self._full_shape(self.index_str(index, shape_cls), shape_cls)

    def _full_shape(self, text: str, shape_cls: str) -> str:
        """`pointer_index` of offsets already printed (`index_str`)."""
        if text.startswith("tl.full("):
            return text
        if self.tile is not None:  # a tile's offsets vary along both y and x
            both = "xindex" in text and "yindex" in text
            return text if both else f"tl.broadcast_to({text}, {self._shape(shape_cls)})"
        need_r = self.reduction_kernel and shape_cls in ("r", "red", "col")
        if "xindex" in text and ("rindex" in text or not need_r):
            return text
        return f"tl.broadcast_to({text}, {self._shape(shape_cls)})"

    def load(self, name: str, index: sympy.Expr) -> TV:
        if name in self.by_buffer:
            return self.value_of(name)
        if name not in self.inputs:
            self.inputs.append(name)
        ptr = f"in_ptr{self.inputs.index(name)}"
        dtype = self.dtypes[name]
        node, pl = self.current
        if sympy.sympify(index).free_symbols & set(self.indirect_names):
            self.gathers.setdefault(name, {})[str(index)] = self.numel * (self.rnumel if pl.cls in ("r", "red", "col") else 1)
        else:
            self.direct_reads.add(name)
        cdt = torch.float32 if dtype in COMPUTED_IN_F32 else dtype
        hoisted = self._hoisted_load(ptr, index, dtype, cdt)
        if hoisted is not None:
            return hoisted
        policy = self._cache_hint(name, index)
        ep = f", eviction_policy='{policy}'" if policy else ""
        offsets = self.index_str(index, pl.cls)
        issued = self.counter
        if self._varies_along_r_only(offsets, index):
            text = f"tl.load({ptr} + ({offsets}), rmask, {masked_other(dtype)}{ep})"
            return self._issued(name, offsets, issued, self.cse(load_cast(text, dtype), cdt))
        text = f"tl.load({ptr} + ({self._full_shape(offsets, pl.cls)}), {self._mask(pl.cls)}, {masked_other(dtype)}{ep})"
        tv = self._issued(name, offsets, issued, self.cse(load_cast(text, dtype), cdt))
        if self.mask_stack:
            self.masked_loads[tv.name] = frozenset(self.mask_stack)
        return tv

    def _issued(self, name: str, offsets: str, counter_before: int, tv: TV) -> TV:
        """Record a load of `name` in the kernel's accesses unless the CSE cache served it."""
        if self.counter != counter_before:
            self.accesses.append(Access(name, False, offsets))
        return tv

    def _varies_along_r_only(self, offsets: str, index: sympy.Expr) -> bool:
        """Do a load's offsets (`index_str`) inside the r block vary along r only (a norm's weight
        and bias)? Such a load is issued as one [1, RBLOCK] row that the arithmetic broadcasts over
        the block's XBLOCK rows, as Inductor does, instead of XBLOCK loads of the same addresses: a
        layer norm over rows of 187 bf16 elements, eight rows per program, issued three times the
        load instructions of its input alone. Its address is valid on every x lane."""
        _, pl = self.current
        return (self.reduction_kernel and self.tile is None and pl.cls in ("r", "red", "col") and not self.mask_stack
                and "rindex" in offsets and "xindex" not in offsets
                and not sympy.sympify(index).free_symbols & set(self.indirect_names))

    def _hoisted_load(self, ptr: str, index: sympy.Expr, dtype: torch.dtype, cdt: torch.dtype) -> TV | None:
        """A load of an r node whose address does not vary along r (a norm's shift, a softmax's max
        read back, an embedding's token id) issued once per row, as an [XBLOCK, 1] value the blocks
        broadcast against, instead of one broadcast load per r element: before the loop in a looped
        kernel, in place in a persistent one. Issued per element, BERT's embedding layer norm loaded
        its three ids and computed the gathers' int64 row offsets on all 768 lanes of each row. Not
        under masked() (its mask may vary along r) nor through an indirect index."""
        node, pl = self.current
        in_loop = self.hoist is not None
        if (not (in_loop or (self.reduction_kernel and self.persistent and self.tile is None))
                or pl.cls not in ("r", "red", "col") or self.mask_stack
                or sympy.sympify(index).free_symbols & set(self.indirect_names)):
            return None
        text = self.index_str(index, "x")
        if "rindex" in text:
            return None
        body = load_cast(f"tl.load({ptr} + ({self.pointer_index(index, 'x')}), xmask, {masked_other(dtype)})", dtype)
        name = self.inputs[int(ptr[len("in_ptr"):])]
        if not in_loop:  # a persistent block: the [XBLOCK, 1] load in place
            return self._issued(name, text, self.counter, self.cse(body, cdt))
        scope, _ = self.hoist
        key = f"{body}::{cdt}"
        hit = scope.lookup(key)
        if hit is not None:
            return hit
        tv = TV(f"tmp{self.counter}", cdt)
        self.counter += 1
        self.accesses.append(Access(name, False, text))  # issued before the loop: before any store in it
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
        # a scatter's offsets read its indices: evaluated here, in its own scope (their loads are CSE hits)
        offsets = self.index_str(node.scatter_index(self) if node.is_scatter else node.write.index, shape_cls)
        idx = self._full_shape(offsets, shape_cls)
        self.accesses.append(Access(node.name, True, offsets))
        self.current = saved
        dt = node.buffer.dtype
        v = value.name if value.dtype == dt else convert(value.name, dt)
        mask = "xmask" if (not self.reduction_kernel or pl.cls in ("x", "red")) else "xrmask"
        if node.is_scatter and node.buffer.body.reduce is not None:
            op = ATOMIC_OPS[node.buffer.body.reduce]
            # the value as a whole block of its own: Triton 3.7-3.8's interpreter reads a value narrower
            # than its addresses, or a broadcast view of one, as garbage (scatter_reduce's mean adds a
            # constant count); the select is one instruction beside an atomic
            v = f"tl.where({mask}, tl.broadcast_to({v}, {self._shape(shape_cls)}), 0)"
            self.emit(f"{op}(out_ptr_placeholder_{ptr} + ({idx}), {v}, {mask}, sem='relaxed')")
            return
        cm = ", cache_modifier='.cs'" if self.config.cache_hints and not self.reduction_kernel else ""
        self.emit(f"tl.store(out_ptr_placeholder_{ptr} + ({idx}), {v}, {mask}{cm})")
