"""Constant attention masks folded before AOTAutograd: masks built from sizes alone are dropped
(all true, all zero) or become is_causal=True (the causal triangle); masks that read data, and
masks of other shapes, stay. Every case compiled strict and compared with eager on random inputs."""
import logging
import math
import operator

import pytest
import torch
import torch.nn.functional as F

from autofuse import CompileOptions
from autofuse.api import Recorder
from autofuse.capture.attention_masks import SDPA_TARGETS, fold_attention_masks
from autofuse.capture.backend import make_backend
from tests.helpers import assert_close, rand
from tests.test_models import _ids, _llama, transformers

SDPA_CPU = "aten._scaled_dot_product_flash_attention_for_cpu.default"


def compile_watching(fn, rec):
    """fn compiled strict by autofuse; the list filled with every Dynamo graph as AOTAutograd saw it."""
    inner = make_backend(CompileOptions(strict=True, use_db=False, recorder=rec))
    seen = []

    def backend(gm, example_inputs):
        compiled = inner(gm, example_inputs)  # folds gm in place, then traces it
        seen.append(gm)
        return compiled

    torch._dynamo.reset()
    return torch.compile(fn, backend=backend, dynamic=False), seen


def folding_lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "autofuse.fusion" and "attention masks" in r.getMessage()]


def sdpa_calls(graphs):
    return [n for gm in graphs for n in gm.graph.nodes if n.op == "call_function" and n.target in SDPA_TARGETS]


def check(fn, args, *, folded, causal=False, grad=False):
    """Compile fn, compare it with eager (and its gradients with grad=True), check the folding."""
    rec = Recorder()
    compiled, seen = compile_watching(fn, rec)
    if grad:
        args = [a.detach().requires_grad_(a.is_floating_point()) for a in args]
        twins = [a.detach().requires_grad_(a.is_floating_point()) for a in args]
        expected, actual = fn(*args), compiled(*twins)
        g = torch.randn_like(expected)
        expected.backward(g)
        actual.backward(g)
        for a, t in zip(args, twins):
            assert a.grad is not None and t.grad is not None
            assert_close(t.grad, a.grad)
    else:
        with torch.no_grad():
            expected, actual = fn(*args), compiled(*args)
    assert_close(actual, expected)
    assert all(o.compiled for o in rec.outcomes)
    [call] = sdpa_calls(seen)
    assert (call.kwargs.get("attn_mask") is None) == folded, call.format_node()
    assert call.kwargs.get("is_causal", False) == causal, call.format_node()
    aten = [n for _, gm, _ in rec.graphs for n in gm.graph.nodes if str(n.target) == SDPA_CPU]
    if aten and folded:  # the ATen attention takes no mask, and nothing computes one
        assert all(n.kwargs.get("attn_mask") is None for n in aten)
        assert not any("arange" in str(n.target) for _, gm, _ in rec.graphs for n in gm.graph.nodes)
    return seen


def qkv(device, batch=2, heads=3, length=7, kv_length=None, dim=5, dtype=torch.float32):
    kv = length if kv_length is None else kv_length
    return [rand((batch, heads, n, dim), dtype, device, noncontig=i == 0)
            for i, n in enumerate((length, kv, kv))]


def positions(q, k):
    return torch.arange(q.shape[-2], device=q.device)[:, None], torch.arange(k.shape[-2], device=q.device)[None, :]


def all_true(q, k, v):
    """Built as transformers builds an encoder's mask under Dynamo: comparisons of aranges, expanded."""
    i, j = positions(q, k)
    mask = q.new_ones((), dtype=torch.bool) & (i >= 0) & (j < k.shape[-2])
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[None, None].expand(q.shape[0], -1, -1, -1))


def bidirectional(q, k, v):
    """The graph transformers' bidirectional mask leaves under Dynamo when no padding mask is given."""
    q_idx = (torch.arange(q.shape[-2], device=q.device) + 0)[None, None, :, None]
    kv_idx = (torch.arange(k.shape[-2], device=q.device) + 0)[None, None, None, :]
    mask = q_idx.new_ones((), dtype=torch.bool) & (q_idx >= 0).to(q.device) & (kv_idx < k.shape[-2])
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask.expand(q.shape[0], -1, q.shape[-2], k.shape[-2]))


def causal_bool(q, k, v):
    i, j = positions(q, k)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=(j <= i)[None, None])


def causal_float(q, k, v):
    i, j = positions(q, k)
    mask = torch.zeros(q.shape[-2], k.shape[-2], dtype=q.dtype, device=q.device).masked_fill(j > i, -math.inf)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def causal_float_min(q, k, v):
    """The additive causal mask with the dtype's lowest value above the diagonal."""
    mask = torch.full((q.shape[-2], k.shape[-2]), torch.finfo(q.dtype).min, dtype=q.dtype, device=q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask.triu(1))


def zeros_float(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=torch.zeros_like(q[..., :1]).expand(-1, -1, -1, k.shape[-2]))


def from_shape(q, k, v):
    """A mask made from another tensor's sizes only (new_ones, size())."""
    mask = q.new_ones(q.size(0), 1, q.size(-2), k.size(-2), dtype=torch.bool).tril()
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def sliding_window(q, k, v):
    i, j = positions(q, k)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=(j <= i) & (i - j < 3))


def random_offsets(q, k, v):
    i, j = positions(q, k)
    mask = torch.zeros(q.shape[-2], k.shape[-2], dtype=q.dtype, device=q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask.masked_fill(j > i, -1.5))


@pytest.mark.parametrize("fn, causal", [(all_true, False), (bidirectional, False), (zeros_float, False),
                                        (causal_bool, True), (causal_float, True), (causal_float_min, True),
                                        (from_shape, True)])
def test_constant_masks_folded(device, fn, causal):
    check(fn, qkv(device), folded=True, causal=causal)


def test_mask_folded_in_bf16(device):
    check(causal_float, qkv(device, length=9, dtype=torch.bfloat16), folded=True, causal=True)


@pytest.mark.parametrize("fn", [sliding_window, random_offsets])
def test_other_constant_masks_stay(device, fn):
    check(fn, qkv(device), folded=False)


def test_causal_mask_with_unequal_lengths_stays(device):
    check(causal_bool, qkv(device, length=5, kv_length=7), folded=False)


def test_all_true_mask_with_unequal_lengths_dropped(device):
    check(all_true, qkv(device, length=5, kv_length=7), folded=True)


def test_user_mask_stays(device):
    """A mask passed in (all true here: its data could change without a new trace)."""
    def fn(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    check(fn, [*qkv(device), torch.ones(7, 7, dtype=torch.bool, device=device)], folded=False)


def test_mask_from_user_data_stays(device):
    """Built from sizes, then and-ed with the user's padding mask."""
    def fn(q, k, v, keep):
        i, j = positions(q, k)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=(j <= i) & keep[:, None, None, :])

    keep = torch.ones(2, 7, dtype=torch.bool, device=device)
    keep[1, :2] = False
    check(fn, [*qkv(device), keep], folded=False)


def _mask_stores(rec):
    """Element counts of the kernels that compute an attention mask (its comparisons and ands)."""
    return [k.numel for _, _, art in rec.graphs for k in art.kernels
            if k.kind == "pointwise" and {"ge", "le", "bitwise_and"} & set(k.aten_ops)]


def _attention_with(mask_fn, device, dtype=torch.float32):
    """Compiled attention over equal query and key lengths (ATen's attention kernel, not the
    decomposed math) with mask_fn's mask, compared with eager; the recorder of its compile."""
    def fn(q, k, v, keep):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask_fn(q, keep))

    keep = torch.ones(2, 12, dtype=torch.bool, device=device)
    keep[1, 7:] = False
    args = [rand((2, 4, 12, 8), dtype, device) for _ in range(3)] + [keep]
    rec = Recorder()
    compiled, _ = compile_watching(fn, rec)
    with torch.no_grad():
        assert_close(compiled(*args), fn(*args))
    return rec


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_padding_mask_stored_without_the_query_positions(device, dtype):
    """transformers' mask from a padding mask, `keep[b, k] & (q >= 0)` over [B, 1, Q, K], is
    constant along Q: it is stored as [B, 1, 1, K] and reaches the attention as an expanded view."""
    def mask(q, keep):
        i = torch.arange(q.shape[-2], device=q.device)[None, None, :, None]
        return (keep[:, None, None, :] & (i >= 0)).expand(q.shape[0], 1, q.shape[-2], -1)

    stores = _mask_stores(_attention_with(mask, device, dtype))
    assert stores and all(n == 2 * 12 for n in stores), stores


def test_mask_reading_the_query_positions_stored_whole(device):
    def mask(q, keep):
        i = torch.arange(q.shape[-2], device=q.device)
        return (i[None, :] <= i[:, None]) & keep[:, None, None, :]

    assert _mask_stores(_attention_with(mask, device)) == [2 * 12 * 12]


def test_mask_from_buffer_stays(device):
    """A causal mask read from a module buffer: its data can change between calls."""
    class Attention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("causal", torch.ones(7, 7, dtype=torch.bool).tril())

        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=self.causal)

    check(Attention().to(device), qkv(device), folded=False)


def test_mask_mutated_by_data_stays(device):
    def fn(q, k, v):
        i, j = positions(q, k)
        mask = (j <= i).clone()
        mask[0] = v[0, 0, :, 0] > 0  # row 0 from the data of v
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    check(fn, qkv(device), folded=False)


def test_mask_folded_beside_another_constant_mutated_by_data(device):
    """A constant the data updates in place (a mixture of experts' `zeros_like(h).index_add_`) is
    unknown at compile time, and so is every constant it shares memory with or feeds; a mask built
    apart from it still folds."""
    def fn(q, k, v):
        i, j = positions(q, k)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=j <= i)
        acc = torch.zeros_like(out)
        acc.index_add_(2, torch.arange(q.shape[-2], device=q.device).flip(0), out)
        return acc + out

    check(fn, qkv(device), folded=True, causal=True)


def test_mask_sharing_memory_with_a_constant_mutated_by_data_stays(device):
    """The causal mask and a view of it that the data updates: the mask's own memory changes."""
    def fn(q, k, v):
        i, j = positions(q, k)
        mask = (j <= i).clone()
        row = mask[0]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        row.copy_(v[0, 0, :, 0] > 0)
        return out, mask

    check(fn, qkv(device), folded=False)


def test_mask_with_dropout_stays(device):
    """A mask next to dropout is never folded: the call keeps its mask and dropout_p."""
    def fn(q, k, v):
        i, j = positions(q, k)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=j <= i, dropout_p=0.5)

    q, k, v = qkv(device)
    rec = Recorder()
    compiled, seen = compile_watching(fn, rec)
    torch.manual_seed(0)
    compiled(q, k, v)
    [call] = sdpa_calls(seen)
    assert call.kwargs["attn_mask"] is not None and call.kwargs["dropout_p"] == 0.5


@pytest.mark.parametrize("fn, causal", [(causal_bool, True), (all_true, False), (causal_float, True)])
def test_training_gradients(device, fn, causal):
    check(fn, qkv(device), folded=True, causal=causal, grad=True)


def test_pass_on_a_graph_without_static_metadata_changes_nothing():
    """Symbolic sizes: nothing is evaluated, the graph is unchanged."""
    graphs = []

    def backend(gm, example_inputs):
        before = str(gm.graph)
        result = fold_attention_masks(gm, example_inputs)
        graphs.append((before, str(gm.graph), result))
        return gm.forward

    torch._dynamo.reset()
    q, k, v = qkv("cpu")
    torch.compile(causal_bool, backend=backend, dynamic=True)(q, k, v)
    [(before, after, result)] = graphs
    assert before == after and result.folded == 0 and result.kept == 1


def test_folding_logged_once_per_graph(device, caplog):
    caplog.set_level(logging.INFO, logger="autofuse.fusion")
    check(causal_bool, qkv(device), folded=True, causal=True)
    lines = folding_lines(caplog)
    assert lines == ["attention masks: 1 of 1 folded (0 dropped, 1 made is_causal, 0 kept)"]


def test_dead_mask_nodes_removed(device):
    [gm] = check(sliding_window, qkv(device), folded=False)
    assert any(n.target is operator.and_ for n in gm.graph.nodes)  # a kept mask keeps its nodes
    [gm] = check(causal_bool, qkv(device), folded=True, causal=True)
    assert [n.op for n in gm.graph.nodes if n.op not in ("placeholder", "output")] == ["call_function"]


# ---- transformers models (tiny configs, random weights) ------------------------------------------

def model_check(model, kwargs, get, device, caplog):
    """The model compiled strict equals eager; returns the folding lines logged and the sdpa calls."""
    caplog.set_level(logging.INFO, logger="autofuse.fusion")
    model = model.to(device).eval()
    kwargs = {k: v.to(device) for k, v in kwargs.items()}
    rec = Recorder()
    compiled, seen = compile_watching(model, rec)
    with torch.no_grad():
        expected, actual = get(model(**kwargs)), get(compiled(**kwargs))
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)
    assert rec.outcomes and all(o.compiled for o in rec.outcomes)
    lines = folding_lines(caplog)
    return lines, sdpa_calls(seen)


def test_gpt2_causal_mask_folded(device, caplog):
    """Without a KV cache (as in training and the benchmarks) the causal mask is built from aranges."""
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=500, n_positions=64, use_cache=False,
                                  bos_token_id=0, eos_token_id=0)
    lines, calls = model_check(transformers.GPT2LMHeadModel(cfg), dict(input_ids=_ids(2, 13, 500)),
                               lambda o: o.logits, device, caplog)
    assert lines == ["attention masks: 2 of 2 folded (0 dropped, 2 made is_causal, 0 kept)"]
    assert all(c.kwargs["attn_mask"] is None and c.kwargs["is_causal"] for c in calls)


def test_llama_causal_mask_folded(device, caplog):
    lines, calls = model_check(_llama(use_cache=False), dict(input_ids=_ids(2, 11, 200)), lambda o: o.logits,
                               device, caplog)
    assert lines == ["attention masks: 2 of 2 folded (0 dropped, 2 made is_causal, 0 kept)"]
    assert all(c.kwargs["attn_mask"] is None and c.kwargs["is_causal"] for c in calls)


def test_mixture_of_experts_causal_mask_folded(device, caplog):
    """Mixtral's experts add their outputs into `zeros_like(h)` in place: that constant is not the mask's."""
    cfg = transformers.MixtralConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, vocab_size=200,
                                     max_position_embeddings=64, use_cache=False)
    torch.manual_seed(0)
    lines, calls = model_check(transformers.MixtralForCausalLM(cfg), dict(input_ids=_ids(2, 11, 200)),
                               lambda o: o.logits, device, caplog)
    assert lines == ["attention masks: 2 of 2 folded (0 dropped, 2 made is_causal, 0 kept)"]
    assert all(c.kwargs["attn_mask"] is None and c.kwargs["is_causal"] for c in calls)


def test_llama_padding_mask_stays(device, caplog):
    ids, mask = _ids(2, 11, 200), torch.ones(2, 11, dtype=torch.long)
    mask[1, :3] = 0
    lines, calls = model_check(_llama(use_cache=False), dict(input_ids=ids, attention_mask=mask), lambda o: o.logits,
                               device, caplog)
    assert lines == ["attention masks: 0 of 2 folded (0 dropped, 0 made is_causal, 2 kept)"]


def test_bert_user_mask_stays(device, caplog):
    cfg = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
                                  vocab_size=300, max_position_embeddings=64)
    torch.manual_seed(0)
    mask = torch.ones(2, 11, dtype=torch.long)
    mask[1, 7:] = 0
    lines, calls = model_check(transformers.BertModel(cfg), dict(input_ids=_ids(2, 11, 300), attention_mask=mask),
                               lambda o: o.last_hidden_state, device, caplog)
    assert lines == ["attention masks: 0 of 2 folded (0 dropped, 0 made is_causal, 2 kept)"]
    assert all(c.kwargs["attn_mask"] is not None for c in calls)


def test_vit_attention_without_mask(device, caplog):
    """ViT attends to everything: whatever mask transformers builds from sizes, none reaches sdpa."""
    cfg = transformers.ViTConfig(image_size=16, patch_size=4, hidden_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, intermediate_size=96)
    torch.manual_seed(0)
    lines, calls = model_check(transformers.ViTModel(cfg), dict(pixel_values=torch.randn(2, 3, 16, 16)),
                               lambda o: o.last_hidden_state, device, caplog)
    assert len(calls) == 2 and all(c.kwargs.get("attn_mask") is None for c in calls)
    assert all(line.startswith("attention masks: 2 of 2 folded (2 dropped") for line in lines)


def test_llama_training_with_folded_mask(device, caplog):
    """Forward and backward through is_causal attention: loss and gradients equal eager."""
    caplog.set_level(logging.INFO, logger="autofuse.fusion")
    model = _llama(use_cache=False).to(device).train()
    twin = _llama(use_cache=False).to(device).train()
    ids = _ids(2, 9, 200).to(device)
    rec = Recorder()
    compiled, seen = compile_watching(twin, rec)
    losses = [m(input_ids=ids, labels=ids).loss for m in (model, compiled)]
    for loss in losses:
        loss.backward()
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5, msg=name)
    assert {o.label for o in rec.outcomes} >= {"forward", "backward"} and all(o.compiled for o in rec.outcomes)
    assert all(c.kwargs["is_causal"] and c.kwargs["attn_mask"] is None for c in sdpa_calls(seen))
    lines = folding_lines(caplog)
    assert lines == ["attention masks: 2 of 2 folded (0 dropped, 2 made is_causal, 0 kept)"]


def test_graph_without_dynamo_metadata_changes_nothing():
    """An FX graph without Dynamo's example values (sizes unknown): the mask stays."""
    class Causal(torch.nn.Module):
        def forward(self, q, k, v):
            return causal_bool(q, k, v)

    gm = torch.fx.symbolic_trace(Causal())
    before = str(gm.graph)
    result = fold_attention_masks(gm, qkv("cpu"))
    assert str(gm.graph) == before and (result.folded, result.kept) == (0, 1)


def test_evaluation_failure_leaves_graph_unchanged(device, monkeypatch):
    """A mask whose evaluation raises stays, and the program still compiles and matches eager."""
    from autofuse.capture import attention_masks

    def fail(*args, **kwargs):
        raise RuntimeError("cannot evaluate")

    monkeypatch.setattr(attention_masks, "_evaluate", fail)
    check(causal_bool, qkv(device), folded=False)
