"""Op mix of a generated Triton kernel, counted on the Python AST of its @triton.jit function body.

Only the kernel function counts: the module's prelude (libdevice helpers on the GPU, core-op
compositions under the interpreter) differs between CPU and GPU sources, the kernel body does not.
A prelude helper call counts as one op of its class (`_tanh` is one transcendental).

Note: an op inside a `tl.load`/`tl.store` pointer argument is index arithmetic, counted apart from
the value ops (integer div/mod on indices is its own, expensive, class). Reductions are classified
by their combine function (`tl.reduce(v, 1, _fast_max)`) or, in looped kernels, by the accumulator
update (`acc = acc + v`, `_max_combine(acc, v)`).
"""
from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass

TRANSCENDENTAL = frozenset({
    "exp", "exp2", "log", "log2", "log10", "sin", "cos", "erf", "_expm1", "_log1p", "_tanh", "_tan",
    "_pow", "_atan", "_asin", "_acos", "_sinh", "_cosh", "_erfc", "tanh", "expm1", "log1p", "pow",
    "atan", "asin", "acos", "sinh", "cosh", "erfc", "tan", "sigmoid"})
DIVISION = frozenset({"sqrt", "sqrt_rn", "rsqrt", "_sqrt", "_rsqrt", "_floordiv", "_remainder_int",
                      "_remainder_float", "fdiv", "div_rn"})
ARITH_CALLS = frozenset({"abs", "floor", "ceil", "_trunc", "_round", "maximum", "minimum", "fma",
                         "trunc", "nearbyint", "rint"})
SELECT_CALLS = frozenset({"where"})
REDUCE_COMBINES = {"_fast_sum": "sum", "_sum_combine": "sum", "_fast_max": "max", "_max_combine": "max",
                   "_fast_min": "min", "_min_combine": "min", "_prod_combine": "prod",
                   "_argmax_combine": "arg", "_argmin_combine": "arg"}
REDUCTION_KINDS = ("sum", "max", "min", "prod", "arg")
ARITH_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift, ast.Pow)
DIV_BINOPS = (ast.Div, ast.FloorDiv, ast.Mod)

COUNT_NAMES = ("arith", "transcendental", "division", "cast", "compare", "select", "loads", "stores",
               "masked_accesses", "compound_masks", "index_ops", "index_divmod", "broadcast_accesses",
               "reductions", *(f"red_{k}" for k in REDUCTION_KINDS), "loops", "loop_statements",
               "statements")


@dataclass(frozen=True)
class OpCounts:
    """Counts of each op class in the kernel body (names in COUNT_NAMES)."""

    counts: tuple[tuple[str, int], ...]

    def as_dict(self) -> dict[str, int]:
        return dict(self.counts)


def _call_name(node: ast.Call) -> str:
    f = node.func
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return ""


class _Counter(ast.NodeVisitor):
    def __init__(self) -> None:
        self.c: Counter[str] = Counter()
        self.in_pointer = 0
        self.in_loop = 0

    # statements
    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.stmt):
            self.c["statements"] += 1
            if self.in_loop:
                self.c["loop_statements"] += 1
        super().generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        self.c["loops"] += 1
        self.c["statements"] += 1
        self.in_loop += 1
        for s in node.body:
            self.visit(s)
        self.in_loop -= 1

    def visit_Assign(self, node: ast.Assign) -> None:
        v = node.value
        if (len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and isinstance(v, ast.BinOp)
                and isinstance(v.op, ast.Add) and isinstance(v.left, ast.Name)
                and v.left.id == node.targets[0].id and v.left.id.startswith("acc_")):
            self.c["reductions"] += 1   # the looped sum: acc = acc + v
            self.c["red_sum"] += 1
        self.generic_visit(node)

    # expressions
    def visit_BinOp(self, node: ast.BinOp) -> None:
        if self.in_pointer:
            self.c["index_ops"] += 1
            if isinstance(node.op, (ast.FloorDiv, ast.Mod)):
                self.c["index_divmod"] += 1
        elif isinstance(node.op, DIV_BINOPS):
            self.c["division"] += 1
        elif isinstance(node.op, ARITH_BINOPS):
            self.c["arith"] += 1
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if not self.in_pointer and isinstance(node.op, (ast.USub, ast.Invert)) and not isinstance(node.operand, ast.Constant):
            self.c["arith"] += 1
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if not self.in_pointer:
            self.c["compare"] += len(node.ops)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _call_name(node)
        if name in ("load", "store"):
            self._access(node, name)
            return
        if name == "reduce" and len(node.args) >= 3:
            comb = node.args[2]
            kind = REDUCE_COMBINES.get(comb.attr if isinstance(comb, ast.Attribute) else getattr(comb, "id", ""))
            self.c["reductions"] += 1
            if kind:
                self.c[f"red_{kind}"] += 1
        elif name in REDUCE_COMBINES:
            self.c["reductions"] += 1
            self.c[f"red_{REDUCE_COMBINES[name]}"] += 1
        elif name == "to" or name == "_to_bf16":
            self.c["cast"] += 1
        elif name in TRANSCENDENTAL:
            self.c["transcendental"] += 1
        elif name in DIVISION:
            self.c["division"] += 1
        elif name in ARITH_CALLS:
            self.c["arith"] += 1
        elif name in SELECT_CALLS:
            self.c["select"] += 1
        self.generic_visit(node)

    def _access(self, node: ast.Call, name: str) -> None:
        self.c["loads" if name == "load" else "stores"] += 1
        args = list(node.args)
        mask = args[2] if name == "store" and len(args) > 2 else (args[1] if name == "load" and len(args) > 1 else None)
        for kw in node.keywords:
            if kw.arg == "mask":
                mask = kw.value
        if mask is not None:
            self.c["masked_accesses"] += 1
            if isinstance(mask, ast.BinOp) and isinstance(mask.op, ast.BitAnd):
                self.c["compound_masks"] += 1
        if args:
            pointer = args[0]
            self.c["broadcast_accesses"] += sum(isinstance(n, ast.Call) and _call_name(n) == "broadcast_to"
                                                for n in ast.walk(pointer))
            self.in_pointer += 1
            self.visit(pointer)
            self.in_pointer -= 1
        for a in args[1:]:
            self.visit(a)
        for kw in node.keywords:
            self.visit(kw.value)


def _snippet(source: str, kernel_fn: str) -> str | None:
    """The kernel function's own lines (decorators to the next top-level statement): parsing only
    them is 20x faster than parsing the module with its prelude."""
    m = re.search(rf"^(?:@.*\n)*def {re.escape(kernel_fn)}\(", source, re.MULTILINE)
    if m is None:
        return None
    nl = source.find("\n", m.end())
    if nl < 0:
        return source[m.start():]
    end = re.search(r"^(?=[^\s#)])", source[nl + 1:], re.MULTILINE)
    return source[m.start(): nl + 1 + (end.start() if end else len(source))]


def kernel_function(source: str, kernel_fn: str) -> ast.FunctionDef:
    """The kernel's function definition in a module source; ValueError if absent or unparsable."""
    for text in (_snippet(source, kernel_fn), source):
        if text is None:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError as e:
            error = e
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == kernel_fn:
                return node
        error = None
    if error is not None:
        raise ValueError(f"kernel source does not parse: {error}")
    raise ValueError(f"no function {kernel_fn!r} in the kernel source")


def count_ops(source: str, kernel_fn: str) -> OpCounts:
    """Op counts of `kernel_fn`'s body in `source` (ValueError if it is not there)."""
    fn = kernel_function(source, kernel_fn)
    v = _Counter()
    for stmt in fn.body:
        v.visit(stmt)
    return OpCounts(tuple((k, int(v.c.get(k, 0))) for k in COUNT_NAMES))


def kernel_body_source(source: str, kernel_fn: str) -> str:
    """The text of the kernel function (decorators included): what stays when the prelude is dropped."""
    text = _snippet(source, kernel_fn)
    if text is None:
        raise ValueError(f"no function {kernel_fn!r} in the kernel source")
    kernel_function(text, kernel_fn)  # it parses on its own
    return text
