"""Split reductions: a reduction whose x grid is too small to fill the GPU (a column sum, a few long
rows) cuts its r range into `split` chunks, one program per (x block, chunk).

Note: one launch on grid (x blocks, split). Program (x, s) reduces r in [s * chunk, (s + 1) * chunk),
chunk = ceil(rnumel / split) rounded up to a multiple of RBLOCK (exactly one RBLOCK when
persistent), and stores each reduction's partial, in the accumulator dtype, to a workspace
[split, numel] (an empty chunk stores the identity); it also stores the r-loop nodes (a prologue
that is an output). Then it takes a ticket from its x block's counter (a CTA barrier, then one
acq_rel atomic add, the pattern of Inductor's grid barrier): the program that arrives last reduces
the block's partials along s in index order with the same rules as the r loop's final step (NaN
propagation included), runs the x-loop nodes (the epilogue: a dtype cast, a mean's division, a
bias), stores, and sets the counter back to 0. Deterministic: the combine order never depends on
which program arrives last. One launch instead of a partial and a combine kernel: the combine's
launch, its gap on the GPU and its host time are gone. The counters and workspaces belong to the
launch site (runtime/program.py), allocated once: calls of one program must not overlap on two
streams (as with its CUDA graph's static buffers).
Legal when every reduction combines from partials (sum, prod, max, min, any, all) and no node in
the r loop (another reduction, a softmax's exp(x - max)) needs a reduction's value — except a
softmax's sum run online with its max: each chunk stores its max and its sum relative to it, and
the last program brings every chunk's sum to the row's max, exp(m_chunk - max) times.
The legality rule and the header lines are functions here; SplitMixin emits the partial stores and
the last program's block inside KernelWriter.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from triton import next_power_of_2

from ..schedule.loops import Placement
from ..schedule.nodes import SchedulerNode
from .emitter import TV
from .expressions import convert, reduction_default

SPLITTABLE_REDUCTIONS = frozenset({"sum", "prod", "max", "min", "any", "all"})
MAX_SPLIT = 4096


def why_not_split(members: Sequence[tuple[SchedulerNode, Placement]], is_reduction: bool,
                  online: dict[str, str] | None = None) -> str | None:
    """None when a kernel of these placed nodes may split its r range, else why not — the one
    eligibility rule: plan checks, default heuristics and codegen all ask here. `online` (sum ->
    max, online.py's pairs when the kernel runs them online): such a sum reads its max inside the r
    loop, yet combines from partials (each chunk's sum relative to the chunk's max, rescaled to the
    row's max by the last program)."""
    if not is_reduction:
        return "split needs a reduction kernel"
    if any(node.kind == "scan" for node, _ in members):
        return "a scan kernel does not split (each chunk's prefix needs the chunks before it)"
    if any(pl is not None and pl.cls == "col" for _, pl in members):
        return "a row kernel with column partials does not split (each program walks whole rows)"
    after: dict[str, str] = {}  # node -> the reduction whose value it needs
    for node, pl in members:
        if pl.cls == "red" and node.buffer.body.reduction_type not in SPLITTABLE_REDUCTIONS:
            return (f"reduction {node.name} is {node.buffer.body.reduction_type}, which does not combine "
                    "from partial results")
        needs = sorted(after[r] for r in node.read_names if r in after and (online or {}).get(node.name) != r)
        if needs and pl.cls != "x":
            return (f"{node.name} reads the reduction {needs[0]} inside the r loop (each chunk would see only "
                    "a partial)")
        if pl.cls == "red":
            after[node.name] = node.name
        elif needs:
            after[node.name] = needs[0]
    return None


def split_chunk(rnumel: int, split: int, rblock: int) -> int:
    """r elements per chunk: ceil(rnumel / split) rounded up to a multiple of RBLOCK."""
    per = -(-max(rnumel, 1) // split)
    return -(-per // rblock) * rblock


def partial_header(chunk: int, i64: str) -> list[str]:
    """Lines after the x header of the partial kernel: which chunk of r this program reduces."""
    return [f"rsplit_id = tl.program_id(1){i64}", f"rsplit_start = rsplit_id * {chunk}"]


def last_program_header(split: int) -> list[str]:
    """Lines after the partials are stored: the ticket, and the opening of the last program's block."""
    return ["tl.debug_barrier()  # every thread's partials are stored before the ticket releases them",
            'split_ticket = tl.atomic_add(split_counter + tl.program_id(0), 1, sem="acq_rel")',
            f"if split_ticket == {split - 1}:"]


def combine_header(split: int, i64: str) -> list[str]:
    """First lines of the last program's block: the partials' row index and mask."""
    return [f"sindex = tl.arange(0, {next_power_of_2(split)})[None, :]{i64}", f"xsmask = xmask & (sindex < {split})"]


def counter_reset() -> str:
    """Last line of the last program's block: the counter is 0 again for the next launch."""
    return "tl.store(split_counter + tl.program_id(0), 0)"


@dataclass(frozen=True)
class SplitWorkspaces:
    """What the runtime allocates for a split reduction, once per launch site: one workspace
    [split, numel] per reduction, in order, and an int32 counter per x block (zeros)."""

    split: int
    workspace_dtypes: tuple[torch.dtype, ...]


class SplitMixin:
    """KernelWriter's partial stores and its last program's combine (reads the writer's state, set
    in KernelWriter.__init__; `role` is "partial" in the r loop, "combine" in the last program)."""

    def _emit_last_program(self, i64: str) -> None:
        """The x block's last program reduces each reduction's partials, then runs the x-loop
        nodes, in member order."""
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

    def _store_partial(self, node: SchedulerNode, value: TV) -> None:
        """This chunk's partial goes to row rsplit_id of the reduction's workspace [split, numel]."""
        ws_dtype = torch.int8 if value.dtype == torch.bool else value.dtype
        k = len(self.workspaces)
        self.workspaces[node.name] = ws_dtype
        v = value.name if value.dtype == ws_dtype else convert(value.name, ws_dtype)
        self.emit(f"tl.store(ws_ptr{k} + (rsplit_id * {self.numel} + xindex), {v}, xmask)")

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
        return self.cse(f"tl.load(ws_ptr{k} + (sindex * {self.numel} + xindex), xsmask, "
                        f"other={reduction_default(rtype, dtype)}, cache_modifier=\".cg\")", dtype)

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
