"""A fused kernel for flex attention's forward: its score_mod and mask_mod written into an online
softmax over key blocks.

Note: `flex_attention` is a higher-order op whose bodies (score_mod over a score and its
b, h, q_idx, kv_idx; mask_mod over the four indices) are small ATen graphs of 0-d values. Each body
op becomes one Triton expression over a [BLOCK_M, BLOCK_N] tile of scores (q_idx a column, kv_idx
a row, b and h the program's scalars), so the scores never reach memory: the kernel is the
flash-attention loop (running max, rescaled sums, P @ V accumulated in f32), as Inductor's flex
template is. A captured tensor the body indexes (`slopes[h]`, a bias table by q_idx and kv_idx) is
loaded with its indices clamped to its sizes, so a tile's padded lanes read memory that exists;
those lanes are masked out of the softmax. With a block mask whose blocks tile the kernel's
(`sparse`), only the key blocks it lists are visited: its partial blocks with mask_mod applied, its
full blocks without, as Inductor's template does; a causal block mask then costs about half the
dense loop. Otherwise every key block is visited and mask_mod applied to each. The key length is a
compile-time constant (shapes are static), so a length that is a multiple of the key tile loads
keys unmasked. A body op it cannot write raises `BodyUnsupported` and the op runs as ATen's
(unfused) implementation.
"""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.fx

from .expressions import convert
from .online import LOG2E
from .printer import TL_DTYPES

aten = torch.ops.aten


class BodyUnsupported(Exception):
    """A body op or value the kernel cannot write; the lowering then keeps ATen's op."""


_BINARY = {
    "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "div": "({0} / {1})",
    "maximum": "tl.maximum({0}, {1})", "minimum": "tl.minimum({0}, {1})",
    "ge": "({0} >= {1})", "gt": "({0} > {1})", "le": "({0} <= {1})", "lt": "({0} < {1})",
    "eq": "({0} == {1})", "ne": "({0} != {1})",
    "logical_and": "({0} & {1})", "logical_or": "({0} | {1})", "bitwise_and": "({0} & {1})",
    "bitwise_or": "({0} | {1})", "bitwise_xor": "({0} ^ {1})",
    "remainder": "_remainder_{kind}({0}, {1})", "floor_divide": "_floordiv{suffix}({0}, {1})",
}
_UNARY = {
    "neg": "(-{0})", "abs": "tl.abs({0})", "exp": "tl.exp({0})", "log": "tl.log({0})",
    "sqrt": "tl.sqrt({0})", "rsqrt": "(1.0 / tl.sqrt({0}))", "sin": "tl.sin({0})", "cos": "tl.cos({0})",
    "tanh": "(2.0 / (1.0 + tl.exp(-2.0 * {0})) - 1.0)", "sigmoid": "(1.0 / (1.0 + tl.exp(-{0})))",
    "logical_not": "({0} == 0)", "bitwise_not": "(~{0})",
}
_COMPARISONS = ("ge", "gt", "le", "lt", "eq", "ne")
_CASTS = (aten._to_copy.default, torch.ops.prims.convert_element_type.default)


def _literal(v: Any) -> str:
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, float):
        return f'float("{v}")' if not math.isfinite(v) else repr(v)
    if isinstance(v, int):
        return str(v)
    raise BodyUnsupported(f"flex attention body constant {v!r}")


def _compute_dtype(dtype: torch.dtype) -> str:
    """Half values compute in f32 inside the kernel, as every generated kernel's do."""
    if dtype.is_floating_point:
        return "tl.float64" if dtype == torch.float64 else "tl.float32"
    return TL_DTYPES[dtype]


class BodyWriter:
    """Triton lines for one body graph: `inputs` maps its leading placeholders to expressions,
    `buffers` its captured tensors to (pointer name, sizes, strides)."""

    def __init__(self, prefix: str, inputs: list[str], buffers: list[tuple[str, tuple, tuple]]) -> None:
        self.prefix, self.inputs, self.buffers = prefix, inputs, buffers
        self.lines: list[str] = []
        self.names: dict[torch.fx.Node, str] = {}
        self.constants: dict[str, Any] = {}   # names of 0-d fills -> their values

    def write(self, gm: torch.fx.GraphModule) -> str:
        """The body's lines appended to self.lines; returns the name of its result."""
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(self.inputs) + len(self.buffers):
            raise BodyUnsupported("flex attention body inputs")
        for k, n in enumerate(placeholders):
            self.names[n] = self.inputs[k] if k < len(self.inputs) else f"@{k - len(self.inputs)}"
        result = None
        for n in gm.graph.nodes:
            if n.op == "call_function":
                self.names[n] = self._op(n)
            elif n.op == "output":
                out = n.args[0]
                out = out[0] if isinstance(out, (tuple, list)) else out
                result = self.names[out]
            elif n.op != "placeholder":
                raise BodyUnsupported(f"flex attention body node {n.op}")
        if result is None or result.startswith("@"):
            raise BodyUnsupported("flex attention body result")
        return result

    def _arg(self, a: Any, dtype: str | None = None) -> str:
        if isinstance(a, torch.fx.Node):
            text = self.names[a]
            if text.startswith("@"):
                raise BodyUnsupported("a captured tensor used other than by indexing")
        else:
            text = _literal(a)
        return f"({text}).to({dtype})" if dtype and isinstance(a, torch.fx.Node) else text

    def _emit(self, text: str) -> str:
        name = f"{self.prefix}{len(self.lines)}"
        self.lines.append(f"{name} = {text}")
        return name

    def _op(self, n: torch.fx.Node) -> str:
        val = n.meta.get("val")
        if not isinstance(val, torch.Tensor) or val.dim() != 0:
            raise BodyUnsupported("flex attention body value")
        out_t = _compute_dtype(val.dtype)
        target = n.target
        name = getattr(getattr(target, "overloadpacket", None), "__name__", "")
        if target in _CASTS:
            return self._emit(self._arg(n.args[0], out_t))
        if target is aten.scalar_tensor.default or target is aten.full.default and list(n.args[0]) == []:
            value = n.args[0] if target is aten.scalar_tensor.default else n.args[1]
            name = self._emit(f"tl.full([1, 1], {_literal(value)}, {out_t})")
            self.constants[name] = value
            return name
        if target is aten.index.Tensor:
            return self._index(n, out_t)
        if name == "div" and n.kwargs.get("rounding_mode") in ("floor", "trunc") and len(n.args) == 2:
            f = val.dtype.is_floating_point
            a, b = (self._arg(x, out_t) for x in n.args)
            if n.kwargs["rounding_mode"] == "floor":
                return self._emit(f"_floordiv{'_float' if f else ''}({a}, {b})")
            return self._emit(f"_trunc({a} / {b})" if f else f"({a} // {b})")   # Triton's int // truncates
        if target is aten.where.self:
            cond = self._arg(n.args[0])
            return self._emit(f"tl.where({cond}, {self._arg(n.args[1], out_t)}, {self._arg(n.args[2], out_t)})")
        if name in _BINARY and len(n.args) == 2 and all(k == "alpha" and v == 1 for k, v in n.kwargs.items()):
            # operands promoted to the result's dtype; a comparison's to their common dtype
            if name in _COMPARISONS:
                types = [a.meta["val"].dtype for a in n.args if isinstance(a, torch.fx.Node)]
                common = types[0] if len(types) == 1 else torch.promote_types(*types)
                a, b = (self._arg(x, _compute_dtype(common)) for x in n.args)
            elif name.startswith("logical"):
                a, b = (f"({self._arg(x)} != 0)" for x in n.args)
            elif name.startswith("bitwise"):
                a, b = (self._arg(x) for x in n.args)
            else:
                a, b = (self._arg(x, out_t) for x in n.args)
            f = val.dtype.is_floating_point   # the prelude's floor division and remainder, as eager's
            return self._emit(_BINARY[name].format(a, b, kind="float" if f else "int", suffix="_float" if f else ""))
        if name in _UNARY and len(n.args) == 1:
            cast = out_t if val.dtype.is_floating_point else None
            return self._emit(_UNARY[name].format(self._arg(n.args[0], cast)))
        raise BodyUnsupported(f"{target} in a flex attention body")

    def _index(self, n: torch.fx.Node, out_t: str) -> str:
        src, indices = n.args
        ref = self.names.get(src, "") if isinstance(src, torch.fx.Node) else ""
        if not ref.startswith("@"):
            raise BodyUnsupported("flex attention body indexes a computed value")
        ptr, sizes, strides = self.buffers[int(ref[1:])]
        if len(indices) != len(sizes) or any(i is None for i in indices):
            raise BodyUnsupported("flex attention body: partial indexing of a captured tensor")
        terms = []
        for i, size, stride in zip(indices, sizes, strides):
            k = self._emit(f"({self._arg(i)}).to(tl.int64)")
            k = self._emit(f"tl.where({k} < 0, {k} + {size}, {k})")   # a negative index counts from the end
            terms.append(f"tl.minimum(tl.maximum({k}, 0), {size - 1}) * {stride}")
        offset = " + ".join(terms) or "0"
        return self._emit(f"tl.load({ptr} + {offset}).to({out_t})")


HEAD = """

@triton.jit
def {name}(Q, K, V, OUT, LSE, MAXS, {buffer_args}{sparse_args}
           sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sob, soh, som, sod,
           H, M, GROUP, KV_BATCH, scale,
           N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr, DV: tl.constexpr{sparse_constexprs}):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    hk = h // GROUP
    bk = b * KV_BATCH
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    offs_dv = tl.arange(0, DV)
    m_ok = offs_m < M
    q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_d[None, :] * sqd, mask=m_ok[:, None],
                other=0.0){operand_cast}
    q_idx = offs_m[:, None]
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.full([BLOCK_M], 0.0, tl.float32)
    acc = tl.full([BLOCK_M, DV], 0.0, tl.float32)
"""

# one key block: scores, the bodies, the online softmax update (rows past M are computed, never stored);
# exp(s - m) as one fused multiply-add and ex2 (results below 2^-126 add nothing to a row sum >= 1),
# P @ V accumulated into the rescaled acc by the dot itself
STEP = """offs_n = start + tl.arange(0, BLOCK_N)
n_ok = offs_n < N
kt = tl.load(K + bk * skb + hk * skh + offs_n[None, :] * skn + offs_d[:, None] * skd{k_mask}){operand_cast}
score = tl.dot(q, kt{precision}) * scale
kv_idx = offs_n[None, :]
{body}
m_new = tl.maximum(m_i, tl.reduce(s, 1, _fast_max))
m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
p = _exp2_ftz(tl.fma(s, {log2e}, -(m_use * {log2e})[:, None]))
alpha = _exp2_ftz((m_i - m_use) * {log2e})
l_i = l_i * alpha + tl.reduce(p, 1, _fast_sum)
v = tl.load(V + bk * svb + hk * svh + offs_n[:, None] * svn + offs_dv[None, :] * svd{v_mask}){operand_cast}
acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None]{precision})
m_i = m_new"""

TAIL = """    empty = l_i == 0.0
    out = acc / tl.where(empty, 1.0, l_i)[:, None]
    tl.store(OUT + b * sob + h * soh + offs_m[:, None] * som + offs_dv[None, :] * sod, {stored},
             mask=m_ok[:, None])
    # logsumexp and the row maximum in base 2, as the op returns them
    lse = tl.where(empty, float("-inf"), m_i + tl.log(tl.where(empty, 1.0, l_i))) * {log2e}
    tl.store(LSE + bh * M + offs_m, lse, mask=m_ok)
    tl.store(MAXS + bh * M + offs_m, m_i * {log2e}, mask=m_ok)
"""


def _indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line if line else line for line in text.split("\n"))


def kernel_source(name: str, prelude: str, score_mod: torch.fx.GraphModule, mask_mod: torch.fx.GraphModule | None,
                  score_buffers: list[tuple[tuple, tuple]], mask_buffers: list[tuple[tuple, tuple]],
                  precision: str | None, dtype: torch.dtype, interpret: bool, sparse: bool = False,
                  full_blocks: bool = False, n_divisible: bool = False) -> str:
    """The module text of kernel `name`; buffers as (sizes, strides) in their body's order. Under
    the interpreter the operands are multiplied in f32 (it has no 16-bit dot). `sparse`: only the
    block mask's listed key blocks are visited (`full_blocks`: it lists full blocks apart from its
    partial ones), else every key block; `n_divisible`: the key length is a multiple of
    BLOCK_N, so key loads need no mask."""
    sb = [(f"SB{k}", s, st) for k, (s, st) in enumerate(score_buffers)]
    mb = [(f"MB{k}", s, st) for k, (s, st) in enumerate(mask_buffers)]
    w = BodyWriter("sm", ["score", "b", "h", "q_idx", "kv_idx"], sb)
    s_name = w.write(score_mod)
    score_lines = w.lines + [f"s = tl.broadcast_to(({s_name}).to(tl.float32), [BLOCK_M, BLOCK_N])"]
    mask_lines: list[str] = []
    if mask_mod is not None:
        mw = BodyWriter("mm", ["b", "h", "q_idx", "kv_idx"], mb)
        k_name = mw.write(mask_mod)
        if mw.constants.get(k_name, 0) != 0:
            mask_lines = []   # a mask that keeps every score (no block mask given): nothing to apply
        else:
            mask_lines = mw.lines + [f"keep = ({k_name}) != 0"]
    cast = ".to(tl.float32)" if interpret else ""
    prec = f', input_precision="{precision}"' if precision else ""

    def step(masked: bool) -> str:
        """One key block's text; `masked`: mask_mod applies (a full block of a block mask skips it)."""
        conds = (["keep"] if masked and mask_lines else []) + ([] if n_divisible else ["n_ok[None, :]"])
        lines = score_lines + (mask_lines if masked else [])
        if conds:
            lines = lines + [f"s = tl.where({' & '.join(conds)}, s, float(\"-inf\"))"]
        return STEP.format(body="\n".join(lines), operand_cast=cast, precision=prec, log2e=LOG2E,
                           k_mask="" if n_divisible else ", mask=n_ok[None, :], other=0.0",
                           v_mask="" if n_divisible else ", mask=n_ok[:, None], other=0.0")

    if not sparse:
        loop = "    for start in range(0, N, BLOCK_N):\n" + _indent(step(True), 8) + "\n"
    else:
        # the block mask's listed key blocks alone: its partial ones with mask_mod, its full ones
        # without, MULT key steps a block; the interpreter loops to the most steps a row can list
        # (Triton 3.6's cannot loop to a loaded bound)
        loop = "    row = ((b % SPARSE_B) * SPARSE_H + h % SPARSE_H) * QB + (pid_m * BLOCK_M) // Q_BLOCK\n"
        for num, idx, masked, present in (("KV_NUM", "KV_IDX", True, True),
                                          ("FULL_NUM", "FULL_IDX", False, full_blocks)):
            if not present:
                continue
            inner = (f"start = tl.load({idx} + row * KB + j // MULT) * KV_BLOCK + (j % MULT) * BLOCK_N\n"
                     + step(masked))
            loop += f"    steps = tl.load({num} + row) * MULT\n"
            if interpret:
                loop += "    for j in range(0, KB * MULT):\n        if j < steps:\n" + _indent(inner, 12) + "\n"
            else:
                loop += "    for j in range(0, steps):\n" + _indent(inner, 8) + "\n"
    sparse_args = "KV_NUM, KV_IDX, FULL_NUM, FULL_IDX, " if sparse else ""
    sparse_constexprs = "".join(f", {c}: tl.constexpr" for c in ("SPARSE_B", "SPARSE_H", "QB", "KB", "Q_BLOCK",
                                                                    "KV_BLOCK", "MULT")) if sparse else ""
    buffer_args = "".join(f"{p}, " for p, _, _ in sb + mb)
    head = HEAD.format(name=name, buffer_args=buffer_args, sparse_args=sparse_args,
                       sparse_constexprs=sparse_constexprs, operand_cast=cast)
    tail = TAIL.format(stored=convert("out", dtype), log2e=LOG2E)
    return prelude + head + loop + tail
