"""Op mix of a generated Triton kernel, counted on the Python AST of its @triton.jit function body.

Only the kernel function counts: the module's prelude (libdevice helpers on the GPU, core-op
compositions under the interpreter) differs between CPU and GPU sources, the kernel body does not.
A prelude helper call counts as one op of its class (`_tanh` is one transcendental).

Note: an op inside a `tl.load`/`tl.store` pointer argument is index arithmetic, counted apart from
the value ops (integer div/mod on indices is its own, expensive, class). Reductions are classified
by their combine function (`tl.reduce(v, 1, _fast_max)`) or, in looped kernels, by the accumulator
update (`acc = acc + v`, `_max_combine(acc, v)`).

Access patterns: a load or store is contiguous when its address moves by one element with the
block's element index (`rindex` in a reduction, else `xindex`), strided when by more (a reduction
over a transposed input, `xindex + 2112 * rindex`; a permuted copy, `4096 * (xindex % 5120) + xindex
// 5120`), irregular when it reads a gathered index; an access that does not move with it (a per-row
scale, a broadcast `xindex // 2048`) is none of the three (`_stride`). Why: the 32000-wide rows the
model overpredicted most had, as training neighbours, a transposed reduction 10x slower than its
bytes, the most op-dense kernels were permutes 13-21x slower than theirs, and nothing in the
features told them from contiguous ones.

Per element or per row: each value op is also counted by its density, the share of the block's
elements its operands hold (`OpCounts.per_element`): 1 for an op on loaded elements, 1/k for an op on
the lanes of a row split k ways (an online softmax's running max and sum), and 0, counted apart
under `row_<class>`, for an op on values reduced over the row axis (`tl.reduce(v, 1, ...)`), which
runs once per row. Why: counted once per element, an online softmax's lane updates and epilogue made
a 32000-wide cross-entropy kernel look compute-bound, and the model predicted it at 4-5x its time.
"""
from __future__ import annotations

import ast
import functools
import re
from collections import Counter
from dataclasses import dataclass

TRANSCENDENTAL = frozenset({
    "exp", "exp2", "log", "log2", "log10", "_log10", "sin", "cos", "erf", "_expm1", "_log1p", "_tanh", "_tan",
    "_pow", "_atan", "_asin", "_acos", "_sinh", "_cosh", "_erfc", "tanh", "expm1", "log1p", "pow",
    "atan", "asin", "acos", "sinh", "cosh", "erfc", "tan", "sigmoid", "_exp2_ftz", "_tanh_approx",
    "_atan2", "_hypot", "atan2", "hypot", "_asinh", "_acosh", "_atanh", "asinh", "acosh", "atanh",
    "_erfinv", "erfinv", "_lgamma", "lgamma",
    "_rand", "rand", "_randn", "randn"})   # a Philox draw: ten rounds of two 32-bit high multiplies, about a transcendental's cost
DIVISION = frozenset({"sqrt", "sqrt_rn", "rsqrt", "_sqrt", "_rsqrt", "_floordiv", "_floordiv_float", "_remainder_int",
                      "_remainder_float", "fdiv", "div_rn", "_fmod", "fmod"})
ARITH_CALLS = frozenset({"abs", "floor", "ceil", "_trunc", "_round", "maximum", "minimum", "fma",
                         "trunc", "nearbyint", "rint", "_log2e_mul"})
SELECT_CALLS = frozenset({"where"})
REDUCE_COMBINES = {"_fast_sum": "sum", "_sum_combine": "sum", "_fast_max": "max", "_max_combine": "max", "_max_nan": "max",
                   "_fast_min": "min", "_min_combine": "min", "_prod_combine": "prod",
                   "_argmax_combine": "arg", "_argmin_combine": "arg"}
REDUCTION_KINDS = ("sum", "max", "min", "prod", "arg")
ARITH_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift, ast.Pow)
DIV_BINOPS = (ast.Div, ast.FloorDiv, ast.Mod)

VALUE_CLASSES = ("arith", "transcendental", "division", "cast", "compare", "select")
COUNT_NAMES = ("arith", "transcendental", "division", "cast", "compare", "select", "loads", "stores",
               "masked_accesses", "compound_masks", "index_ops", "index_divmod", "broadcast_accesses",
               "contig_accesses", "strided_accesses", "irregular_accesses", "max_stride",
               "reductions", *(f"red_{k}" for k in REDUCTION_KINDS), "loops", "loop_statements",
               "statements")
ROW_COUNT_NAMES = tuple(f"row_{k}" for k in VALUE_CLASSES)


@dataclass(frozen=True)
class OpCounts:
    """Counts of each op class in the kernel body (names in COUNT_NAMES); `scaled`: the value ops of each
    class weighed by their density, and those that run once per row (`per_element`, module note)."""

    counts: tuple[tuple[str, int], ...]
    scaled: tuple[tuple[str, float], ...] = ()

    def as_dict(self) -> dict[str, int]:
        return dict(self.counts)

    def per_element(self) -> dict[str, float]:
        """Value ops per element of the block (a lane op of a k-way split row counts 1/k), by class,
        and `row_<class>`: the value ops that run once per row."""
        return dict(self.scaled)


def _call_name(node: ast.Call) -> str:
    f = node.func
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return ""


def _stride(node: ast.AST, name: str) -> int | None:
    """How far an index expression's address moves when `name` moves by one, locally: `i % c` moves
    with `i`, `i // c` stays (c > 1), so a transposed read `4096 * (i % 5120) + i // 5120` moves by 4096
    and a broadcast `i // 2048` by 0. None: it reads a computed value (`tmpN`: a gathered index loaded
    from memory) or is not affine in `name` in that sense."""
    if isinstance(node, ast.Name):
        return 1 if node.id == name else (None if node.id.startswith("tmp") else 0)
    if isinstance(node, (ast.Constant, ast.Attribute)):
        return 0
    if isinstance(node, ast.BinOp):
        a, b = _stride(node.left, name), _stride(node.right, name)
        if a is None or b is None:
            return None
        if isinstance(node.op, (ast.Add, ast.Sub)):
            return a + b if isinstance(node.op, ast.Add) else a - b
        if not a and not b:
            return 0
        const = node.right if a else node.left     # the side that does not move: a constant, or not affine
        if a and b or not isinstance(const, ast.Constant) or not isinstance(const.value, int):
            return None
        if isinstance(node.op, ast.Mult):
            return (a or b) * const.value
        if a and const.value > 1 and isinstance(node.op, (ast.FloorDiv, ast.Mod)):
            return 0 if isinstance(node.op, ast.FloorDiv) else a
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        a = _stride(node.operand, name)
        return None if a is None else -a
    if isinstance(node, ast.Call) and _call_name(node) == "broadcast_to" and node.args:
        return _stride(node.args[0], name)
    moved = any(isinstance(n, ast.Name) and (n.id == name or n.id.startswith("tmp")) for n in ast.walk(node))
    return None if moved else 0


def _block_share(node: ast.AST, block: str) -> float:
    """The share of a block's elements a shape entry spans: 1 for `RBLOCK`, 1/8 for `RBLOCK // 8`, 0
    for anything else (a constant, `XBLOCK` in a reduction kernel)."""
    if isinstance(node, ast.Name):
        return 1.0 if node.id == block else 0.0
    if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv) and isinstance(node.left, ast.Name)
            and node.left.id == block and isinstance(node.right, ast.Constant) and isinstance(node.right.value, int)
            and node.right.value > 0):
        return 1.0 / node.right.value
    return 0.0


class _Counter(ast.NodeVisitor):
    def __init__(self, block: str = "XBLOCK") -> None:
        self.c: Counter[str] = Counter()
        self.scaled: Counter[str] = Counter()   # value ops weighted by their density (module note)
        self.in_pointer = 0
        self.in_loop = 0
        self.block = block                      # the element axis: RBLOCK in a reduction, else XBLOCK
        self.density: dict[str, float] = {}     # per name: share of the block's elements it holds
        self.lanes: dict[str, int] = {}         # per name: the last axis of a `tl.reshape` (lanes reduced later)
        self.memo: dict[int, float] = {}

    def _density(self, node: ast.AST) -> float:
        """Share of the block's elements the value of `node` holds: 1 per element, 1/k per lane of a
        k-way split row, 0 once per row (see the module note)."""
        key = id(node)
        if key not in self.memo:
            self.memo[key] = self._density_of(node)
        return self.memo[key]

    def _density_of(self, node: ast.AST) -> float:
        if isinstance(node, ast.Name):
            return self.density.get(node.id, 0.0)
        if isinstance(node, ast.Call):
            name = _call_name(node)
            if name in ("arange", "full", "zeros") and node.args:
                shape = node.args[1] if name == "arange" and len(node.args) > 1 else node.args[0]
                items = shape.elts if isinstance(shape, (ast.List, ast.Tuple)) else [shape]
                return max((_block_share(e, self.block) for e in items), default=0.0)
            if name == "reduce" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
                if node.args[1].value == 1:
                    return 0.0      # over the row axis: one value per row
                lanes = max((self.lanes.get(n.id, 1) for n in ast.walk(node.args[0]) if isinstance(n, ast.Name)),
                            default=1)
                return self._density(node.args[0]) / lanes
        return max((self._density(ch) for ch in ast.iter_child_nodes(node)), default=0.0)

    def _count(self, key: str, node: ast.AST) -> None:
        self.c[key] += 1
        d = self._density(node)
        self.scaled[key if d > 0 else f"row_{key}"] += d if d > 0 else 1.0

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
        d = self._density(v)
        for t in node.targets:
            if isinstance(t, ast.Name):
                self.density[t.id] = d
                if isinstance(v, ast.Call) and _call_name(v) == "reshape" and len(v.args) >= 2:
                    shape = v.args[1]
                    last = shape.elts[-1] if isinstance(shape, (ast.List, ast.Tuple)) and shape.elts else None
                    if isinstance(last, ast.Constant) and isinstance(last.value, int) and last.value > 0:
                        self.lanes[t.id] = last.value

    # expressions
    def visit_BinOp(self, node: ast.BinOp) -> None:
        if self.in_pointer:
            self.c["index_ops"] += 1
            if isinstance(node.op, (ast.FloorDiv, ast.Mod)):
                self.c["index_divmod"] += 1
        elif isinstance(node.op, DIV_BINOPS):
            self._count("division", node)
        elif isinstance(node.op, ARITH_BINOPS):
            self._count("arith", node)
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if not self.in_pointer and isinstance(node.op, (ast.USub, ast.Invert)) and not isinstance(node.operand, ast.Constant):
            self._count("arith", node)
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if not self.in_pointer:
            for _ in node.ops:
                self._count("compare", node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _call_name(node)
        if name in ("load", "store"):
            self._access(node, name)
            return
        if name in ("reduce", "associative_scan") and len(node.args) >= 3:  # a scan combines like a reduction
            comb = node.args[2]
            kind = REDUCE_COMBINES.get(comb.attr if isinstance(comb, ast.Attribute) else getattr(comb, "id", ""))
            self.c["reductions"] += 1
            if kind:
                self.c[f"red_{kind}"] += 1
        elif name in REDUCE_COMBINES:
            self.c["reductions"] += 1
            self.c[f"red_{REDUCE_COMBINES[name]}"] += 1
        elif name == "to" or name == "_to_bf16":
            self._count("cast", node)
        elif name in TRANSCENDENTAL:
            self._count("transcendental", node)
        elif name in DIVISION:
            self._count("division", node)
        elif name in ARITH_CALLS:
            self._count("arith", node)
        elif name in SELECT_CALLS:
            self._count("select", node)
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
            stride = _stride(pointer, "rindex" if self.block == "RBLOCK" else "xindex")
            if stride is None:
                self.c["irregular_accesses"] += 1
            elif abs(stride) == 1:
                self.c["contig_accesses"] += 1
            elif stride:
                self.c["strided_accesses"] += 1
                self.c["max_stride"] = max(self.c["max_stride"], abs(stride))
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


@functools.lru_cache(maxsize=512)
def count_ops(source: str, kernel_fn: str) -> OpCounts:
    """Op counts of `kernel_fn`'s body in `source` (ValueError if it is not there). Cached: the tuner
    ranks a kernel's configs again each time its local search adds some, and parsing the sources
    was half of each ranking (the counts are a frozen value)."""
    fn = kernel_function(source, kernel_fn)
    v = _Counter("RBLOCK" if any(a.arg == "RBLOCK" for a in fn.args.args) else "XBLOCK")
    for stmt in fn.body:
        v.visit(stmt)
    return OpCounts(tuple((k, int(v.c.get(k, 0))) for k in COUNT_NAMES),
                    tuple((k, float(v.scaled.get(k, 0.0))) for k in (*VALUE_CLASSES, *ROW_COUNT_NAMES)))


def kernel_body_source(source: str, kernel_fn: str) -> str:
    """The text of the kernel function (decorators included): what stays when the prelude is dropped."""
    text = _snippet(source, kernel_fn)
    if text is None:
        raise ValueError(f"no function {kernel_fn!r} in the kernel source")
    kernel_function(text, kernel_fn)  # it parses on its own
    return text
