"""Random numbers drawn inside generated kernels: dropout's mask and `rand` as a counter-based stream.

Note: eager's dropout is an ATen kernel that draws a mask from torch's generator; left in a graph it
is a fallback that splits the pointwise chain around it (one kernel before, the draw, one after)
and writes and reads its mask once more. Inductor draws in the fused kernel instead: each random op
gets a seed from one `randint` per graph call, and element k of its output is a function of (seed,
k) only, Philox-4x32 with 10 rounds (Triton's `tl.rand`). The same here: a captured graph's
`native_dropout`, `rand` and `rand_like` become `autofuse::philox_rand` (`randn`, `randn_like`:
`philox_randn`), each from its own seed of one `autofuse::seeds` call (`generate_random`), which
the lowering emits as Triton's `tl.rand(seed, k)` (`tl.randn`) computes them. Because the
value depends on the element's position only, every fusion and launch config of a graph draws the
same numbers; the op's eager implementation below computes them with integer ATen ops, bit for bit
(normal draws up to the last bits of log and cos),
so a graph run eagerly (the tuner's reference, the fallback) agrees with its compiled program
under one generator state. The numbers are not eager's (nor Inductor's): the same seed gives the
same draws from run to run, as under torch.compile; `CompileOptions(fallback_random=True)` keeps
ATen's ops and eager's draws.
"""
from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.operator_schemas import normalize_function

from .graph_edit import copy_graph, fake_mode_of, set_meta, val

aten = torch.ops.aten

_M32 = 0xFFFFFFFF
_ROUND_A, _ROUND_B = 0xD2511F53, 0xCD9E8D57
_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85
_ROUNDS = 10
_UNIFORM_SCALE = 4.6566127342e-10   # (2**23 - 1) / 2**23 / 2**31: the largest uint31 maps below 1.0 in f32
SEED_HIGH = 2 ** 63 - 1             # seeds drawn from [0, SEED_HIGH), as Inductor draws its own


def _mul32(a: int, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """High and low 32 bits of a * b for a 32-bit constant and 32-bit values held in int64, through
    16-bit halves of b so that no product leaves int64's range."""
    bh, bl = b >> 16, b & 0xFFFF
    high = ((a * bh + ((a * bl) >> 16)) >> 16) & _M32
    low = ((((a * bh) & 0xFFFF) << 16) + a * bl) & _M32
    return high, low


def philox_words(seed: torch.Tensor, numel: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first two 32-bit words (in int64) of Philox-4x32-10 of counter (k, 0, 0, 0) under the key
    (seed's low, high 32 bits), for k < numel: what Triton's `tl.randint4x(seed, k)` returns first."""
    k = torch.arange(numel, dtype=torch.int64, device=seed.device)
    c0, c1 = k & _M32, k >> 32
    c2 = torch.zeros_like(k)
    c3 = torch.zeros_like(k)
    seed = seed.to(torch.int64).reshape(())
    k0, k1 = seed & _M32, (seed >> 32) & _M32
    for _ in range(_ROUNDS):
        high_b, low_b = _mul32(_ROUND_B, c2)
        high_a, low_a = _mul32(_ROUND_A, c0)
        c0, c1, c2, c3 = high_b ^ c1 ^ k0, low_b, high_a ^ c3 ^ k1, low_a
        k0, k1 = (k0 + _KEY_A) & _M32, (k1 + _KEY_B) & _M32
    return c0, c1


def _to_uniform(word: torch.Tensor) -> torch.Tensor:
    x = torch.where(word >= 2 ** 31, word - 2 ** 32, word)   # the word as int32
    x = torch.where(x < 0, -x - 1, x)                        # ~x: 31 bits, symmetric around 0
    return x.to(torch.float32) * torch.tensor(_UNIFORM_SCALE, dtype=torch.float32, device=word.device)


def philox_uniform(seed: torch.Tensor, numel: int) -> torch.Tensor:
    """Floats in [0, 1): element k is Triton's `tl.rand(seed, k)`, bit for bit."""
    return _to_uniform(philox_words(seed, numel)[0])


def philox_normal(seed: torch.Tensor, numel: int) -> torch.Tensor:
    """Standard normal floats: element k is Triton's `tl.randn(seed, k)` (Box-Muller of the first
    two words), up to the last bits of log, sqrt and cos."""
    w0, w1 = philox_words(seed, numel)
    u1 = _to_uniform(w0).clamp_min(1.0e-7)
    theta = _to_uniform(w1) * 6.283185307179586
    return torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(theta)


@torch.library.custom_op("autofuse::seeds", mutates_args=())
def seeds(count: int, device: torch.device) -> list[torch.Tensor]:
    """`count` seeds from torch's generator (one `randint`), each a 0-d tensor of its own: a kernel
    then reads its seed at offset 0 of an argument, so the kernels of a model's repeated layers stay
    one source each, whichever dropout of the model they draw for."""
    drawn = torch.randint(SEED_HIGH, (count,), dtype=torch.int64, device=device)
    out = [torch.empty((), dtype=torch.int64, device=device) for _ in range(count)]
    torch._foreach_copy_(out, list(drawn.unbind(0)))
    return out


@seeds.register_fake
def _(count: int, device: torch.device) -> list[torch.Tensor]:
    return [torch.empty((), dtype=torch.int64, device=device) for _ in range(count)]


@torch.library.custom_op("autofuse::philox_rand", mutates_args=())
def philox_rand(seed: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Uniform f32 numbers of `like`'s size (row-major; its values are not read) from a 0-d seed.
    Why a tensor and not a size: a graph of symbolic sizes has its sizes in its tensors."""
    return philox_uniform(seed, like.numel()).reshape(like.shape)


@torch.library.custom_op("autofuse::philox_randn", mutates_args=())
def philox_randn(seed: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Standard normal f32 numbers of `like`'s size (row-major) from a 0-d seed."""
    return philox_normal(seed, like.numel()).reshape(like.shape)


@philox_rand.register_fake
def _(seed: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return like.new_empty(like.shape, dtype=torch.float32)


@philox_randn.register_fake
def _(seed: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return like.new_empty(like.shape, dtype=torch.float32)


_DROPOUT = aten.native_dropout.default
_UNIFORM = (aten.rand.default, aten.rand_like.default)
_NORMAL = (aten.randn.default, aten.randn_like.default)
_BERNOULLI = aten.bernoulli.p   # `empty(...).bernoulli_(p)`: stochastic depth's per-sample mask
_EXPONENTIAL = aten.exponential.default   # `empty_like(x).exponential_()`: Gumbel noise (gumbel_softmax)
_SCALED_NORMAL = (aten.normal_functional.default, aten.normal.Tensor_float)   # `normal_(m, s)`, `normal(x, s)`
_RANDOM = frozenset({_DROPOUT, *_UNIFORM, *_NORMAL, _BERNOULLI, _EXPONENTIAL, *_SCALED_NORMAL})
_UNIFORM_DTYPES = (torch.float32, torch.float64)   # half types would round 1 - 2**-24 up to 1.0: ATen draws those
_NORMAL_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def _bound(node: torch.fx.Node) -> dict[str, Any]:
    """The op's arguments by their schema names, defaults included."""
    return dict(normalize_function(node.target, node.args, node.kwargs, normalize_to_only_use_kwargs=True).kwargs)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _generated(node: torch.fx.Node) -> bool:
    """Whether this random op is drawn in generated kernels: dropout in training with 0 <= p < 1
    (p = 1 zeroes everything, ATen's op), uniform draws of f32 / f64, and normal (of scalar mean
    and std, or around a tensor of means), exponential and Bernoulli ones (of a scalar probability:
    stochastic depth) of any float dtype, without an explicit generator."""
    if node.target not in _RANDOM:
        return False
    out, b = val(node), _bound(node)
    if node.target is _DROPOUT:
        return _number(b["p"]) and 0 <= b["p"] < 1 and b["train"] is not False and \
            isinstance(out, (tuple, list)) and isinstance(out[0], torch.Tensor)
    if not isinstance(out, torch.Tensor) or out.layout != torch.strided or b.get("generator") is not None:
        return False
    if node.target in _UNIFORM:
        dtypes = _UNIFORM_DTYPES
    elif node.target in _NORMAL:
        dtypes = _NORMAL_DTYPES
    else:   # the scalars of a Bernoulli, exponential or scaled normal draw
        if not all(_number(b[k]) for k in ("p", "lambd", "std") if k in b) or \
                (node.target is aten.normal_functional.default and not _number(b["mean"])):
            return False
        dtypes = _NORMAL_DTYPES
    if node.target in (aten.rand.default, aten.randn.default) and not all(isinstance(d, int) for d in b["size"]):
        return False   # a size of graph values: ATen's op draws
    return out.dtype in dtypes and (node.target is not _BERNOULLI or 0 <= b["p"] <= 1)


def generate_random(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of `gm` with its dropouts and uniform and normal draws as `philox_rand` /
    `philox_randn`, each from its own seed of one `seeds` call per device; `gm` itself when it has
    none (`gm` is left as it is)."""
    originals = [n for n in gm.graph.nodes if n.op == "call_function" and _generated(n)]
    if not originals:
        return gm
    gm, copies = copy_graph(gm)
    nodes = [copies[n] for n in originals]
    fake_mode = fake_mode_of(gm)
    by_device: dict[torch.device, list[torch.fx.Node]] = {}
    for n in nodes:
        out = val(n)
        by_device.setdefault((out[0] if isinstance(out, (tuple, list)) else out).device, []).append(n)
    g = gm.graph
    for device, group in by_device.items():
        with g.inserting_before(group[0]):
            drawn = g.call_function(torch.ops.autofuse.seeds.default, (len(group), device))
            set_meta(drawn, fake_mode)
            seed_of = [g.call_function(operator.getitem, (drawn, i)) for i in range(len(group))]
        for i, (n, seed) in enumerate(zip(group, seed_of)):
            if fake_mode is not None:
                seed.meta["val"] = drawn.meta["val"][i]
            _replace(g, n, seed, fake_mode)
    g.lint()
    gm.recompile()
    return gm


def _replace(g: torch.fx.Graph, node: torch.fx.Node, seed: torch.fx.Node, fake_mode: FakeTensorMode | None) -> None:
    out, b = val(node), _bound(node)
    ref = out[0] if isinstance(out, (tuple, list)) else out
    new: list[torch.fx.Node] = []

    def call(op: Any, *args: Any, **kwargs: Any) -> torch.fx.Node:
        new.append(g.call_function(op, args, kwargs))
        return new[-1]

    with g.inserting_before(node):
        if node.target in (aten.rand.default, aten.randn.default):
            like = call(aten.empty.memory_format, [int(s) for s in b["size"]], dtype=torch.float32, device=ref.device)
        else:
            like = node.args[0]   # dropout's, rand_like's, bernoulli's input: the draw's size
        normal = node.target in _NORMAL or node.target in _SCALED_NORMAL
        u = call((torch.ops.autofuse.philox_randn if normal else torch.ops.autofuse.philox_rand).default, seed, like)
        if node.target is _DROPOUT:
            p = float(b["p"])
            keep = call(aten.ge.Scalar, u, p)   # kept with probability 1 - p (p = 0 keeps all)
            scaled = call(aten.mul.Tensor, call(aten.mul.Tensor, keep, node.args[0]), 1.0 / (1.0 - p))
            for user in list(node.users):
                if user.target is operator.getitem:
                    user.replace_all_uses_with(scaled if user.args[1] == 0 else keep)
                    g.erase_node(user)
        else:
            if node.target is _BERNOULLI:   # one with probability p, as eager's u < p
                value = call(aten.lt.Scalar, u, float(b["p"]))
            elif node.target is _EXPONENTIAL:   # -log(1 - u) / rate: finite, as u < 1
                value = call(aten.div.Tensor, call(aten.log1p.default, call(aten.neg.default, u)), -float(b["lambd"]))
            elif node.target in _SCALED_NORMAL:   # in f32, cast to the op's dtype once, after
                mean = b["mean"] if node.target is aten.normal.Tensor_float else float(b["mean"])
                value = call(aten.add.Tensor, call(aten.mul.Tensor, u, float(b["std"])), mean)
            else:
                value = u
            if node.target is _BERNOULLI or ref.dtype != torch.float32:
                value = call(aten._to_copy.default, value, dtype=ref.dtype)
            node.replace_all_uses_with(value)
    for n in new:
        set_meta(n, fake_mode)
    g.erase_node(node)
