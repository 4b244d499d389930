"""Grouped-query attention: cuDNN attention ops read the key/value heads unrepeated where the
graph repeats them (`repeat_kv`), and only there. Graph tests trace on the CPU; the compiled
results are checked against eager on CUDA."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import autofuse
from autofuse.api import Recorder
from autofuse.capture.backend import make_backend
from autofuse.capture.decompositions import decomposition_table
from autofuse.capture.grouped_heads import GROUPED_KERNELS, group_matmul_heads, read_grouped_heads

from .helpers import assert_close, rand
from .test_regions import _compiled, _instances

aten = torch.ops.aten


def repeat_kv(x: torch.Tensor, group: int) -> torch.Tensor:
    """transformers' repeat of each key/value head for its group of query heads."""
    b, h, length, d = x.shape
    return x[:, :, None, :, :].expand(b, h, group, length, d).reshape(b, h * group, length, d)


def _cudnn(q, k, v, mask):
    return aten._scaled_dot_product_cudnn_attention(q, k, v, mask, False, scale=0.125)[0]


def _trace(fn, *shapes):
    args = [torch.randn(s, dtype=torch.bfloat16) for s in shapes]
    return make_fx(fn, tracing_mode="fake", decomposition_table=decomposition_table())(*args)


def _clones(gm) -> int:
    return sum(1 for n in gm.graph.nodes if n.target is aten.clone.default)


def _reads_copies(att: torch.fx.Node) -> bool:
    """Does an attention op read a key or value that is a reshaped copy (a repeat)?"""
    return any(isinstance(a, torch.fx.Node) and a.args and isinstance(a.args[0], torch.fx.Node)
               and a.args[0].target is aten.clone.default for a in att.args[1:3])


@pytest.mark.parametrize("repeat", ["repeat_kv", "repeat_interleave"])
def test_repeated_keys_and_values_are_read_unrepeated(repeat):
    """transformers' repeat and `repeat_interleave` over the head dim (which the decompositions
    make the same copy) both leave the attention op."""
    def rep(x):
        return repeat_kv(x, 4) if repeat == "repeat_kv" else x.repeat_interleave(4, dim=1)
    gm = _trace(lambda q, k, v, m: _cudnn(q, rep(k), rep(v), m),
                (2, 8, 5, 16), (2, 2, 7, 16), (2, 2, 7, 16), (2, 1, 5, 7))
    assert _clones(gm) == 2
    assert read_grouped_heads(gm, ("cpu",), supported=_reads) == 1
    assert _clones(gm) == 0
    att = next(n for n in gm.graph.nodes if n.target in GROUPED_KERNELS)
    assert [a.op for a in att.args[1:3]] == ["placeholder", "placeholder"] and not _reads_copies(att)


def _reads(op, device) -> bool:
    """The CPU tests' stand-in for the GPU probe: the op reads grouped heads."""
    return True


@pytest.mark.parametrize("case", ["value_not_repeated", "batch_expanded", "other_device", "heads_differ",
                                  "op_refuses"])
def test_what_is_left_repeated(case):
    """Only key and value both repeated along a new dim 2, on a device whose kernels read groups."""
    devices = ("cpu",)
    if case == "value_not_repeated":
        gm = _trace(lambda q, k, v, m: _cudnn(q, repeat_kv(k, 4), v, m),
                    (2, 8, 5, 16), (2, 2, 7, 16), (2, 8, 7, 16), (2, 1, 5, 7))
    elif case == "batch_expanded":   # [1, kv, L, d] broadcast over a batch of 2 as well as repeated
        def fn(q, k, v, m):
            rep = [x[:, :, None].expand(2, 2, 4, 7, 16).reshape(2, 8, 7, 16) for x in (k, v)]
            return _cudnn(q, *rep, m)
        gm = _trace(fn, (2, 8, 5, 16), (1, 2, 7, 16), (1, 2, 7, 16), (2, 1, 5, 7))
    elif case == "other_device":
        gm = _trace(lambda q, k, v, m: _cudnn(q, repeat_kv(k, 4), repeat_kv(v, 4), m),
                    (2, 8, 5, 16), (2, 2, 7, 16), (2, 2, 7, 16), (2, 1, 5, 7))
        devices = ("cuda",)
    elif case == "heads_differ":   # key and value repeated by different groups (no grouped attention)
        gm = _trace(lambda q, k, v, m: _cudnn(q, repeat_kv(k, 4), repeat_kv(v, 2), m),
                    (2, 8, 5, 16), (2, 2, 7, 16), (2, 4, 7, 16), (2, 1, 5, 7))
    else:   # a torch whose op refuses grouped heads (what the probe finds; on the CPU it always does)
        gm = _trace(lambda q, k, v, m: _cudnn(q, repeat_kv(k, 4), repeat_kv(v, 4), m),
                    (2, 8, 5, 16), (2, 2, 7, 16), (2, 2, 7, 16), (2, 1, 5, 7))
        before = _clones(gm)
        assert read_grouped_heads(gm, devices) == 0 and _clones(gm) == before > 0
        return
    before = _clones(gm)
    assert read_grouped_heads(gm, devices, supported=_reads) == 0
    assert _clones(gm) == before > 0


def grouped_attention(x, wq, wk, wv, mask):
    """LLaMA-style attention with 8 query and 2 key/value heads, the keys a transposed view of their
    projection, and an additive mask (which sends torch's attention to cuDNN, not flash)."""
    b, length, _ = x.shape
    q = (x @ wq).view(b, length, 8, 32).transpose(1, 2)
    k = (x @ wk).view(b, length, 2, 32).transpose(1, 2)
    v = (x @ wv).view(b, length, 2, 32).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, repeat_kv(k, 4), repeat_kv(v, 4), attn_mask=mask)
    return o.transpose(1, 2).reshape(b, length, 256)


@pytest.mark.gpu
def test_grouped_attention_equals_eager_on_cuda(device, monkeypatch):
    made = _instances(monkeypatch)
    torch._dynamo.reset()
    options = autofuse.CompileOptions(strict=True, poison=True, use_db=False, recorder=Recorder())
    f = torch.compile(grouped_attention, backend=make_backend(options), dynamic=False)
    dt = torch.bfloat16
    x = rand((3, 37, 256), dt, device, low=-1, high=1)
    w = [rand((256, n), dt, device, low=-0.1, high=0.1) for n in (256, 64, 64)]
    mask = torch.where(torch.rand(37, 37, device=device) > 0.2, 0.0, float("-inf")).to(dt)
    mask.fill_diagonal_(0.0)
    with torch.no_grad():
        assert_close(f(x, *w, mask), grouped_attention(x, *w, mask), rtol=2e-2, atol=2e-2)
    att = [n for g in made for n in g.eager_gm.graph.nodes if n.target in GROUPED_KERNELS]
    assert not any(_reads_copies(n) for n in att)   # where this torch picked such a kernel


@pytest.mark.gpu
def test_a_grouped_query_decoder_in_bf16_equals_eager(device, monkeypatch):
    """A LLaMA-style decoder (8 query, 2 key/value heads of 64) in bf16 with a padding mask, and its
    decoding steps over a growing cache: logits within bf16 tolerance of eager's."""
    transformers = pytest.importorskip("transformers")
    made = _instances(monkeypatch)
    cfg = transformers.LlamaConfig(hidden_size=512, intermediate_size=768, num_hidden_layers=2,
                                   num_attention_heads=8, num_key_value_heads=2, vocab_size=320)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(device, torch.bfloat16).eval()
    ids = torch.randint(0, 320, (2, 29), device=device)
    mask = torch.ones(2, 29, dtype=torch.long, device=device)
    mask[1, :5] = 0
    torch._dynamo.reset()
    options = {"strict": True, "use_db": False, "recorder": Recorder()}
    compiled = torch.compile(model.forward, backend="autofuse", options=options)
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=mask).logits
        got = compiled(input_ids=ids, attention_mask=mask).logits
        assert_close(got[:, 5:], want[:, 5:], rtol=5e-2, atol=5e-2)
        cache = transformers.DynamicCache(config=cfg)
        eager_cache = transformers.DynamicCache(config=cfg)
        compiled(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True)
        model(input_ids=ids, attention_mask=mask, past_key_values=eager_cache, use_cache=True)
        for step in range(4):   # one token a step, the cache length symbolic from the second
            token = torch.randint(0, 320, (2, 1), device=device)
            mask = torch.cat([mask, torch.ones(2, 1, dtype=torch.long, device=device)], dim=1)
            got = compiled(input_ids=token, attention_mask=mask, past_key_values=cache, use_cache=True).logits
            want = model(input_ids=token, attention_mask=mask, past_key_values=eager_cache, use_cache=True).logits
            assert_close(got, want, rtol=5e-2, atol=5e-2)
    att = [n for g in made for n in g.eager_gm.graph.nodes if n.target in GROUPED_KERNELS]
    assert not any(_reads_copies(n) for n in att)


def eager_gqa(q, k, v, group, rep=repeat_kv):
    """transformers' eager attention: products over the repeated heads, a softmax between."""
    scores = q @ rep(k, group).transpose(2, 3) * 0.25
    return torch.softmax(scores, dim=-1) @ rep(v, group)


def _interleave(x, group):
    return x.repeat_interleave(group, dim=1)


def _bmms(gm) -> int:
    return sum(1 for n in gm.graph.nodes if n.target is aten.bmm.default)


@pytest.mark.parametrize("query", ["contiguous", "transposed", "one_row"])
@pytest.mark.parametrize("rep", [repeat_kv, _interleave], ids=["repeat_kv", "repeat_interleave"])
def test_eager_attention_products_read_grouped_heads(query, rep):
    """Both products of an eager grouped-query attention read the unrepeated key and value, with the
    same result; a query whose heads and rows cannot be one batch's rows is copied once instead."""
    rows = 1 if query == "one_row" else 5
    shapes = [(2, 6, rows, 16), (2, 2, 7, 16), (2, 2, 7, 16)]
    if query == "transposed":   # heads of a projection: [b, rows, h, d] seen as [b, h, rows, d]
        fn = lambda q, k, v: eager_gqa(q.transpose(1, 2), k, v, 3, rep)   # noqa: E731
        shapes[0] = (2, rows, 6, 16)
    else:
        fn = lambda q, k, v: eager_gqa(q, k, v, 3, rep)   # noqa: E731
    args = [torch.randn(s) for s in shapes]
    gm = make_fx(fn, tracing_mode="fake", decomposition_table=decomposition_table())(*args)
    copied = 1 if query == "transposed" else 0   # matmul itself copies such a query
    assert _clones(gm) == 2 + copied and _bmms(gm) == 2
    assert group_matmul_heads(gm) == 2
    assert _bmms(gm) == 2 and _clones(gm) == copied
    assert_close(gm(*args), fn(*args), rtol=1e-5, atol=1e-5)


def test_products_over_unrepeated_or_broadcast_heads_are_left():
    """A product whose operand is not a repeat along a new dim 2 (the heads broadcast by matmul
    itself, or a batch expanded too) keeps its graph."""
    def fn(q, k, v):
        kb = k[:, :, None].expand(2, 2, 3, 7, 16).reshape(2, 6, 7, 16)   # batch of 1 expanded to 2
        return (q @ kb.transpose(2, 3)) @ v
    gm = _trace(fn, (2, 6, 5, 16), (1, 2, 7, 16), (2, 6, 7, 16))
    before = _clones(gm)
    assert group_matmul_heads(gm) == 0 and _clones(gm) == before > 0


def decode_step(x, k_cache, v_cache, wq, wk, wv):
    """One decoding step of eager grouped-query attention over a growing cache (4 query heads, 2
    key/value heads): the new key and value concatenated to the cache, attention over all of it."""
    b = x.shape[0]
    q = (x @ wq).view(b, 1, 4, 8).transpose(1, 2)
    k = torch.cat([k_cache, (x @ wk).view(b, 1, 2, 8).transpose(1, 2)], dim=2)
    v = torch.cat([v_cache, (x @ wv).view(b, 1, 2, 8).transpose(1, 2)], dim=2)
    o = eager_gqa(q, k, v, 2)
    return o.transpose(1, 2).reshape(b, 1, 32), k, v


def test_decoding_steps_over_a_growing_cache_read_grouped_heads(monkeypatch):
    """Steps at three cache lengths (the length symbolic from the second) equal eager, and no
    compiled graph copies the cache per query head."""
    made = _instances(monkeypatch)
    f = _compiled(decode_step, Recorder())
    w = [rand((32, n), low=-0.3, high=0.3) for n in (32, 16, 16)]
    for length in (5, 6, 11):
        x = rand((3, 1, 32), low=-1, high=1)
        kc, vc = rand((3, 2, length, 8)), rand((3, 2, length, 8), noncontig=True)
        with torch.no_grad():
            got, want = f(x, kc, vc, *w), decode_step(x, kc, vc, *w)
        for g, e in zip(got, want):
            assert_close(g, e, rtol=1e-4, atol=1e-4)
    assert made and all(_clones(g.eager_gm) == 0 for g in made)
