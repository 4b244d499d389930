"""Looped reductions: a kernel whose rows do not fit one block walks r in steps of RBLOCK.

Note: nodes are split into passes by how many in-kernel reductions they depend on (`phases`):
pass k is one r loop, a reduction's value exists after its loop, and an r-loop producer needed by
a later pass is recomputed there. Each reduction of a pass keeps an [XBLOCK, RBLOCK] accumulator
(and an index accumulator for argmax/argmin) across the loop's steps, then reduces it along r with
reduction.py's final step. x-loop nodes of phase k run before pass k's loop. An online softmax's
sum is updated with its max in the max's loop (online.py); a split kernel's loop covers its
program's chunk only (split.py); a reverse scan walks its chunks from the last (scan.py). The trip
count is a literal, as the sizes are, so the compiler sees it.
"""
from __future__ import annotations

import torch

from ..schedule.loops import Placement, reduction_phases
from ..schedule.nodes import SchedulerNode
from .cache_hints import last_passes
from .emitter import TV
from .expressions import is_float, reduction_default
from .printer import tl_dtype
from .scan import carry_init, reverse_loop

Accumulators = dict[str, tuple[str, str | None, torch.dtype]]  # reduction -> (acc, index acc, dtype)


class LoopedMixin:
    """KernelWriter's passes and r loops (reads the writer's state, set in KernelWriter.__init__)."""

    def phases(self) -> dict[str, int]:
        return reduction_phases(self.members, self.online)

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
            if in_pass:
                self._emit_pass(k, in_pass, i64)

    def _emit_pass(self, k: int, in_pass: list[tuple[SchedulerNode, Placement]], i64: str) -> None:
        """Pass k: its accumulators, its r loop, then each reduction's final step and store."""
        reds = [(n, p) for n, p in in_pass if p.cls == "red"]
        accs = self._accumulators(reds)
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
            self._accumulate(node, pl, accs)
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

    def _accumulators(self, reds: list[tuple[SchedulerNode, Placement]]) -> Accumulators:
        """Each reduction's accumulator (and argmax/argmin's index accumulator) at its identity."""
        accs: Accumulators = {}
        for node, pl in reds:
            acc = f"acc_{node.name}"
            rtype = node.buffer.body.reduction_type
            dt = node.buffer.body.src_dtype if rtype not in ("any", "all") else torch.int8
            if dt == torch.bool:
                dt = torch.int8  # bools reduce as int8 (see _reduction_input): a loop-carried type must not change
            chunked = self.chunk > 1 and (node.name in self.online or node.name in self.online.values())
            shape = f"[XBLOCK, RBLOCK // {self.chunk}]" if chunked else "[XBLOCK, RBLOCK]"
            self.emit(f"{acc} = tl.full({shape}, {reduction_default(rtype, dt)}, {tl_dtype(dt)})")
            idx = None
            if rtype in ("argmax", "argmin"):
                idx = f"accidx_{node.name}"
                self.emit(f"{idx} = tl.full([XBLOCK, RBLOCK], 2147483647, tl.int32)")
            accs[node.name] = (acc, idx, dt)
        return accs

    def _accumulate(self, node: SchedulerNode, pl: Placement, accs: Accumulators) -> None:
        """One loop step of an r node: an r-loop node's value (stored if an output), or a
        reduction's block combined into its accumulator."""
        if pl.cls == "r":
            self.emit_pointwise(node, pl)
            return
        if node.name in self.online:
            return  # updated with its max (_online_update)
        rtype = node.buffer.body.reduction_type
        acc, idx, dt = accs[node.name]
        v, _ = self._reduction_input(node, pl)
        if node.name in self.online.values():
            if self.chunk > 1:
                self._online_chunk_update(node, v, accs)
                return  # the max's own update is the chunk's
            self._online_update(node, v, accs)
        if rtype == "sum":
            self.emit(f"{acc} = {acc} + {v}")
        elif rtype in ("max", "min") and is_float(dt):
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
