"""Graphs with symbolic sizes whose compute is mostly of static sizes (a decoding step over a growing
cache): split into static regions compiled once, the size-dependent ops run with ATen between them,
equal to eager at every size."""
from __future__ import annotations

import logging
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import autofuse
from autofuse.api import Recorder
from autofuse.capture import backend as backend_mod
from autofuse.capture.backend import make_backend
from autofuse.capture.decompositions import decomposition_table
from autofuse.capture.regions import RegionsBySize, _softmaxes, split_levels, worth_splitting

from .helpers import assert_close, rand

aten = torch.ops.aten


def step(x: torch.Tensor, w: torch.Tensor, wo: torch.Tensor, cache: torch.Tensor):
    """One decoding step: a norm and projection of the new tokens (static sizes), attention over the
    cache grown by them (symbolic length), then a projection and residual (static again)."""
    h = F.layer_norm(x, x.shape[-1:])
    k = torch.tanh(h @ w)
    cache = torch.cat([cache, k], dim=1)
    att = torch.softmax(h @ cache.transpose(1, 2) / 8.0, dim=-1) @ cache
    out = torch.relu(att @ wo) * 0.5 + x
    return out, cache


def _instances(monkeypatch) -> list:
    """Every CompiledGraph made from here on (the backend keeps them inside Dynamo's wrappers)."""
    made: list = []
    init = backend_mod.CompiledGraph.__init__

    def record(self, *a, **k):
        init(self, *a, **k)
        made.append(self)
    monkeypatch.setattr(backend_mod.CompiledGraph, "__init__", record)
    return made


def _compiled(fn, rec: Recorder, **kw):
    torch._dynamo.reset()
    options = autofuse.CompileOptions(strict=True, poison=True, use_db=False, recorder=rec, **kw)
    return torch.compile(fn, backend=make_backend(options), dynamic=None)


def test_a_growing_cache_compiles_its_static_regions_once(device, monkeypatch, caplog):
    """Cache lengths of 5 to 23 (non-powers of two, the new tokens a transposed view): every output
    equals eager's, the regions compile at the first symbolic call and never again, nothing runs
    past max_sizes (2, fewer than the lengths); AUTOFUSE_LOGS=compile says so."""
    caplog.set_level(logging.INFO, logger="autofuse.compile")
    made = _instances(monkeypatch)
    rec = Recorder()
    f = _compiled(step, rec, max_sizes=2)
    w, wo = rand((24, 24), device=device), rand((24, 24), device=device)
    seen = []
    for length in (5, 7, 13, 9, 23, 6):
        x = rand((3, 2, 24), device=device, noncontig=True)
        cache = rand((3, length, 24), device=device)
        assert_close(f(x, w, wo, cache), step(x, w, wo, cache))
        seen.append(len(rec.graphs))
    split = [g for g in made if g.regions is not None]
    assert len(split) == 1 and len(split[0].regions.regions) == 2   # before the cat, after the attention
    # the first call is static; the second is traced with a symbolic length and splits; later lengths
    # compile nothing
    assert seen[1] == seen[-1] and all(o.compiled for o in rec.outcomes)
    assert all(len(r.programs) == 1 for r in split[0].regions.regions)
    # by name: an op runs as its torch binding where that binding resolves to this overload alone
    aten_ops = {n.target.overloadpacket.__name__ if isinstance(n.target, torch._ops.OpOverload) else n.target.__name__
                for n in split[0].regions.gm.graph.nodes if n.op == "call_function"}
    # the decomposed softmax runs as ATen's softmax, one call where it was five
    assert {"cat", "bmm", "softmax"} <= aten_ops and not {"amax", "exp"} & aten_ops
    _levels_are_acyclic(split[0].gm)
    assert any("graph with symbolic sizes: 2 regions of static sizes compiled once, 6 ops with symbolic sizes run "
               "with ATen" in r.getMessage()   # the concatenation, the attention and its softmax
               for r in caplog.records), [r.getMessage() for r in caplog.records]


def fused_qkv_step(x: torch.Tensor, w: torch.Tensor, keys: torch.Tensor, values: torch.Tensor):
    """GPT-2's attention step: one product for queries, keys and values, split and transposed into
    heads, the new keys and values concatenated to the caches (transposed slices of the product)."""
    b, t, c = x.shape
    q, k, v = (x @ w).split(c, dim=2)
    q, k, v = (z.view(b, t, 2, c // 2).transpose(1, 2) for z in (q, k, v))
    keys, values = torch.cat([keys, k], dim=-2), torch.cat([values, v], dim=-2)
    return torch.tanh(F.scaled_dot_product_attention(q, keys, values)) * 2, keys, values


def test_new_keys_read_by_a_concatenation_leave_their_region_contiguous(device, monkeypatch):
    """The region stores the transposed slices the concatenations read contiguous (ATen's strided
    cat copies the whole cache slowly), and every output still equals eager's."""
    made = _instances(monkeypatch)
    rec = Recorder()
    f = _compiled(fused_qkv_step, rec)
    # heads of 8: on CUDA, with heads of 6 (no fused f32 attention kernel takes them) this graph was
    # not split
    w = rand((16, 48), device=device)
    for length in (5, 9, 14):
        x = rand((3, 1, 16), device=device)
        keys, values = rand((3, 2, length, 8), device=device), rand((3, 2, length, 8), device=device)
        assert_close(f(x, w, keys, values), fused_qkv_step(x, w, keys, values))
    split = [g for g in made if g.regions is not None]
    assert len(split) == 1
    first = split[0].regions.regions[0].gm.graph
    out = next(n for n in first.nodes if n.op == "output")
    dense = [a for a in out.args[0] if a.target is aten.clone.default]
    assert len(dense) == 2 and all(a.meta["val"].is_contiguous() for a in dense)   # the keys and values
    assert not any(a.target is aten.clone.default for r in split[0].regions.regions[1:]
                   for n in r.gm.graph.nodes if n.op == "output" for a in n.args[0])


def two_layers(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, c1: torch.Tensor, c2: torch.Tensor):
    """Two layers of attention over their caches, each projecting with F.linear (a transposed weight)
    and scaling by one shared value viewed anew in each layer (as RoPE's cos is)."""
    scale = torch.sigmoid(x.sum(-1))
    outs = []
    for w, c in ((w1, c1), (w2, c2)):
        h = F.layer_norm(x, x.shape[-1:])
        k = F.linear(h, w) * scale.unsqueeze(-1)
        c = torch.cat([c, k], dim=1)
        x = torch.softmax(k @ c.transpose(1, 2), dim=-1) @ c + x
        x = x + torch.tanh(F.linear(F.layer_norm(x, x.shape[-1:]), w)) * 0.5
        outs.append(c)
    return x, *outs


def test_views_of_weights_are_made_where_they_are_read(device, monkeypatch):
    """A weight's transpose and a shared value's per-layer view are made by each region that reads
    them: no region returns a view of a graph input, the shared value leaves its region once, and
    the outputs equal eager's at every cache length."""
    split = split_two_layer_step(two_layers, (5, 9, 14), device, monkeypatch)
    regions = split.regions.regions
    for r in regions:
        out = next(n for n in r.gm.graph.nodes if n.op == "output")
        assert not any(a.op == "call_function" and a.target is aten.permute.default for a in out.args[0])
        assert any(n.target is aten.permute.default for n in r.gm.graph.nodes) or r is regions[-1]
    sigmoid_outputs = [a for r in regions for n in r.gm.graph.nodes if n.op == "output" for a in n.args[0]
                       if a.target is aten.sigmoid.default]
    assert len(sigmoid_outputs) == 1
    _levels_are_acyclic(split.gm)


def split_two_layer_step(fn, lengths, device, monkeypatch):
    """The one split CompiledGraph of fn(x, w1, w2, c1, c2) (two layers over caches of one length)
    compiled and called at each of `lengths`, every output equal to eager's."""
    made = _instances(monkeypatch)
    f = _compiled(fn, Recorder())
    w1, w2 = rand((16, 16), device=device), rand((16, 16), device=device)
    for length in lengths:
        x = rand((3, 1, 16), device=device)
        c1, c2 = rand((3, length, 16), device=device), rand((3, length, 16), device=device)
        assert_close(f(x, w1, w2, c1, c2), fn(x, w1, w2, c1, c2))
    split = [g for g in made if g.regions is not None]
    assert len(split) == 1
    return split[0]


def test_a_graph_of_symbolic_sizes_throughout_is_compiled_per_size(device, monkeypatch):
    """A symbolic batch makes every op size-dependent: no split, one compile per size."""
    made = _instances(monkeypatch)
    rec = Recorder()

    def fn(x):
        return torch.softmax(x * 2 + 1, dim=-1).sum(0)
    f = _compiled(fn, rec)
    for rows in (5, 7, 11):
        x = rand((rows, 33), device=device)
        assert_close(f(x), fn(x))
    assert all(g.regions is None for g in made)
    assert len(rec.graphs) == 3


def _levels_are_acyclic(gm: torch.fx.GraphModule) -> None:
    """A region runs after every ATen op it reads, an ATen op no earlier than what it reads."""
    split = split_levels(gm.graph)
    level_of = {**split.static, **split.dynamic}
    for n in level_of:
        for i in n.all_input_nodes:
            if n in split.static and i in split.dynamic:
                assert level_of[n] > level_of[i], (n, i)
            elif i in level_of:
                assert level_of[n] >= level_of[i], (n, i)


def test_what_cannot_be_split():
    """An in-place update (a region moved past an ATen op could read it early) and a graph whose ops
    are all of symbolic sizes are left to the per-size path."""
    def updates(x, cache):
        cache.add_(1)
        return torch.relu(x @ x.T).sum() + cache.sum()

    def pure(x, cache):
        return torch.relu(x @ x.T).sum() + cache.sum()

    args = (torch.randn(4, 4), torch.randn(5, 4))
    assert worth_splitting(make_fx(updates, tracing_mode="fake")(*args)) is None
    assert worth_splitting(make_fx(pure, tracing_mode="fake")(*args)) is not None
    gm = make_fx(pure, tracing_mode="symbolic")(*args)   # every size symbolic
    assert worth_splitting(gm) is None and split_levels(gm.graph).static_share < 0.5   # the last add of two sums


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_decoding_with_a_growing_cache_compiles_the_step_once(family, device, monkeypatch):
    """transformers' default cache grows a token per step; the forward compiled as torch.compile
    compiles (automatic dynamic): greedy tokens and logits equal eager's over 9 steps, with one split
    step graph serving all lengths after the second."""
    transformers = pytest.importorskip("transformers")
    made = _instances(monkeypatch)
    torch.manual_seed(0)
    if family == "gpt2":
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=211, n_embd=48, n_layer=2, n_head=4))
    else:
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
            vocab_size=211, hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64))
    model = model.to(device).eval()
    model.generation_config.disable_compile = True
    ids = torch.randint(3, 211, (1, 7), device=device)
    kw = dict(max_new_tokens=9, do_sample=False, pad_token_id=0, use_cache=True, eos_token_id=None,
              output_logits=True, return_dict_in_generate=True)
    with torch.no_grad():
        ref = model.generate(ids, **kw)
        torch._dynamo.reset()
        model.forward = autofuse.compile(model.forward, dynamic=None, strict=True, use_db=False)
        out = model.generate(ids, **kw)
    assert torch.equal(out.sequences, ref.sequences)
    for a, b in zip(out.logits, ref.logits):
        assert_close(a, b)
    split = [g for g in made if g.regions is not None]
    assert len(split) == 1 and len(split[0].regions.regions) == 3   # two layers: three regions
    assert all(len(r.programs) == 1 for r in split[0].regions.regions)
    assert all(g._beyond is None and g.compiled_sizes <= 1 for g in made)


def test_a_static_cache_written_at_a_symbolic_step_updates_it_inside_the_region(device, monkeypatch):
    """The functional graph's epilogue copies the cache's new value into the input: the copy joins
    the region computing it (no ATen copy between calls), the caller's cache holds eager's values
    after every call, and the step count Dynamo made symbolic compiles nothing again."""
    made = _instances(monkeypatch)
    rec = Recorder()

    def update(x, w, cache, pos, step: int):
        cache.index_copy_(1, pos, torch.tanh(x @ w))
        return torch.softmax(x @ cache.transpose(1, 2), -1) @ cache * 0.5 + step

    f = _compiled(update, rec)
    w = rand((16, 16), device=device)
    cache, ref_cache = rand((2, 11, 16), device=device), None
    ref_cache = cache.clone()
    for step in range(3, 9):
        x = rand((2, 1, 16), device=device)
        pos = torch.tensor([step], device=device)
        assert_close(f(x, w, cache, pos, step), update(x, w, ref_cache, pos, step))
        assert_close(cache, ref_cache)
    split = [g for g in made if g.regions is not None]
    assert len(split) == 1 and len(split[0].regions.regions) == 1
    assert all(len(r.programs) == 1 for r in split[0].regions.regions)
    assert aten.copy_.default not in {n.target for n in split[0].regions.gm.graph.nodes}


def test_an_update_whose_value_has_symbolic_sizes_runs_after_every_region(device, monkeypatch):
    """A cache's new value computed from a slice of symbolic length: the copy runs after the region
    that reads the cache's old value (in a later region, or with ATen at the end)."""
    made = _instances(monkeypatch)
    rec = Recorder()

    def update(x, w, cache, hist):
        y = torch.relu(x @ w) + cache
        z = torch.tanh(y @ w) * 2 + torch.sigmoid(y)
        cache.copy_(hist.sum(1, keepdim=True))
        return z

    f = _compiled(update, rec)
    w = rand((16, 16), device=device)
    cache = rand((2, 1, 16), device=device)
    ref_cache = cache.clone()
    for length in (5, 7, 12, 9):
        x, hist = rand((2, 1, 16), device=device), rand((2, length, 16), device=device)
        assert_close(f(x, w, cache, hist), update(x, w, ref_cache, hist))
        assert_close(cache, ref_cache)
    split = [g for g in made if g.regions is not None]
    assert len(split) == 1
    program = split[0].regions
    writes = [k for k, r in enumerate(program.regions) if aten.copy_.default in {n.target for n in r.gm.graph.nodes}]
    reads = [k for k, r in enumerate(program.regions)   # the cache read by an op other than its update
             if any(n.op == "placeholder" and any(u.target not in (aten.copy.default, aten.copy_.default)
                                                  for u in n.users)
                    and n.meta["val"].shape == cache.shape for n in r.gm.graph.nodes)]
    assert reads and (writes == [] or min(writes) > max(reads))
    _levels_are_acyclic(split[0].gm)


def batched_step(x: torch.Tensor, w: torch.Tensor, c1: torch.Tensor, c2: torch.Tensor):
    """Two layers of a decoding step (norm, attention over a growing cache, norm, MLP), as in a
    server whose batch size changes between requests."""
    out = x
    for c in (c1, c2):
        h = F.layer_norm(out, out.shape[-1:])
        k = torch.cat([c, torch.tanh(h @ w)], dim=1)
        out = out + torch.softmax(h @ k.transpose(1, 2) / 4.0, dim=-1) @ k
        h = F.layer_norm(out, out.shape[-1:])
        out = out + F.gelu(h @ w.T) @ w * 0.5
    return out


def test_a_symbolic_batch_is_held_fixed_per_program(device, monkeypatch, caplog):
    """Dynamo makes the batch symbolic too once it changes: the step then runs one split program per
    batch size (the batch held fixed in its regions, the cache length varying), compiling no
    region again for a batch it has met, with max_sizes (3) bounding the batch sizes, not the
    lengths; every output equals eager's."""
    caplog.set_level(logging.INFO, logger="autofuse.compile")
    made = _instances(monkeypatch)
    rec = Recorder()
    f = _compiled(batched_step, rec, max_sizes=3)
    w = rand((16, 16), device=device)
    calls = [(2, 5), (2, 6), (3, 7), (3, 8), (2, 9), (4, 10), (3, 11), (2, 13), (4, 14)]
    for batch, length in calls:
        x = rand((batch, 1, 16), device=device)
        c1, c2 = rand((batch, length, 16), device=device), rand((batch, length, 16), device=device)
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*max_sizes")   # nothing left to ATen ops
            assert_close(f(x, w, c1, c2), batched_step(x, w, c1, c2))
    by_size = [g.regions for g in made if isinstance(g.regions, RegionsBySize)]
    assert len(by_size) == 1
    assert sorted(by_size[0].programs) == [(2,), (3,), (4,)]
    assert all(len(r.programs) == 1 for r in by_size[0].regions)   # each region compiled once
    assert all(o.compiled for o in rec.outcomes)
    assert any("per value of the sizes held fixed" in r.getMessage() for r in caplog.records)
    x = rand((5, 1, 16), device=device)   # a fourth batch size: past max_sizes, run with ATen
    c = rand((5, 15, 16), device=device)
    with pytest.warns(UserWarning, match="max_sizes"):
        assert_close(f(x, w, c, c.clone()), batched_step(x, w, c, c.clone()))


@pytest.mark.parametrize("case", ["last_dim", "middle_dim", "exp_read_elsewhere", "two_dims", "upcast"])
def test_which_written_out_softmaxes_run_as_one_aten_call(case):
    """A decomposed softmax among size-dependent ops is one ATen call only where nothing else reads
    its intermediate values and it reduces one dim."""
    def fn(x):
        if case == "exp_read_elsewhere":
            e = torch.exp(x - x.amax(-1, keepdim=True))
            return e / e.sum(-1, keepdim=True), e
        if case == "two_dims":
            e = torch.exp(x - x.amax((1, 2), keepdim=True))
            return e / e.sum((1, 2), keepdim=True)
        if case == "upcast":   # a 16-bit input converted as the softmax reads it
            return torch.softmax(x.to(torch.bfloat16), dim=-1, dtype=torch.float32)
        return torch.softmax(x, dim=1 if case == "middle_dim" else -1)
    gm = make_fx(fn, tracing_mode="fake", decomposition_table=decomposition_table())(torch.randn(3, 5, 7))
    found = _softmaxes({n: 0 for n in gm.graph.nodes if n.op == "call_function"})
    assert len(found) == (1 if case in ("last_dim", "middle_dim", "upcast") else 0)
    for div, chain in found.items():
        first = [aten._to_copy.default] if case == "upcast" else []
        assert chain[-1] is div and [n.target for n in chain[:-2]] == [*first, aten.amax.default, aten.sub.Tensor,
                                                                       aten.exp.default]


def half_attention_step(x: torch.Tensor, w: torch.Tensor, cache: torch.Tensor):
    """A bf16 decoding step (`step`'s) whose softmax reads its scores in f32 and hands back bf16,
    then an eval-mode dropout (a copy in the traced graph), over a cache of symbolic length."""
    h = F.layer_norm(x, x.shape[-1:])
    k = torch.tanh(h @ w)
    cache = torch.cat([cache, k], dim=1)
    p = torch.softmax(h @ cache.transpose(1, 2) / 8.0, dim=-1, dtype=torch.float32).to(x.dtype)
    att = F.dropout(p, 0.1, training=False) @ cache
    return torch.relu(att @ w) * 0.5 + x, cache


def test_a_half_softmax_and_a_dead_copy_run_as_one_softmax_call(device, monkeypatch):
    """The conversion to f32 and the softmax are one ATen call (its dtype argument), the dropout's
    copy is not made, and every length's outputs equal eager's."""
    made = _instances(monkeypatch)
    f = _compiled(half_attention_step, Recorder())
    w = rand((16, 16), torch.bfloat16, device, low=-0.5, high=0.5)
    with torch.no_grad():
        for length in (5, 6, 9):
            x, cache = rand((2, 3, 16), torch.bfloat16, device), rand((2, length, 16), torch.bfloat16, device)
            for got, want in zip(f(x, w, cache), half_attention_step(x, w, cache)):
                assert_close(got, want, rtol=2e-2, atol=2e-2)
    split = [g for g in made if g.regions is not None]
    assert len(split) == 1
    calls = [n for n in split[0].regions.gm.graph.nodes if n.op == "call_function"]
    softmax = [n for n in calls if n.target is torch.softmax]
    assert len(softmax) == 1 and softmax[0].kwargs == {"dtype": torch.float32}
    names = {getattr(n.target, "__name__", str(n.target)) for n in calls}
    assert "clone" not in names and "amax" not in names
