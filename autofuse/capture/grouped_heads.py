"""Grouped-query attention reads its key/value heads as they are, instead of copies repeated per query head.

Note: transformers' decoders with fewer key/value heads than query heads (LLaMA, Qwen2, Mistral, ...)
repeat each key/value head for its group of query heads before attention when a mask is given
(`repeat_kv`: unsqueeze, expand, reshape), and that reshape of an expanded tensor is a copy
(`clone` of the expanded view in the ATen graph; `repeat_interleave` over the head dim decomposes
to the same ops). In a decoding step it copies the whole cache
twice per layer at every step, group-size times over: with batch 4, 16 query and 4 key/value heads
and a 540-token cache, 16 copies of 8.8 MB per step (ATen's strided copy kernel, 10.7 us each on
an H100), and four ATen ops per copy on the host.

cuDNN's attention kernel takes fewer key/value heads than query heads (query head h reads
key/value head h // group, the order `repeat_kv` makes), so an inference graph whose attention op
is cuDNN's gets the unrepeated key and value. The rewrite is local and exact: it applies only when
both key and value are `view(clone(expand(unsqueeze(x, 2))))` with the expand repeating dim 2
alone, x's last dim is dense (what the kernel reads), and the query's head count is the key/value
heads times the group. Flash attention's kernel reads grouped heads too, but no GPU test covers
that op with them, so it keeps the copies, as do the efficient and math kernels, which need them.
Before the first rewrite on a device, one small call of the op with grouped heads is compared
with the same call over repeated heads (`reads_grouped_heads`): a torch whose cuDNN op refuses or
miscomputes grouped heads keeps the copies instead of failing at run time.

Eager attention (Gemma 2's soft-capped scores, any model loaded with `attn_implementation="eager"`)
multiplies the query by the repeated keys and the probabilities by the repeated values as batched
products. There the rewrite regroups the product instead (`group_matmul_heads`): the query rows of
one key/value head's group are rows of one product over that head, on every device.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Callable

import torch
import torch.fx
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ..logs import logger

aten = torch.ops.aten
_log = logger("compile")

# attention ops whose CUDA kernels read grouped key/value heads, checked against eager on a GPU
GROUPED_KERNELS = (aten._scaled_dot_product_cudnn_attention.default,)
_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)


def _val(node: object) -> torch.Tensor | None:
    v = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return v if isinstance(v, torch.Tensor) else None


def _same(a: object, b: object) -> bool:
    return statically_known_true(a == b)


def _repeated(node: object, devices: tuple[str, ...]) -> tuple[torch.fx.Node, object] | None:
    """(x, group) where node is `repeat_kv(x, group)`: view(clone(expand(unsqueeze(x, 2)))) from
    [b, kv, L, d] through [b, kv, group, L, d] to [b, kv * group, L, d]; None otherwise."""
    if not isinstance(node, torch.fx.Node) or node.target not in _VIEWS:
        return None
    clone = node.args[0]
    if not isinstance(clone, torch.fx.Node) or clone.target is not aten.clone.default:
        return None
    expand = clone.args[0]
    if not isinstance(expand, torch.fx.Node) or expand.target is not aten.expand.default:
        return None
    unsq = expand.args[0]
    if not isinstance(unsq, torch.fx.Node) or unsq.target is not aten.unsqueeze.default or unsq.args[1] != 2:
        return None
    x = unsq.args[0]
    xv, ev, ov = _val(x), _val(expand), _val(node)
    if xv is None or ev is None or ov is None or xv.dim() != 4 or ev.dim() != 5 or ov.dim() != 4:
        return None
    if xv.device.type not in devices or not _same(xv.stride(-1), 1):
        return None
    kept = (0, 1, 3, 4)   # the expand may repeat dim 2 only
    if not all(_same(ev.shape[i], xv.shape[j]) for i, j in zip(kept, range(4))):
        return None
    group = ev.shape[2]
    if not (_same(ov.shape[0], xv.shape[0]) and _same(ov.shape[1], xv.shape[1] * group)
            and _same(ov.shape[2], xv.shape[2]) and _same(ov.shape[3], xv.shape[3])):
        return None
    return x, group


@functools.lru_cache(maxsize=None)
def reads_grouped_heads(op: torch._ops.OpOverload, device: torch.device) -> bool:
    """Does op on device take 2 key/value heads for 4 query heads and give what it gives over the
    repeated heads (bf16, an additive mask, 16 x 24 positions, heads of 64)?"""
    try:
        with unset_fake_temporarily(), torch.no_grad():
            gen = torch.Generator(device=device).manual_seed(0)
            q, k, v = (torch.randn((1, h, n, 64), generator=gen, device=device).to(torch.bfloat16)
                       for h, n in ((4, 16), (2, 24), (2, 24)))
            bias = torch.randn((1, 1, 16, 24), generator=gen, device=device).to(torch.bfloat16)
            grouped = op(q, k, v, bias, False, scale=0.125)[0]
            repeated = op(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), bias, False, scale=0.125)[0]
            same = bool(torch.allclose(grouped.float(), repeated.float(), rtol=2e-2, atol=2e-2))
            reason = "" if same else "it computes another result over them"
    except Exception as e:  # noqa: BLE001 - any refusal means: keep the copies
        same, reason = False, f"{type(e).__name__}: {str(e).strip()[:200]}"
    if not same:
        _log.info("%s on %s does not read grouped key/value heads (%s): repeated copies kept", op, device, reason)
    return same


def read_grouped_heads(gm: torch.fx.GraphModule, devices: tuple[str, ...] = ("cuda",),
                       supported: Callable[[torch._ops.OpOverload, torch.device], bool] = reads_grouped_heads) -> int:
    """Give each cuDNN attention op of gm its key and value unrepeated where they are
    `repeat_kv` copies on one of `devices` (the devices whose kernels of these ops read grouped
    heads; the CPU tests trace the graph there) and where `supported` says the op reads grouped heads
    there; the number of attention ops changed."""
    changed = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in GROUPED_KERNELS or len(node.args) < 3:
            continue
        q, k, v = node.args[:3]
        rk, rv, qv = _repeated(k, devices), _repeated(v, devices), _val(q)
        if rk is None or rv is None or qv is None or qv.dim() != 4:
            continue
        (kx, kg), (vx, vg) = rk, rv
        if not (_same(kg, vg) and _same(_val(kx).shape[1], _val(vx).shape[1])
                and _same(qv.shape[1], _val(kx).shape[1] * kg)):
            continue
        if not supported(node.target, qv.device):
            continue
        node.args = (q, kx, vx, *node.args[3:])
        for copy in dict.fromkeys((k, v)):
            _erase_unread(gm.graph, copy)
        changed += 1
    if changed:
        gm.recompile()
    return changed


def _batched(node: object) -> torch.fx.Node | None:
    """y where node is matmul's batch flattening of a 4-D y: view(expand(y, y's own shape), [b * h, r, c])."""
    if not isinstance(node, torch.fx.Node) or node.target not in _VIEWS:
        return None
    y = node.args[0]
    if isinstance(y, torch.fx.Node) and y.target is aten.expand.default:
        yv, ev = _val(y.args[0]), _val(y)
        if yv is None or ev is None or yv.dim() != ev.dim() or not all(_same(a, b) for a, b in zip(yv.shape, ev.shape)):
            return None
        y = y.args[0]
    yv, nv = _val(y), _val(node)
    if yv is None or nv is None or yv.dim() != 4 or nv.dim() != 3:
        return None
    if not (_same(nv.shape[0], yv.shape[0] * yv.shape[1]) and _same(nv.shape[1], yv.shape[2])
            and _same(nv.shape[2], yv.shape[3])):
        return None
    return y


def _static(*sizes: object) -> bool:
    return all(isinstance(s, int) for s in sizes)


def _merges(v: torch.Tensor, i: int) -> bool:
    """Can dims i and i + 1 of v be viewed as one?"""
    return v.shape[i + 1] == 1 or v.shape[i] == 1 or _same(v.stride(i), v.shape[i + 1] * v.stride(i + 1))


def _add(graph: torch.fx.Graph, before: torch.fx.Node, target: object, args: tuple, kwargs: dict | None = None) -> torch.fx.Node:
    """A node inserted before `before`, its value computed on the fake tensors of its inputs."""
    with graph.inserting_before(before):
        node = graph.call_function(target, args, kwargs or {})
    vals, kw = torch.fx.node.map_arg((args, kwargs or {}), lambda n: n.meta["val"])
    mode = torch._guards.detect_fake_mode(vals)
    with mode if mode is not None else contextlib.nullcontext():
        node.meta["val"] = target(*vals, **kw)
    return node


def group_matmul_heads(gm: torch.fx.GraphModule) -> int:
    """Give each batched product whose second operand is a `repeat_kv` copy (a decoder's eager
    attention, `q @ k.transpose(2, 3)` and `p @ v`) the key/value heads unrepeated: the query
    heads of one key/value head become rows of one product, [b * kv, group * m, k] @ [b * kv, k, n],
    whose result is the original [b * h, m, n] as a view. Exact on any device (the same dot
    products); the copy of the cache (group times its size, at every decoding step) is gone. The
    number of products changed."""
    changed = 0
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not aten.bmm.default:
            continue
        a4, y = _batched(node.args[0]), _batched(node.args[1])
        if a4 is None or y is None:
            continue
        transposed = y.target is aten.permute.default and list(y.args[1]) == [0, 1, 3, 2]
        rep = _repeated(y.args[0] if transposed else y, ("cpu", "cuda"))
        if rep is None:
            continue
        x, group = rep
        av, xv = _val(a4), _val(x)
        b, h, m = av.shape[0], av.shape[1], av.shape[2]
        kv = xv.shape[1]
        if not (_static(b, h, m, kv, group) and h == kv * group and _same(xv.shape[0], b) and _merges(xv, 0)):
            continue
        k_size, n_size = node.args[0].args[1][2], node.args[1].args[1][2]
        if not (_merges(av, 0) and _merges(av, 1)):   # a group's query heads and rows as one batch's rows
            a4 = _add(graph, node, aten.clone.default, (a4,), {"memory_format": torch.contiguous_format})
        lhs = _add(graph, node, aten.view.default, (a4, [b * kv, group * m, k_size]))
        xt = _add(graph, node, aten.permute.default, (x, [0, 1, 3, 2])) if transposed else x
        rhs = _add(graph, node, aten.view.default, (xt, [b * kv, node.args[1].args[1][1], n_size]))
        product = _add(graph, node, aten.bmm.default, (lhs, rhs))
        out = _add(graph, node, aten.view.default, (product, [b * h, m, n_size]))
        old = list(node.args)
        node.replace_all_uses_with(out)
        graph.erase_node(node)
        for operand in old:
            _erase_chain(graph, operand)
        changed += 1
    if changed:
        gm.recompile()
    return changed


def _erase_chain(graph: torch.fx.Graph, node: object) -> None:
    """Erase node and the ops it reads, each once nothing reads it (views, expands, a repeat's copy)."""
    todo = [node]
    while todo:
        n = todo.pop()
        if not isinstance(n, torch.fx.Node) or n.users or n.op != "call_function":
            continue
        if n.target not in (*_VIEWS, aten.expand.default, aten.permute.default, aten.unsqueeze.default,
                            aten.clone.default):
            continue
        inputs = list(n.all_input_nodes)
        graph.erase_node(n)
        todo.extend(inputs)


def _erase_unread(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    """Erase a repeat's view, clone, expand and unsqueeze, each once nothing reads it."""
    for _ in range(4):
        if node.users:
            return
        source = node.args[0]
        graph.erase_node(node)
        node = source
