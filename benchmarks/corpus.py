"""Seeded random memory-bound PyTorch programs at realistic GPU sizes: the cost model's training corpus.

    corpus(n, seed=0, scale=1.0) -> list[Program]     suite(scale=1.0) -> list[Program]

Note: a program is drafted from small building blocks (a pointwise chain, a row or column
reduction with or without a broadcast epilogue, a norm, a residual add, a cast, a broadcast
affine), each a function of the random stream and the values drawn so far. Drafting runs every
statement on the meta device at a reference row count, so shapes, dtypes and type promotion are
torch's own and cost nothing; the row count is chosen afterwards so that inputs + outputs fill
16 MB - 512 MB. Each value carries a rough bound on its magnitude and ops that would push it past
the dtype's limit are not drawn (log of abs()+1, exp of clamped values, sums upcast in f16), so
programs stay finite and well-conditioned. Program i of a seed depends only on (seed, i): a larger
corpus extends a smaller one, and `scale` shrinks the leading dim only (same program, same name).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

import torch
import torch.nn.functional as F

MB = 2**20
MIN_BYTES, MAX_BYTES = 16 * MB, 512 * MB
MIN_ROWS, MAX_ROWS = 64, 65536
REF_ROWS = 3   # drafting row count: differs from every row length, so no broadcast matches by accident
ROW_LENGTHS = (33, 64, 100, 127, 128, 256, 384, 512, 768, 1000, 1024, 1536, 2048, 2304, 3072, 4096,
               5120, 8192, 11008, 14336, 16384, 32000, 32768, 50257)
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
SHORT = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16", torch.int64: "i64"}
LOWP = (torch.bfloat16, torch.float16)
LIMIT = {torch.float32: 1e4, torch.bfloat16: 300.0, torch.float16: 300.0}  # largest |value| drawn


@dataclass(frozen=True)
class Program:
    """One benchmark program: build(device) -> (fn, args)."""

    name: str
    build: Callable[[str], tuple[Callable[..., Any], tuple]]
    source: str = ""   # the drafted statements, for a person reading a failure
    cols: int = 0                  # row length (0: a suite case)
    tags: tuple[str, ...] = ()     # the drafted blocks, as in the name
    rows: int = 0                  # rows at scale 1 (0: a suite case)
    dtype: torch.dtype = torch.float32   # the drafted dtype (of the main input)

    def reduces_rows(self, min_cols: int) -> bool:
        """Does a block reduce rows of at least min_cols elements (a row reduction, softmax or norm)?"""
        return self.cols >= min_cols and any(t in ROW_KINDS for t in self.tags)

    def nbytes(self) -> int:
        """Bytes of inputs read once and outputs written once, from shapes on the meta device."""
        fn, args = self.build("meta")
        with torch.no_grad():
            out = fn(*args)
        return _nbytes(args) + _nbytes(out)


def _nbytes(v: Any) -> int:
    if isinstance(v, torch.Tensor):
        return v.numel() * v.element_size()
    return sum(_nbytes(x) for x in v) if isinstance(v, (list, tuple)) else 0


@dataclass(frozen=True)
class Input:
    kind: str              # "full" [R, C] | "row" [C] | "col" [R, 1]
    dtype: torch.dtype
    mean: float = 0.0
    std: float = 1.0
    transposed: bool = False   # stored [C, R], passed as its (non-contiguous) transpose


@dataclass(frozen=True, eq=False)
class Val:
    ref: tuple[str, int]   # ("a", i): the i-th argument; ("v", i): the i-th statement's value
    name: str
    meta: torch.Tensor     # the value on the meta device at REF_ROWS rows
    bound: float           # rough bound on |value|
    noisy: bool = False    # depends on a computed f16/bf16 value, which eager rounds and a kernel may not

    @property
    def dtype(self) -> torch.dtype:
        return self.meta.dtype

    @property
    def limit(self) -> float:
        return LIMIT.get(self.dtype, 1e4)


@dataclass
class Builder:
    """A draft: inputs, statements (run on meta as drawn), outputs, a tag per block."""

    cols: int
    inputs: list[Input] = field(default_factory=list)
    steps: list[tuple[Callable[..., torch.Tensor], tuple[tuple[str, int], ...]]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    fulls: list[Val] = field(default_factory=list)     # [R, C] values: operands for later statements
    vectors: list[Val] = field(default_factory=list)   # broadcastable [C], [1, C], [R, 1] values
    extras: list[Val] = field(default_factory=list)    # values that may be returned besides the last
    outputs: list[Val] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)

    def input(self, spec: Input) -> Val:
        i = len(self.inputs)
        self.inputs.append(spec)
        v = Val(("a", i), f"a{i}", _make(spec, REF_ROWS, self.cols, "meta", None), abs(spec.mean) + 6 * spec.std)
        self._file(v)
        return v

    def emit(self, text: str, f: Callable[..., torch.Tensor], args: tuple[Val, ...], bound: float,
             exact: bool = False) -> Val:
        """Append `v = f(*args)`; text formats the expression with the operands' names. `exact`: a
        kernel rounds like eager does (casts), so the result is noisy only if an operand is."""
        i = len(self.steps)
        meta = f(*(a.meta for a in args))
        noisy = any(a.noisy for a in args) or (not exact and meta.dtype in LOWP)
        v = Val(("v", i), f"v{i}", meta, bound, noisy)
        self.steps.append((f, tuple(a.ref for a in args)))
        self.lines.append(f"{v.name} = " + text.format(*(a.name for a in args)))
        self._file(v)
        return v

    def cast(self, x: Val, dtype: torch.dtype) -> Val:
        return self.emit(f"{{}}.to(torch.{str(dtype).split('.')[-1]})", lambda t: t.to(dtype), (x,), x.bound, exact=True)

    def output(self, v: Val) -> None:
        """Return v; an f32 value that depends on rounded low-precision values is returned as bf16
        (f32 tolerances would fail on the rounding differences, which no compiler avoids)."""
        if v.noisy and v.dtype == torch.float32:
            v = self.cast(v, torch.bfloat16)
        self.outputs.append(v)

    def _file(self, v: Val) -> None:
        shape = tuple(v.meta.shape)
        if shape == (REF_ROWS, self.cols):
            self.fulls.append(v)
        elif v.meta.is_floating_point() and shape in ((self.cols,), (1, self.cols), (REF_ROWS, 1)):
            self.vectors.append(v)

    def function(self) -> Callable[..., Any]:
        steps, outs = list(self.steps), [o.ref for o in self.outputs]

        def program(*args: torch.Tensor) -> Any:
            vals: list[torch.Tensor] = []
            for f, refs in steps:
                vals.append(f(*(args[i] if s == "a" else vals[i] for s, i in refs)))
            res = tuple(args[i] if s == "a" else vals[i] for s, i in outs)
            return res[0] if len(res) == 1 else res
        return program


def _make(spec: Input, rows: int, cols: int, device: str, gen: torch.Generator | None) -> torch.Tensor:
    shape = {"full": (rows, cols), "row": (cols,), "col": (rows, 1)}[spec.kind]
    if spec.transposed:
        shape = shape[::-1]
    if device == "meta":
        t = torch.empty(shape, dtype=spec.dtype, device="meta")
    else:
        t = torch.randn(shape, generator=gen, device=device, dtype=spec.dtype)
        if spec.std != 1.0:
            t.mul_(spec.std)
        if spec.mean:
            t.add_(spec.mean)
    return t.t() if spec.transposed else t


# ---- pointwise ops: (rng, bound) -> (f, text, new bound) or None when not applicable -------------

def _c(rng: random.Random, lo: float, hi: float) -> float:
    return round(rng.uniform(lo, hi), 3)


def _scale(rng, b):
    c = _c(rng, 0.5, 1.5) * rng.choice((1, -1))
    return (lambda x: x * c), f"{{}} * {c}", b * abs(c)


def _shift(rng, b):
    c = _c(rng, -1.0, 1.0)
    return (lambda x: x + c), f"{{}} + {c}", b + abs(c)


def _clamp(rng, b):
    c = _c(rng, 0.5, 4.0)
    return (lambda x: x.clamp(-c, c)), f"{{}}.clamp({-c}, {c})", min(b, c)


def _leaky(rng, b):
    c = _c(rng, 0.01, 0.3)
    return (lambda x: torch.where(x > 0, x, x * c)), f"torch.where({{0}} > 0, {{0}}, {{0}} * {c})", b


def _exp(rng, b):
    if b <= 4.0:
        return torch.exp, "torch.exp({})", math.exp(b)
    c = _c(rng, 1.0, 4.0)
    return (lambda x: torch.exp(x.clamp(max=c))), f"torch.exp({{}}.clamp(max={c}))", math.exp(c)


def _pow(rng, b):
    p = rng.choice((2, 3, 0.5, 1.5))
    if p in (2, 3):
        return (lambda x: x.pow(p)), f"{{}}.pow({p})", b ** p
    return (lambda x: x.abs().pow(p)), f"{{}}.abs().pow({p})", b ** p


CHEAP = [
    lambda rng, b: (torch.abs, "{}.abs()", b),
    lambda rng, b: (torch.neg, "-{}", b),
    _scale, _shift, _clamp, _leaky,
    lambda rng, b: (torch.relu, "torch.relu({})", b),
    lambda rng, b: ((lambda x: x * x), "{0} * {0}", b * b),
]
TRANSCENDENTAL = [
    _exp, _pow,
    lambda rng, b: ((lambda x: torch.log(x.abs() + 1)), "torch.log({}.abs() + 1)", math.log1p(b)),
    lambda rng, b: (torch.tanh, "torch.tanh({})", 1.0),
    lambda rng, b: (torch.sigmoid, "torch.sigmoid({})", 1.0),
    lambda rng, b: ((lambda x: F.gelu(x, approximate="tanh")), "F.gelu({}, approximate='tanh')", b),
    lambda rng, b: (F.gelu, "F.gelu({})", b),
    lambda rng, b: (F.silu, "F.silu({})", b),
    lambda rng, b: ((lambda x: torch.sqrt(x.abs() + 1e-3)), "torch.sqrt({}.abs() + 1e-3)", math.sqrt(b + 1e-3)),
    lambda rng, b: ((lambda x: torch.rsqrt(x.abs() + 1)), "torch.rsqrt({}.abs() + 1)", 1.0),
    lambda rng, b: ((lambda x: torch.erf(x)), "torch.erf({})", 1.0),
]
BINARY = [  # (f, text, bound of the result from the operands' bounds)
    (torch.add, "{} + {}", lambda a, b: a + b),
    (torch.sub, "{} - {}", lambda a, b: a + b),
    (torch.mul, "{} * {}", lambda a, b: a * b),
    ((lambda x, y: x / (y.abs() + 1)), "{} / ({}.abs() + 1)", lambda a, b: a),
    (torch.maximum, "torch.maximum({}, {})", max),
    ((lambda x, y: torch.where(x > y, x, y)), "torch.where({0} > {1}, {0}, {1})", max),
]


def _unary(rng: random.Random, b: Builder, x: Val) -> Val:
    table = CHEAP if rng.random() < 0.5 else TRANSCENDENTAL
    for _ in range(20):
        f, text, bound = rng.choice(table)(rng, x.bound)
        if bound <= max(x.limit, x.bound):
            return b.emit(text, f, (x,), bound)
    return b.emit("torch.tanh({})", torch.tanh, (x,), 1.0)


def _operand(rng: random.Random, b: Builder, x: Val) -> Val:
    """Another value to combine with x: an earlier full value, a vector (new or earlier), a new full input."""
    others = [v for v in b.fulls if v is not x]
    r = rng.random()
    if others and r < 0.35:
        return rng.choice(others)
    if b.vectors and r < 0.55:
        return rng.choice(b.vectors)
    if r < 0.85:
        return b.input(Input(rng.choice(("row", "row", "col")), _dtype_like(rng, x.dtype), std=_c(rng, 0.2, 1.0)))
    return b.input(Input("full", _dtype_like(rng, x.dtype), transposed=rng.random() < 0.1))


def _binary(rng: random.Random, b: Builder, x: Val) -> Val:
    y = _operand(rng, b, x)
    for _ in range(10):
        f, text, bound = rng.choice(BINARY)
        nb = bound(x.bound, y.bound)
        if nb <= max(x.limit, x.bound):
            args = (x, y) if rng.random() < 0.7 or text.startswith("{} /") else (y, x)
            return b.emit(text, f, args, nb)
    return b.emit("{} + {}", torch.add, (x, y), x.bound + y.bound)


def _dtype_like(rng: random.Random, dtype: torch.dtype) -> torch.dtype:
    return dtype if rng.random() < 0.8 else rng.choice(DTYPES)


# ---- blocks: (rng, builder, current [R, C] value) -> the new current value -----------------------

def pointwise_chain(rng: random.Random, b: Builder, x: Val) -> Val:
    n = rng.choice((1, 2, 3, 4, 5, 6, 8, 10, 12))
    for _ in range(n):
        x = _binary(rng, b, x) if rng.random() < 0.3 else _unary(rng, b, x)
    b.tags.append(f"pw{n}")
    return x


def affine(rng: random.Random, b: Builder, x: Val) -> Val:
    w = b.input(Input("row", _dtype_like(rng, x.dtype), mean=1.0, std=0.1))
    x = b.emit("{} * {}", torch.mul, (x, w), x.bound * 1.6)
    if rng.random() < 0.7:
        c = b.input(Input(rng.choice(("row", "col")), _dtype_like(rng, x.dtype), std=0.1))
        x = b.emit("{} + {}", torch.add, (x, c), x.bound + 0.6)
    b.tags.append("affine")
    return x


def residual(rng: random.Random, b: Builder, x: Val) -> Val:
    y = b.input(Input("full", _dtype_like(rng, x.dtype), transposed=rng.random() < 0.15))
    x = b.emit("{} + {}", torch.add, (x, y), x.bound + y.bound)
    if rng.random() < 0.5:
        b.extras.append(x)
    b.tags.append("res")
    return x


def cast(rng: random.Random, b: Builder, x: Val) -> Val:
    choices = [d for d in DTYPES if d != x.dtype and x.bound <= LIMIT[d]]
    if not choices:
        x = _clamp_to(b, x, LIMIT[torch.bfloat16])
        choices = [d for d in DTYPES if d != x.dtype]
    d = rng.choice(choices)
    b.tags.append(f"to{SHORT[d]}")
    return b.cast(x, d)


def _clamp_to(b: Builder, x: Val, c: float) -> Val:
    return b.emit(f"{{}}.clamp({-c}, {c})", lambda t: t.clamp(-c, c), (x,), c)


ROW_KINDS = ("sum", "mean", "max", "amax", "var", "std", "logsumexp", "softmax", "log_softmax", "layer_norm",
             "rms_norm", "argmax")
ROW_WEIGHTS = (3, 3, 1, 2, 2, 1, 2, 3, 2, 3, 3, 0.3)
COL_KINDS = ("sum", "mean", "max", "amax", "var", "std", "logsumexp", "softmax", "argmax")
COL_WEIGHTS = (3, 3, 1, 2, 2, 1, 1, 1, 0.2)


def reduction(rng: random.Random, b: Builder, x: Val) -> Val:
    """A reduction over the last dim (or, a quarter of the time, over dim 0), maybe broadcast back."""
    dim = 0 if rng.random() < 0.25 else -1
    kinds, weights = (COL_KINDS, COL_WEIGHTS) if dim == 0 else (ROW_KINDS, ROW_WEIGHTS)
    kind = rng.choices(kinds, weights)[0]
    b.tags.append(("col_" if dim == 0 else "") + kind)
    n = MAX_ROWS if dim == 0 else b.cols
    if kind in ("sum", "var") and x.dtype == torch.float16 and x.bound * (n if kind == "sum" else x.bound) > 3e4:
        x = b.emit("{}.float()", lambda t: t.float(), (x,), x.bound, exact=True)   # f16 sums overflow: accumulate in f32
    if kind == "layer_norm":
        return _layer_norm(rng, b, x)
    if kind == "rms_norm":
        return _rms_norm(rng, b, x)
    if kind in ("softmax", "log_softmax"):
        fn = torch.softmax if kind == "softmax" else torch.log_softmax
        up = rng.random() < 0.3 and x.dtype != torch.float32
        f = (lambda t: fn(t, dim, dtype=torch.float32)) if up else (lambda t: fn(t, dim))
        text = f"torch.{kind}({{}}, {dim}{', dtype=torch.float32' if up else ''})"
        return b.emit(text, f, (x,), 1.0 if kind == "softmax" else 2 * x.bound + math.log(n))
    keep = rng.random() < 0.6
    if kind == "argmax" and x.noisy:   # near-ties of rounded values flip the index
        kind = "amax"
    if kind == "argmax":
        b.output(b.emit(f"{{}}.argmax({dim})", lambda t: t.argmax(dim), (x,), float(n)))
        return x
    corr = rng.choice((0, 1))
    f, text, bound = {
        "sum": (lambda t: t.sum(dim, keepdim=keep), f"{{}}.sum({dim}, keepdim={keep})", x.bound * n),
        "mean": (lambda t: t.mean(dim, keepdim=keep), f"{{}}.mean({dim}, keepdim={keep})", x.bound),
        "max": (lambda t: t.max(dim, keepdim=keep).values, f"{{}}.max({dim}, keepdim={keep}).values", x.bound),
        "amax": (lambda t: t.amax(dim, keepdim=keep), f"{{}}.amax({dim}, keepdim={keep})", x.bound),
        "var": (lambda t: t.var(dim, keepdim=keep, correction=corr),
                f"{{}}.var({dim}, keepdim={keep}, correction={corr})", x.bound ** 2),
        "std": (lambda t: t.std(dim, keepdim=keep, correction=corr),
                f"{{}}.std({dim}, keepdim={keep}, correction={corr})", x.bound),
        "logsumexp": (lambda t: torch.logsumexp(t, dim, keepdim=keep), f"torch.logsumexp({{}}, {dim}, keepdim={keep})",
                      x.bound + math.log(n)),
    }[kind]
    r = b.emit(text, f, (x,), bound)
    broadcastable = keep or dim == 0
    if not broadcastable or r.bound > r.limit or rng.random() < 0.35:
        b.output(r)                   # a reduced output next to whatever the program goes on to compute
        return x
    if kind in ("var", "std"):
        return b.emit("{} / ({} + 1)", lambda t, s: t / (s + 1), (x, r), x.bound)
    if kind == "sum":
        return b.emit("{} / ({}.abs() + 1)", lambda t, s: t / (s.abs() + 1), (x, r), x.bound)
    return b.emit("{} - {}", torch.sub, (x, r), x.bound + r.bound)


def _layer_norm(rng: random.Random, b: Builder, x: Val) -> Val:
    c = b.cols
    if rng.random() < 0.75:
        w = b.input(Input("row", x.dtype, mean=1.0, std=0.1))
        bias = b.input(Input("row", x.dtype, std=0.1))
        return b.emit(f"F.layer_norm({{}}, ({c},), {{}}, {{}})", lambda t, w, bb: F.layer_norm(t, (c,), w, bb),
                      (x, w, bias), 12.0)
    if rng.random() < 0.5:   # written out: mean, var, normalize
        m = b.emit("{}.mean(-1, keepdim=True)", lambda t: t.mean(-1, keepdim=True), (x,), x.bound)
        d = b.emit("{} - {}", torch.sub, (x, m), 2 * x.bound)
        v = b.emit("({0} * {0}).mean(-1, keepdim=True)", lambda t: (t * t).mean(-1, keepdim=True), (d,), 4 * x.bound ** 2)
        return b.emit("{} * torch.rsqrt({} + 1e-5)", lambda t, s: t * torch.rsqrt(s + 1e-5), (d, v), 12.0)
    return b.emit(f"F.layer_norm({{}}, ({c},))", lambda t: F.layer_norm(t, (c,)), (x,), 10.0)


def _rms_norm(rng: random.Random, b: Builder, x: Val) -> Val:
    w = b.input(Input("row", x.dtype, mean=1.0, std=0.1))
    xf = b.emit("{}.float()", lambda t: t.float(), (x,), x.bound, exact=True)
    dt = x.dtype
    n = b.emit("{0} * torch.rsqrt({0}.pow(2).mean(-1, keepdim=True) + 1e-6)",
               lambda t: t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6), (xf,), 12.0)
    if dt != torch.float32:
        n = b.cast(n, dt)
    return b.emit("{} * {}", torch.mul, (n, w), 16.0)


BLOCKS = (pointwise_chain, reduction, affine, residual, cast)
BLOCK_WEIGHTS = (4, 4, 1, 1, 1)


# ---- whole programs ------------------------------------------------------------------------------

def _row_length(rng: random.Random) -> int:
    if rng.random() < 0.7:
        return rng.choice(ROW_LENGTHS)
    return int(math.exp(rng.uniform(math.log(33), math.log(32768))))


def _draft(rng: random.Random) -> tuple[Builder, torch.dtype]:
    dtype = rng.choices(DTYPES, (4, 4, 2))[0]
    b = Builder(_row_length(rng))
    x = b.input(Input("full", dtype, transposed=rng.random() < 0.12))
    for block in rng.choices(BLOCKS, BLOCK_WEIGHTS, k=rng.choice((1, 1, 2, 2, 3, 4))):
        x = block(rng, b, x)
    if x.ref[0] == "a" and not b.outputs:   # nothing computed yet (a cast-free draft): one op at least
        x = _unary(rng, b, x)
    if x.ref[0] == "v":                     # else only reduced outputs, as in a column sum
        if x.dtype != dtype and rng.random() < 0.5 and x.bound <= LIMIT[dtype]:
            x = b.cast(x, dtype)
        b.output(x)
    extra = [v for v in b.extras + [v for v in b.fulls if v.ref[0] == "v"] if v is not x and v not in b.outputs]
    for v in rng.sample(extra, k=min(len(extra), rng.choice((0, 0, 0, 1, 1, 2)))):
        b.output(v)
    return b, dtype


def _bytes_at(b: Builder, rows: int) -> int:
    args = [_make(s, rows, b.cols, "meta", None) for s in b.inputs]
    with torch.no_grad():
        return _nbytes(args) + _nbytes(b.function()(*args))


def _rows(rng: random.Random, b: Builder) -> int | None:
    """A row count putting inputs + outputs in [MIN_BYTES, MAX_BYTES], or None when none does."""
    b1 = _bytes_at(b, 1)
    per_row = _bytes_at(b, 2) - b1
    target = math.exp(rng.uniform(math.log(MIN_BYTES), math.log(MAX_BYTES)))
    rows = int(min(MAX_ROWS, max(MIN_ROWS, (target - (b1 - per_row)) / per_row)))
    r = rng.random()
    if r < 0.5:
        rows = max(MIN_ROWS, rows // 64 * 64)
    elif r < 0.7:
        rows = 2 ** int(math.log2(rows))
    return rows if MIN_BYTES <= _bytes_at(b, rows) <= MAX_BYTES else None


def _build(b: Builder, rows: int, seed: int, device: str) -> tuple[Callable[..., Any], tuple]:
    gen = None if device == "meta" else torch.Generator(device=device).manual_seed(seed)
    args = tuple(_make(s, rows, b.cols, device, gen) for s in b.inputs)
    return b.function(), args


def program(seed: int, index: int, scale: float = 1.0, inputs_seed: int | None = None) -> Program:
    """Program `index` of a seed's corpus; `inputs_seed` draws other input values (the same program)."""
    rng = random.Random(f"autofuse-corpus:{seed}:{index}")
    for _ in range(100):
        b, dtype = _draft(rng)
        rows = _rows(rng, b)
        if rows is not None:
            break
    else:
        raise RuntimeError(f"corpus: no program fits {MIN_BYTES}-{MAX_BYTES} bytes for seed {seed} index {index}")
    t = "T" if any(s.transposed for s in b.inputs) else ""
    name = f"s{seed}_{index:04d}_{SHORT[dtype]}{t}_{rows}x{b.cols}_" + "-".join(b.tags)[:60]
    head = [f"a{i}: {SHORT[s.dtype]} {s.kind}{' transposed' if s.transposed else ''}" for i, s in enumerate(b.inputs)]
    tail = ["return " + ", ".join(o.name for o in b.outputs)]
    real_rows = max(1, int(rows * scale))
    build = partial(_build, b, real_rows, seed * 1_000_003 + index if inputs_seed is None else inputs_seed)
    return Program(name, build, "\n".join(head + b.lines + tail), b.cols, tuple(b.tags), rows, dtype)


def corpus(n: int, seed: int = 0, scale: float = 1.0) -> list[Program]:
    """n seeded random memory-bound programs; scale multiplies the leading (row) dim."""
    return [program(seed, i, scale) for i in range(n)]


def suite(scale: float = 1.0) -> list[Program]:
    """The benchmark suite (benchmarks/cases.py) as Programs."""
    from .cases import CASES
    return [Program(c.name, partial(_suite_build, c, scale)) for c in CASES]


def _suite_build(case: Any, scale: float, device: str) -> tuple[Callable[..., Any], tuple]:
    return case.build(device, scale)
