"""sort of keys the graph bounds to a small range (topk's positions) as a counting sort
(lower/sort.py): the sorted keys equal eager's, the permutation is the stable one, and a mixture of
experts' grouping by expert needs no ATen call; any other sort stays ATen's."""
from __future__ import annotations

import pytest
import torch

from autofuse import CompileOptions
from autofuse.capture.trace import compile_traced
from tests.helpers import assert_close, kernels_of, rand

OPTIONS = CompileOptions(strict=True, use_db=False, poison=True)


def _group_by_expert(logits, h):
    """transformers' grouped MoE: route each token to 2 experts, sort the (token, expert) pairs by
    expert, gather the tokens in that order, count the tokens per expert."""
    weights, experts = torch.topk(logits.softmax(-1), 2, dim=-1)
    ids, perm = torch.sort(experts.reshape(-1))
    grouped = h[perm // 2] * weights.reshape(-1)[perm, None]
    return ids, perm, grouped, torch.histc(ids.float(), bins=logits.shape[-1], min=0, max=logits.shape[-1] - 1)


@pytest.mark.parametrize("tokens,experts", [(37, 8), (300, 64), (5, 3)])
def test_grouping_tokens_by_expert_is_a_counting_sort(device, tokens, experts):
    logits, h = rand((tokens, experts), device=device), rand((tokens, 5), device=device)
    compiled = compile_traced(_group_by_expert, [logits, h], OPTIONS)
    ids, perm, grouped, counts = compiled(logits, h)
    want_ids, _, _, want_counts = _group_by_expert(logits, h)
    _, experts_of = torch.topk(logits.softmax(-1), 2, dim=-1)
    stable = torch.sort(experts_of.reshape(-1), stable=True)[1]
    assert torch.equal(ids, want_ids) and torch.equal(perm, stable)
    assert_close(counts, want_counts)
    assert_close(grouped, h[stable // 2] * torch.topk(logits.softmax(-1), 2, dim=-1)[0].reshape(-1)[stable, None])
    kernels = kernels_of(compiled)
    assert all(k.kind != "fallback" for k in kernels), [(k.kind, k.aten_ops) for k in kernels]


@pytest.mark.parametrize("case", ["unknown-range", "descending", "two-dims"])
def test_other_sorts_of_expert_ids_are_row_sorts(device, case):
    """Keys of no known range, a descending sort, a sort of a 2-D tensor: not the counting sort
    but the row sort of 64-bit keys (one block, no ATen call)."""
    def fn(logits):
        _, experts = torch.topk(logits, 2, dim=-1)
        if case == "unknown-range":
            return torch.sort((experts * 3).reshape(-1))
        if case == "descending":
            return torch.sort(experts.reshape(-1), descending=True)
        return torch.sort(experts, dim=0)
    logits = rand((11, 8), device=device)
    compiled = compile_traced(fn, [logits], OPTIONS)
    assert_close(compiled(logits)[0], fn(logits)[0])
    kernels = kernels_of(compiled)
    assert all(k.kind != "fallback" for k in kernels), [(k.kind, k.aten_ops) for k in kernels]
    assert any("_sort_rows_by(tl.where" in k.source for k in kernels)


def test_sorted_outputs_are_stored_without_filling_them_first(device):
    """Every key lands at its rank exactly once: both outputs are allocated and stored by one
    kernel, with no kernel of its own filling them first (one that reads nothing)."""
    def fn(logits):
        _, experts = torch.topk(logits, 2, dim=-1)
        return torch.sort(experts.reshape(-1))
    logits = rand((37, 8), device=device)
    compiled = compile_traced(fn, [logits], OPTIONS)
    ids, perm = compiled(logits)
    want = torch.sort(torch.topk(logits, 2, dim=-1)[1].reshape(-1), stable=True)
    assert torch.equal(ids, want[0]) and torch.equal(perm, want[1])
    kernels = kernels_of(compiled)
    assert all(k.reads for k in kernels), [(k.kind, k.nodes) for k in kernels]
    assert [k.kind for k in kernels] == ["reduction", "scan", "scan", "pointwise"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
@pytest.mark.parametrize("top", [None, "wider"])
def test_tokens_per_expert_are_the_sorts_own_counts(device, dtype, top, monkeypatch):
    """histc(sorted ids, bins=E, min=0, max=E-1) right after the counting sort reads the sort's
    counts of each key (no second pass over the keys), and cumsum of them joins the sort's own
    scan of the counts; over another range it counts the keys itself. Equal to eager either way
    (integer ids, CUDA's histc, against the float histc of the same ids: the CPU's shape rule is
    told it runs on the GPU)."""
    experts = 8
    hi = experts - 1 if top is None else experts
    if dtype == torch.int32:
        import torch._meta_registrations as meta
        monkeypatch.setattr(meta, "device_hint", lambda t: "cuda")

    def grouped(as_dtype):
        def fn(logits):
            _, ids = torch.topk(logits.softmax(-1), 2, dim=-1)
            ids_g, perm = torch.sort(ids.reshape(-1))
            per_expert = torch.histc(ids_g.to(as_dtype), bins=experts, min=0, max=hi)
            return ids_g, perm, per_expert, torch.cumsum(per_expert, 0, dtype=torch.int32)
        return fn
    logits = rand((45, experts), device=device)
    compiled = compile_traced(grouped(dtype), [logits], OPTIONS)
    got, want = compiled(logits), grouped(torch.float32)(logits)
    assert torch.equal(got[0], want[0]) and got[2].dtype == dtype
    assert torch.equal(got[2], want[2].to(dtype))
    assert torch.equal(got[3], want[3])
    kinds = [k.kind for k in kernels_of(compiled)]
    assert kinds == (["reduction", "scan", "scan", "pointwise"] if top is None else
                     ["reduction", "scan", "scan", "pointwise", "reduction", "scan"]), kinds


@pytest.mark.parametrize("start", [0, 1])
def test_the_inverse_of_the_sorts_permutation_is_its_ranks(device, start):
    """`inv[perm] = arange(n)` over a counting sort's permutation (a mixture of experts' unsort)
    reads the ranks the sort computed: no store kernel of its own, the gather through it fused
    into its reader; another arange is scattered as usual. Equal to eager either way."""
    def unsort(stable):
        def fn(logits, h):
            _, ids = torch.topk(logits, 2, dim=-1)
            _, perm = torch.sort(ids.reshape(-1), stable=stable)
            grouped = h[perm // 2] * 3
            inv = torch.empty_like(perm)
            inv[perm] = torch.arange(start, perm.shape[0] + start, device=perm.device)
            return grouped[inv.clamp(max=perm.shape[0] - 1)] + 1, inv
        return fn
    logits, h = rand((29, 8), device=device), rand((29, 5), device=device)
    compiled = compile_traced(unsort(False), [logits, h], OPTIONS)
    got, want = compiled(logits, h), unsort(True)(logits, h)   # the counting sort is stable
    assert torch.equal(got[1], want[1])
    assert_close(got[0], want[0])
    kinds = [k.kind for k in kernels_of(compiled)]
    assert kinds == (["reduction", "scan", "scan", "pointwise", "pointwise"] if start == 0 else
                     ["reduction", "scan", "scan", "pointwise", "pointwise", "pointwise"]), kinds
