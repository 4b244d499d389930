"""Scheduler: legality verdicts with reasons, the score's 16x rule, dead nodes, memory reuse, indexing width."""
import pytest
import torch
import torch.nn.functional as F

from autofuse import CompileOptions, Heuristics
from autofuse.capture.trace import trace_aten
from autofuse.compiler import compile_graph
from autofuse.lower import GraphLowering
from autofuse.runtime.program import Alloc
from autofuse.schedule.fusion import can_fuse, singleton
from autofuse.schedule.heuristics import FusionScore
from autofuse.schedule.scheduler import SchedulerGraph
from tests.helpers import assert_close, compile_and_compare, kernels_of, rand


def _groups(fn, args, heuristics=None):
    gm = trace_aten(fn, args)
    low = GraphLowering(gm, args, heuristics or Heuristics()).run()
    graph = SchedulerGraph(low.buffers, low.outputs)
    return graph, {n.name: singleton(n) for n in graph.nodes}, low


def _by_kind(graph, kind):
    return [n.name for n in graph.nodes if n.kind == kind]


def test_cycle_through_fallback_is_illegal():
    def fn(x, w):
        a = torch.exp(x)
        c = a @ w
        return a, a + c
    x, w = rand((8, 8)), rand((8, 8))
    graph, groups, _ = _groups(fn, [x, w])
    pw = _by_kind(graph, "pointwise")
    assert len(pw) == 2
    why = can_fuse(groups[pw[0]], groups[pw[1]], graph)
    assert why is not None and "cycle" in why
    compile_and_compare(fn, [x, w], atol=1e-4, rtol=1e-4)


def test_vertical_read_at_another_index_is_illegal():
    def fn(x):
        a = x * 2
        return a, (a.t() + 1).contiguous()
    # realize every multi-use value, so the transposed read goes through memory
    graph, groups, _ = _groups(fn, [rand((9, 9))], Heuristics(realize_opcount_threshold=0))
    pw = _by_kind(graph, "pointwise")
    assert len(pw) == 2
    why = can_fuse(groups[pw[0]], groups[pw[1]], graph)
    assert why is not None and "reads" in why and "writes" in why


def test_incompatible_iteration_spaces_are_illegal():
    def fn(x):
        a = x.sum(0)  # (numel 13, rnumel 11): a column sum
        return a, x[:, :5] * 3   # 55 elements: neither 13 nor 13 x 11
    graph, groups, _ = _groups(fn, [rand((11, 13))])
    red = _by_kind(graph, "reduction")[0]
    pw = _by_kind(graph, "pointwise")[0]
    why = can_fuse(groups[red], groups[pw], graph)
    assert why is not None and "does not split" in why


def test_reduction_and_epilogue_are_legal():
    def fn(x):
        return x - x.sum(-1, keepdim=True)
    graph, groups, _ = _groups(fn, [rand((11, 13))])
    red = _by_kind(graph, "reduction")[0]
    pw = _by_kind(graph, "pointwise")[0]
    assert can_fuse(groups[red], groups[pw], graph) is None


def test_fusion_score_memory_rule():
    small = FusionScore(2, 1, 100, 0, -1)
    big = FusionScore(2, 0, 10_000, 0, -50)
    assert small < big  # more than 16x the bytes wins over node type and proximity
    near = FusionScore(2, 0, 1000, 0, -1)
    same_type = FusionScore(2, 1, 800, 0, -9)
    assert near < same_type  # within 16x: node type decides first
    assert FusionScore(1, 1, 10**9, 0, 0) < FusionScore(2, 0, 1, 0, -100)  # template score first


def test_dead_nodes_are_eliminated():
    def fn(x):
        unused = x.sum(-1)  # noqa: F841 - make_fx keeps it, the scheduler must not
        return x * 2
    ks = kernels_of(compile_and_compare(fn, [rand((7, 5))]))
    assert [k.kind for k in ks] == ["pointwise"]


def test_realize_thresholds_come_from_heuristics():
    def fn(x):
        a = torch.exp(x) * 2 + 1
        return a.sum(-1), a.amax(-1)
    x = rand((6, 10))
    gm = trace_aten(fn, [x])
    eager_realize = GraphLowering(gm, [x], Heuristics(realize_opcount_threshold=0, realize_reads_threshold=0)).run()
    recompute = GraphLowering(gm, [x], Heuristics()).run()
    assert len(eager_realize.buffers) == len(recompute.buffers) + 1


def test_freed_buffers_are_reused():
    def fn(x, w):   # the softmax takes the relu's storage (the others write over their operands; the softmax
        h = torch.relu(x) @ w   # reads its row reversed, so it cannot)
        h = torch.softmax(h.flip(-1), -1) @ w
        h = torch.tanh(h) @ w
        return h * 2
    x, w = rand((16, 16)), rand((16, 16))
    art = compile_graph(trace_aten(fn, [x, w]), [x, w], CompileOptions(strict=True))
    assert any(isinstance(s, Alloc) and s.reuse is not None for s in art.program.steps)
    torch.testing.assert_close(art.program([x, w])[0], fn(x, w), rtol=1e-4, atol=1e-4)


def test_64bit_indexing_when_a_tensor_needs_it():
    big = torch.empty((2**31 + 64,), device="meta")
    gm = trace_aten(lambda x: x * 2 + 1, [torch.empty(8)])
    art = compile_graph(gm, [big], CompileOptions(strict=True))
    src = art.kernels[0].source
    assert "tl.program_id(0).to(tl.int64)" in src
    small = compile_graph(gm, [torch.empty(1000)], CompileOptions(strict=True))
    assert "tl.int64" not in small.kernels[0].source.split("@triton.jit\ndef triton_")[1]


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_a_reductions_finalization_fuses_whatever_dim_it_drops(dim):
    """var over a middle dim: the statistics' node keeps the reduced dim as size 1 (7, 1, 29), the
    finalization drops it (7, 29); both name their variables i0, i1, ..., and the producer's size-1
    i1 is not the consumer's i1 — one kernel, eager's values."""
    from autofuse.capture.trace import compile_traced
    from autofuse.options import CompileOptions
    x = rand((7, 13, 29))
    fn = lambda x: x.var(dim)  # noqa: E731
    compiled = compile_traced(fn, (x,), CompileOptions(strict=True, use_db=False, poison=True))
    assert_close(compiled(x)[0], fn(x))
    assert len([k for k in kernels_of(compiled) if k.kind != "fallback"]) == 1


def test_norm_read_through_a_flattening_view_fuses_with_its_statistics():
    """The normalizing node of a layer norm whose output is flattened for a matrix product reads the
    statistics at (i // C) % rows; with the r variable's range that is the row itself, so the
    statistics and the normalized output are one kernel."""
    w = rand((96, 16))
    fn = lambda x, r: F.layer_norm(x + r, (96,)).view(-1, 96) @ w  # noqa: E731
    args = [rand((2, 5, 96)), rand((2, 5, 96))]
    compiled = compile_and_compare(fn, args)
    generated = [k for k in kernels_of(compiled) if k.kind != "fallback"]
    assert len(generated) == 1 and generated[0].kind == "reduction", [k.nodes for k in generated]


def test_row_and_column_reductions_of_one_matrix_stay_apart():
    """CLIP's loss takes the log-sum-exp of each row and of each column of one logits matrix: fused,
    one of the two reads would run across the kernel's lanes and no element would be read once for
    both, so the two reductions are two kernels, as in Inductor."""
    x = rand((37, 37))
    fn = lambda x: (torch.logsumexp(x, 1) + torch.logsumexp(x.t(), 1)).sum()  # noqa: E731
    kernels = kernels_of(compile_and_compare(fn, [x], atol=1e-4, rtol=1e-4))
    row_and_column = [k for k in kernels if k.kind == "reduction" and (k.numel, k.rnumel) == (37, 37)]
    assert len(row_and_column) == 2
