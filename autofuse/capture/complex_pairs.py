"""Complex arithmetic as pairs of real numbers, so that it fuses.

Note: Triton has no complex dtype, so every op on a complex tensor is an ATen call. Rotary
embeddings written with complex numbers (Meta's LLaMA reference, torchtitan) are
`view_as_real(view_as_complex(x) * freqs)`: per query and key, a view, a complex product and a view
back, each an ATen call, with the product's output stored between them. Where a graph reads a
complex value back as real numbers (`view_as_real`, `abs`, `angle`), that value is computed
instead on its real pairs — a tensor of the same sizes and a last dim of 2 (real, imaginary) — by
real ops the compiler lowers: `view_as_complex(x)`'s pairs are x; a product is (ac - bd, ad + bc);
a sum, a conjugate, a view, an expand, a permute, a slice or a select is the same op on the pairs;
abs is hypot(re, im) and angle atan2(im, re). A complex value of any other origin (a graph input
such as a buffer of rotary frequencies) enters through one `view_as_real` of it, a view. What the
rewrite does not know (another op on a complex value, a complex output) keeps its complex
computation. Values agree with eager's to rounding: a complex product is the same four real
products, their order of rounding aside.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable

import torch
import torch.fx

from .graph_edit import copy_graph, fake_mode_of, set_meta, val

aten = torch.ops.aten

COMPLEX = (torch.complex64, torch.complex128)
VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)


def _complex(n: Any) -> bool:
    v = val(n) if isinstance(n, torch.fx.Node) else None
    return isinstance(v, torch.Tensor) and v.dtype in COMPLEX


class _Pairs:
    """Builds each complex node's real pairs (at the graph's insertion point: before the read that
    first needs them, after everything they are computed from)."""

    def __init__(self, g: torch.fx.Graph, fake_mode: Any) -> None:
        self.g = g
        self.fake_mode = fake_mode
        self.pairs: dict[torch.fx.Node, torch.fx.Node] = {}

    def call(self, op: Any, *args: Any) -> torch.fx.Node:
        n = self.g.call_function(op, args)
        set_meta(n, self.fake_mode)
        return n

    def parts(self, p: torch.fx.Node) -> tuple[torch.fx.Node, torch.fx.Node]:
        return self.call(aten.select.int, p, -1, 0), self.call(aten.select.int, p, -1, 1)

    def join(self, re: Any, im: Any) -> torch.fx.Node:
        return self.call(aten.cat.default, [self.call(aten.unsqueeze.default, re, -1),
                                            self.call(aten.unsqueeze.default, im, -1)], -1)

    def conjugate(self, p: torch.fx.Node) -> torch.fx.Node:
        """The pairs of the conjugate of the value whose pairs are p."""
        re, im = self.parts(p)
        return self.join(re, self.call(aten.neg.default, im))

    def product(self, p: torch.fx.Node, br: Any, bi: Any) -> torch.fx.Node:
        """The pairs of (the value whose pairs are p) x (br + bi i), br and bi nodes or numbers."""
        ar, ai = self.parts(p)
        mul, sub, add = aten.mul.Tensor, aten.sub.Tensor, aten.add.Tensor
        return self.join(self.call(sub, self.call(mul, ar, br), self.call(mul, ai, bi)),
                         self.call(add, self.call(mul, ar, bi), self.call(mul, ai, br)))

    def of(self, n: torch.fx.Node) -> torch.fx.Node:
        """The real pairs of complex node n (built once)."""
        if n not in self.pairs:
            self.pairs[n] = self._build(n)
        return self.pairs[n]

    def _build(self, n: torch.fx.Node) -> torch.fx.Node:
        rule = RULES.get(n.target) if n.op == "call_function" else None
        if rule is not None and not n.kwargs:
            out = rule(self, n)
            if out is not None:
                return out
        if val(n).is_conj():   # a conjugate view (a saved `_conj` in a backward): its conjugate's pairs, conjugated
            return self.conjugate(self.call(aten.view_as_real.default, self.call(aten._conj.default, n)))
        return self.call(aten.view_as_real.default, n)   # an input, or an op without a rule: a view of it


def _dim(d: int, ndim: int) -> int:
    """A complex tensor's dim as a dim of its pairs (negative dims move past the pairs' last)."""
    return d if d >= 0 else d + ndim


def _from_real(pb: _Pairs, n: torch.fx.Node) -> torch.fx.Node | None:
    return n.args[0]   # view_as_complex(x): x is the pairs


def _same_pairs(pb: _Pairs, n: torch.fx.Node) -> torch.fx.Node | None:
    return pb.of(n.args[0])   # a copy of a complex value: the same pairs


def _conj(pb: _Pairs, n: torch.fx.Node) -> torch.fx.Node | None:
    return pb.conjugate(pb.of(n.args[0]))


def _mul(pb: _Pairs, n: torch.fx.Node) -> torch.fx.Node | None:
    a, b = n.args
    if _complex(a) and _complex(b):
        return pb.product(pb.of(a), *pb.parts(pb.of(b)))
    c, r = (a, b) if _complex(a) else (b, a)
    if isinstance(r, torch.fx.Node) and isinstance(val(r), torch.Tensor) and not val(r).dtype.is_complex:
        return pb.call(aten.mul.Tensor, pb.of(c), pb.call(aten.unsqueeze.default, r, -1))
    if isinstance(r, complex):
        return pb.product(pb.of(c), r.real, r.imag)
    if isinstance(r, numbers.Number):
        return pb.call(aten.mul.Tensor, pb.of(c), r)
    return None


def _add_sub(pb: _Pairs, n: torch.fx.Node) -> torch.fx.Node | None:
    a, b = n.args[:2]
    if len(n.args) > 2 or not (_complex(a) and _complex(b)):
        return None
    return pb.call(n.target, pb.of(a), pb.of(b))


def _view(pb: _Pairs, n: torch.fx.Node) -> torch.fx.Node | None:
    return pb.call(aten.view.default, pb.of(n.args[0]), [*n.args[1], 2])


def _unsqueeze(pb: _Pairs, n: torch.fx.Node) -> torch.fx.Node | None:
    x, d = n.args
    return pb.call(aten.unsqueeze.default, pb.of(x), _dim(d, val(x).dim() + 1))


def _squeeze(pb: _Pairs, n: torch.fx.Node) -> torch.fx.Node | None:
    x, d = n.args
    return pb.call(aten.squeeze.dim, pb.of(x), _dim(d, val(x).dim()))


def _permute(pb: _Pairs, n: torch.fx.Node) -> torch.fx.Node | None:
    x, dims = n.args
    nd = val(x).dim()
    return pb.call(aten.permute.default, pb.of(x), [_dim(d, nd) for d in dims] + [nd])


def _expand(pb: _Pairs, n: torch.fx.Node) -> torch.fx.Node | None:
    return pb.call(aten.expand.default, pb.of(n.args[0]), [*n.args[1], 2])


def _slice(pb: _Pairs, n: torch.fx.Node) -> torch.fx.Node | None:
    x, *rest = n.args
    d = _dim(rest[0], val(x).dim()) if rest else 0
    return pb.call(aten.slice.Tensor, pb.of(x), d, *rest[1:])


def _select(pb: _Pairs, n: torch.fx.Node) -> torch.fx.Node | None:
    x, d, i = n.args
    return pb.call(aten.select.int, pb.of(x), _dim(d, val(x).dim()), i)


def _polar(pb: _Pairs, n: torch.fx.Node) -> torch.fx.Node | None:
    mag, angle = n.args
    return pb.join(pb.call(aten.mul.Tensor, mag, pb.call(aten.cos.default, angle)),
                   pb.call(aten.mul.Tensor, mag, pb.call(aten.sin.default, angle)))


RULES: dict[Any, Callable[[_Pairs, torch.fx.Node], torch.fx.Node | None]] = {
    aten.view_as_complex.default: _from_real,
    aten.clone.default: _same_pairs, aten.alias.default: _same_pairs, aten.resolve_conj.default: _same_pairs,
    aten._conj.default: _conj, aten.conj_physical.default: _conj,
    aten.mul.Tensor: _mul, aten.add.Tensor: _add_sub, aten.sub.Tensor: _add_sub,
    **{v: _view for v in VIEWS},
    aten.unsqueeze.default: _unsqueeze, aten.squeeze.dim: _squeeze, aten.permute.default: _permute,
    aten.expand.default: _expand, aten.slice.Tensor: _slice, aten.select.int: _select,
    aten.polar.default: _polar,
}


def _as_real(pb: _Pairs, pairs: torch.fx.Node) -> torch.fx.Node:
    return pairs


def _abs(pb: _Pairs, pairs: torch.fx.Node) -> torch.fx.Node:
    re, im = pb.parts(pairs)
    return pb.call(aten.hypot.default, re, im)


def _angle(pb: _Pairs, pairs: torch.fx.Node) -> torch.fx.Node:
    re, im = pb.parts(pairs)
    return pb.call(aten.atan2.default, im, re)


# ops that read a complex value as real numbers: what each is, from the value's pairs
READS: dict[Any, Callable[[_Pairs, torch.fx.Node], torch.fx.Node]] = {
    aten.view_as_real.default: _as_real, aten.abs.default: _abs, aten.angle.default: _angle,
}


def complex_as_real_pairs(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of gm whose reads of complex values as real numbers (`view_as_real`, `abs`, `angle`)
    are computed on real pairs (module note); gm itself when it has none, or its complex values
    are not complex64 / complex128."""
    reads = [n for n in gm.graph.nodes if n.op == "call_function" and n.target in READS and not n.kwargs
             and len(n.args) == 1 and _complex(n.args[0])]
    fake_mode = fake_mode_of(gm) if reads else None   # the copy shares the original's fake values
    if fake_mode is None:
        return gm
    gm, copies = copy_graph(gm)
    pb = _Pairs(gm.graph, fake_mode)
    for read in reads:
        read = copies[read]
        with gm.graph.inserting_before(read):
            real = READS[read.target](pb, pb.of(read.args[0]))
        read.replace_all_uses_with(real)
    gm.graph.eliminate_dead_code()
    gm.graph.lint()
    gm.recompile()
    return gm
