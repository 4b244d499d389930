"""A reduction's values: its masked input block, its final step along r, and the persistent form.

Note: a reduction's input is an [XBLOCK, RBLOCK] block with the reduction's identity in masked
lanes (bools reduce as int8). The final step reduces it along r to [XBLOCK, 1] with the prelude's
combine functions, NaN like torch: a float max/min propagates NaN, an argmax/argmin picks the
first NaN if there is one (its index taken below 0 by the r extent, so one min finds it), else the
first best value. A persistent reduction holds its whole row in one block: input, then final step.
The looped form (looped.py) accumulates blocks first and ends with the same step.
"""
from __future__ import annotations

import torch

from ..schedule.loops import Placement
from ..schedule.nodes import SchedulerNode
from .emitter import TV
from .expressions import is_float, reduction_default


class ReductionMixin:
    """KernelWriter's reduction input, final step and persistent reduction (reads the writer's
    state, set in KernelWriter.__init__)."""

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
        default = reduction_default(rtype, v.dtype)
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
        if rtype in ("max", "min") and is_float(vals.dtype) and not self.interpret:
            # one reduction: the NaN-propagating max/min instruction is the combine
            return self.cse(f"tl.reduce({vals}, 1, _{rtype}_nan)[:, None]", vals.dtype)
        fast = "_fast_max" if rtype in ("max", "argmax") else "_fast_min"
        if rtype in ("argmax", "argmin") and is_float(vals.dtype) and not self.interpret:
            # the NaN-propagating max/min (one instruction per combine, as a max reduction's): a
            # NaN best matches no element, and the pick below takes the first NaN then; a max and
            # an argmax of the same values (torch.max(x, dim)) share this one reduction
            fast = "_max_nan" if rtype == "argmax" else "_min_nan"
        best = self.cse(f"tl.reduce({vals}, 1, {fast})[:, None]", vals.dtype)
        if rtype in ("max", "min"):
            if not is_float(vals.dtype):
                return best
            # the interpreter reduces a jit combine element by element: Triton's own max/min and a NaN test
            isnan = self.cse(f"({vals} != {vals})", torch.bool)
            has_nan = self.cse(f"(tl.reduce({isnan}.to(tl.int8), 1, _fast_max)[:, None] != 0)", torch.bool)
            return self.cse(f"tl.where({has_nan}, float(\"nan\"), {best})", vals.dtype)
        if not is_float(vals.dtype):
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
