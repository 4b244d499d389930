"""Whole models, strict, against eager: tiny configs of every family (random weights, no hub).

Every captured graph must compile (strict=True raises otherwise): lifted constants, buffers and
their updates, RNG, extern attention, embeddings, masks, keyword inputs and ModelOutput returns.
"""
import copy
import sys
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import autofuse
from autofuse.api import Recorder
from autofuse.schedule.heuristics import Heuristics


def _hide_broken_torchvision() -> None:
    """transformers imports torchvision whenever it is installed; a torchvision build that does not
    match torch (PyPI's CUDA wheel next to the CPU build of torch: `operator torchvision::nms does
    not exist`) fails to import and takes transformers' models with it. Such a build is hidden."""
    try:
        import torchvision  # noqa: F401
    except Exception:  # noqa: BLE001 - any failure means the build is unusable
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]
        sys.modules["torchvision"] = None  # type: ignore[assignment]


_hide_broken_torchvision()
transformers = pytest.importorskip("transformers")


def _compile(model, rec=None):
    torch._dynamo.reset()
    return autofuse.compile(model, strict=True, use_db=False, recorder=rec)


def _all_compiled(rec: Recorder) -> None:
    assert rec.outcomes, "no graph was captured"
    assert all(o.compiled for o in rec.outcomes), [o.reason for o in rec.outcomes if not o.compiled]


def _forward_matches(model, kwargs, get, device, rtol=1e-4, atol=1e-5):
    model = model.to(device).eval()
    kwargs = {k: v.to(device) for k, v in kwargs.items()}
    rec = Recorder()
    f = _compile(model, rec)
    with torch.no_grad():
        ref = get(model(**kwargs))
        out = get(f(**kwargs))
    torch.testing.assert_close(out, ref, rtol=rtol, atol=atol)
    _all_compiled(rec)
    return rec


def _ids(batch, seq, vocab, seed=0):
    return torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(seed))


def _llama(**kw):
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=200, max_position_embeddings=64, **kw)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg)


def _gpt2(**kw):
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=500, **kw))


def test_llama_forward_position_ids_and_mask(device):
    """RMSNorm, RoPE, SwiGLU, grouped-query attention; integer position ids and a padding mask."""
    ids = _ids(2, 11, 200)
    mask = torch.ones(2, 11, dtype=torch.long)
    mask[1, :3] = 0  # left padding
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    rec = _forward_matches(_llama(), dict(input_ids=ids, attention_mask=mask, position_ids=pos),
                           lambda o: o.logits, device)
    ops = {op for _, _, art in rec.graphs for k in art.kernels for op in k.aten_ops}
    assert any("attention" in op for op in ops)  # attention runs as an extern kernel in the graph


def test_generation_with_a_growing_cache_and_with_a_static_one(device):
    """`generate` through the compiled forward: a cache growing one token per step makes the step's
    cache length symbolic from the third call on, and that graph runs as static regions compiled
    once (two layers: three), with max_sizes at 2 and seven new tokens; a static cache compiles the
    prefill and one decoding graph. Greedy tokens equal eager's, no graph left to ATen ops."""
    torch.manual_seed(0)
    model = _llama().to(device).eval()
    model.generation_config.disable_compile = True   # on a GPU transformers would compile the static-cache step itself
    ids = _ids(1, 5, 200).to(device)
    kw = dict(max_new_tokens=7, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        want = model.generate(ids, **kw)
    forward = model.forward
    for cache, graphs in (("dynamic", 5), ("static", 2)):
        rec = Recorder()
        torch._dynamo.reset()
        model.forward = torch.compile(forward, backend="autofuse",
                                      options={"strict": True, "use_db": False, "recorder": rec, "max_sizes": 2})
        extra = {"cache_implementation": "static"} if cache == "static" else {}
        with torch.no_grad(), warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*max_sizes")   # no size left to ATen ops
            got = model.generate(ids, **kw, **extra)
        model.forward = forward
        assert torch.equal(got, want), cache
        assert len(rec.graphs) == graphs and all(o.compiled for o in rec.outcomes), (cache, rec.outcomes)


def test_gpt2_forward_lifted_constants_model_output(device):
    """GPT-2's forward reads lifted constant tensors; it returns a ModelOutput."""
    m = _gpt2()
    out = _forward_matches(m, dict(input_ids=_ids(2, 12, 500)), lambda o: o.logits, device)
    assert out.graphs


def test_gpt2_bf16_forward(device):
    """bf16 end to end: compiled output as close to the f32 model as bf16 eager is."""
    m32 = _gpt2().to(device).eval()
    m16 = copy.deepcopy(m32).to(torch.bfloat16)
    ids = _ids(2, 12, 500).to(device)
    rec = Recorder()
    f = _compile(m16, rec)
    with torch.no_grad():
        ref32 = m32(input_ids=ids).logits
        eager16 = m16(input_ids=ids).logits.float()
        out16 = f(input_ids=ids).logits.float()
    _all_compiled(rec)
    torch.testing.assert_close(out16, eager16, rtol=5e-2, atol=5e-2)
    assert (out16 - ref32).abs().max() <= 2 * (eager16 - ref32).abs().max() + 1e-2


def test_bert_forward_attention_mask(device):
    cfg = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
                                  vocab_size=300, max_position_embeddings=64)
    torch.manual_seed(0)
    mask = torch.ones(2, 11, dtype=torch.long)
    mask[1, 7:] = 0
    _forward_matches(transformers.BertModel(cfg), dict(input_ids=_ids(2, 11, 300), attention_mask=mask),
                     lambda o: o.last_hidden_state, device)


def test_vit_forward(device):
    cfg = transformers.ViTConfig(image_size=16, patch_size=4, hidden_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, intermediate_size=96)
    torch.manual_seed(0)
    _forward_matches(transformers.ViTModel(cfg), dict(pixel_values=torch.randn(2, 3, 16, 16)),
                     lambda o: o.last_hidden_state, device)


class _Block(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(x + self.b2(self.c2(torch.relu(self.b1(self.c1(x))))))


class _ResNet(nn.Module):
    """ResNet-style: conv+BN+ReLU stem, two basic blocks, global pooling, a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.blocks = nn.Sequential(_Block(8), _Block(8))
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(self.blocks(self.stem(x)).mean((2, 3)))


def test_resnet_forward(device):
    torch.manual_seed(0)
    m = _ResNet()
    with torch.no_grad():  # non-trivial running statistics
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
    _forward_matches(m, dict(x=torch.randn(2, 3, 13, 11)), lambda o: o, device)


def _train_step_matches(model, kwargs, loss_of, device, rtol=1e-4, atol=1e-5):
    """One AdamW step, eager and compiled: same loss, gradients, parameters and buffers after it."""
    model = model.to(device).train()
    kwargs = {k: v.to(device) for k, v in kwargs.items()}
    twin = copy.deepcopy(model)
    rec = Recorder()
    f = _compile(twin, rec)
    # Adam's first step is lr * g / (|g| + eps): sign-like for tiny gradients, so eps is large enough
    # that gradients equal within tolerance give parameters equal within 10x that tolerance
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3, eps=1e-3) for m in (model, twin)]
    losses = []
    for m, fn, opt in zip((model, twin), (model, f), opts):
        loss = loss_of(fn(**kwargs))
        loss.backward()
        losses.append(loss.detach())
    torch.testing.assert_close(losses[1], losses[0], rtol=rtol, atol=atol)
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        if not p.requires_grad:   # a frozen table (Whisper's sinusoidal positions)
            continue
        assert p.grad is not None and q.grad is not None, name
        torch.testing.assert_close(q.grad, p.grad, rtol=rtol, atol=atol, msg=name)
    p_before = {name: p.detach().clone() for name, p in model.named_parameters()}
    for opt in opts:
        opt.step()
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        torch.testing.assert_close(q, p, rtol=rtol, atol=10 * atol, msg=name)
        assert not p.requires_grad or not torch.equal(p, p_before[name]), name  # the step moved the parameter
    for (name, b), c in zip(model.named_buffers(), twin.buffers()):
        torch.testing.assert_close(c, b, rtol=rtol, atol=atol, msg=name)
    _all_compiled(rec)
    assert {o.label for o in rec.outcomes} >= {"forward", "backward"}


def test_llama_training_step(device):
    ids = _ids(2, 9, 200)
    _train_step_matches(_llama(), dict(input_ids=ids, labels=ids), lambda o: o.loss, device)


def test_resnet_training_step_batchnorm_buffers(device):
    """BatchNorm in train mode: the running statistics updated in the graph land in the buffers."""
    torch.manual_seed(0)

    class WithLoss(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = _ResNet()

        def forward(self, x, y):
            return F.cross_entropy(self.net(x), y)

    _train_step_matches(WithLoss(), dict(x=torch.randn(2, 3, 12, 12), y=torch.tensor([1, 7])), lambda o: o, device)


def test_dropout_same_mask_forward_and_backward(device):
    """Dropout in training: a fraction p dropped, and the backward drops exactly the same elements."""
    def fn(x, w):
        return F.dropout(x * w, p=0.3, training=True)

    x = torch.randn(64, 129, device=device, requires_grad=True)
    w = torch.randn(129, device=device)
    rec = Recorder()
    f = _compile(fn, rec)
    torch.manual_seed(1)
    y = f(x, w)
    g = torch.randn_like(y)
    y.backward(g)
    kept = y != 0
    assert 0.25 < 1 - kept.float().mean().item() < 0.35
    torch.testing.assert_close(y, torch.where(kept, x.detach() * w / 0.7, 0.0))
    torch.testing.assert_close(x.grad, torch.where(kept, g * w / 0.7, 0.0))
    torch.manual_seed(1)
    torch.testing.assert_close(f(x, w), y)  # seeded like eager
    _all_compiled(rec)


def test_graph_break_each_piece_compiled(device):
    def fn(x, y):
        a = torch.sin(x) + y
        torch._dynamo.graph_break()
        return a.cos() * 2

    x, y = torch.randn(5, 7, device=device), torch.randn(7, device=device)
    report = autofuse.explain(fn, (x, y), use_db=False, strict=True)
    assert report.graphs == 2 and len(report.outcomes) == 2 and not report.eager_graphs
    assert "graph 1 (inference): compiled" in str(report)


class _FailingHeuristics(Heuristics):
    def should_realize(self, *args, **kwargs):
        raise RuntimeError("realize heuristic exploded")


def test_explain_reports_eager_graph_with_reason(device):
    """Non-strict: a graph that does not compile runs eagerly (correctly), warns with the reason,
    and explain's report lists it."""
    def fn(x, y):
        return torch.relu(x + y) * 3

    x, y = torch.randn(6, 5, device=device), torch.randn(5, device=device)
    with pytest.warns(UserWarning, match="realize heuristic exploded"):
        report = autofuse.explain(fn, (x, y), use_db=False, heuristics=_FailingHeuristics())
    [outcome] = report.eager_graphs
    assert not outcome.compiled and "realize heuristic exploded" in outcome.reason
    assert "EAGER (not compiled): RuntimeError: realize heuristic exploded" in str(report)
    assert '"compiled": false' in report.to_json()
    torch._dynamo.reset()
    with pytest.warns(UserWarning):
        out = autofuse.compile(fn, use_db=False, heuristics=_FailingHeuristics())(x, y)
    torch.testing.assert_close(out, fn(x, y))


def test_lifted_constant_tensor(device):
    """A tensor made inside forward becomes a get_attr constant of the functional graph."""
    class M(nn.Module):
        def forward(self, x):
            scale = torch.tensor([1.5, -2.0, 0.25], device=x.device)
            return (x * scale).sum(-1) + torch.tensor(3.0, device=x.device)

    x = torch.randn(7, 3, device=device)
    _forward_matches(M(), dict(x=x), lambda o: o, device)


def test_a_constant_read_by_several_nodes_is_one_input(device):
    """Tied weights traced with make_fx: two get_attr nodes of one target become one placeholder
    (two placeholders of one name made the graph's code invalid)."""
    from autofuse.capture.trace import compile_traced

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(11, 6)
            self.head = nn.Linear(6, 11, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, i):
            return self.head(torch.tanh(self.emb(i)))

    m = Tied().to(device)
    i = torch.randint(0, 11, (3, 4), device=device)
    got = compile_traced(m, [i])(i)
    torch.testing.assert_close(got[0], m(i), rtol=1e-4, atol=1e-5)


def test_keyword_inputs_int_bool_mask_and_none(device):
    """Keyword inputs: integer ids, a bool mask, a Python int and None; a dict of outputs."""
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(37, 12)
            self.proj = nn.Linear(12, 12)

        def forward(self, ids, *, mask=None, bias=None, repeat: int = 1):
            h = self.emb(ids)
            causal = torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool, device=ids.device).triu(1)
            scores = (h @ h.transpose(1, 2)).masked_fill(causal, float("-inf"))
            if mask is not None:
                scores = torch.where(mask[:, None, :], scores, torch.full_like(scores, -1e4))
            h = torch.softmax(scores, -1) @ self.proj(h)
            if bias is not None:
                h = h + bias
            return {"hidden": h * repeat, "pos": torch.arange(ids.shape[1], device=ids.device) + ids[:, :1]}

    torch.manual_seed(0)
    ids = _ids(3, 7, 37)
    mask = torch.rand(3, 7) > 0.3
    mask[:, 0] = True
    for kw in (dict(ids=ids, mask=mask, repeat=2), dict(ids=ids, bias=torch.randn(12))):
        m = M().to(device).eval()
        kw = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
        rec = Recorder()
        f = _compile(m, rec)
        with torch.no_grad():
            ref, got = m(**kw), f(**kw)
        torch.testing.assert_close(got["hidden"], ref["hidden"], rtol=1e-4, atol=1e-5)
        assert torch.equal(got["pos"], ref["pos"])
        _all_compiled(rec)


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_attention_gradients(device, kv_heads):
    """Scaled dot-product attention (causal, grouped-query) runs as an extern kernel whose backward
    receives the forward's logsumexp: gradients as eager's."""
    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv_heads != 4) * 2

    gen = torch.Generator().manual_seed(0)
    shapes = [(2, 4, 11, 16), (2, kv_heads, 11, 16), (2, kv_heads, 11, 16)]
    base = [torch.randn(s, generator=gen).to(device) for s in shapes]
    eager_in = [t.clone().requires_grad_() for t in base]
    comp_in = [t.clone().requires_grad_() for t in base]
    rec = Recorder()
    f = _compile(fn, rec)
    g = torch.randn(2, 4, 11, 16, generator=gen).to(device)
    fn(*eager_in).backward(g)
    f(*comp_in).backward(g)
    for a, b in zip(comp_in, eager_in):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5)
    _all_compiled(rec)
