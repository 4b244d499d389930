"""The wrapper of a compiled program: its steps written out as one straight-line Python function.

Note: every decision that does not depend on a call's data is taken here, once: which slot each
step reads (a local variable per buffer), where a buffer dies (`del` after its last use, or its
storage handed to the allocation planned to take it), whether an argument is its buffer itself or
needs a strided view, each kernel's launcher with its grid, sizes and constexprs bound. A call then
runs the launches and ATen calls with nothing between them but local variables. The one check
left per call is on each ATen fallback's result layout (as Inductor's `assert_size_stride`): only
running the op tells it. GPU launches take the current stream once per call; with a Triton launch
hook set, a call runs the step interpreter instead (the JIT path calls the hook).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from torch.utils._pytree import tree_leaves

from ..ir.values import Layout
from .launcher import hooks_set
from .steps import (Alloc, ConstOutput, ExternCall, Free, KernelLaunch, SlotOutput, StridedArg, _empty_strided_cuda,
                    allocator, poison)

try:  # torch's C++ view constructor without dispatch overhead (what Inductor's wrappers call)
    from torch._C._dynamo.guards import _reinterpret_tensor
except ImportError:  # pragma: no cover - older torch
    def _reinterpret_tensor(t: torch.Tensor, size: Sequence[int], stride: Sequence[int], offset: int) -> torch.Tensor:
        return t.as_strided(size, stride, t.storage_offset() + offset)

_current_device = getattr(torch._C, "_cuda_getDevice", None)  # None in a build without CUDA


@dataclass(frozen=True)
class Wrapper:
    """The generated function (inputs list -> outputs list) and its source."""

    source: str
    fn: Callable[[Sequence[Any]], list]


BINDING_SIBLINGS = ("out", "dtype", "dtype_out")   # overloads a call without out= / out_dtype never resolves to


def binding_resolves_to_default(packet: Any) -> bool:
    """A `torch.*` call with the default overload's arguments resolves to that overload: every other
    overload is an out= or out_dtype variant, or requires a dimension name (a `Dimname` without a
    default, parsed from a string only: the int dims of a traced graph never select it; torch
    2.11's `cat` has two such overloads)."""
    for name in packet.overloads():
        if name == "default" or name in BINDING_SIBLINGS:
            continue
        if not any("Dimname" in str(a.type) and not a.has_default_value()
                   for a in getattr(packet, name)._schema.arguments):
            return False
    return True


def direct_callable(op: Any) -> Any:
    """What the wrapper calls for an ATen op: its `torch.*` binding where that can only resolve to
    this overload (`binding_resolves_to_default`), else the overload's C++ callable. Why: the
    binding parses its arguments in generated C++, about half the host time of an OpOverload call
    (3 against 6 µs per convolution on a CPU host); Inductor's extern kernels call the bindings too."""
    if not isinstance(op, torch._ops.OpOverload):
        return op
    if op.namespace == "aten" and op._overloadname == "default" and binding_resolves_to_default(op.overloadpacket):
        binding = getattr(torch._C._VariableFunctions, op.overloadpacket.__name__, None)
        if binding is not None:
            return binding
    return op._op


def relayout(t: torch.Tensor, size: tuple[int, ...], stride: tuple[int, ...]) -> torch.Tensor:
    """t copied into the layout the rest of the program was compiled for."""
    out = torch.empty_strided(size, stride, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


class _Writer:
    def __init__(self, program: Any) -> None:
        self.program = program
        self.ns: dict[str, Any] = {"_rt": _reinterpret_tensor, "_relayout": relayout, "_hooks_set": hooks_set,
                                   "_interpret": program.interpret}
        self.lines: list[str] = []
        self.known: dict[int, Layout] = dict(program.layouts)  # the layout each slot's tensor has
        self.alloc_devices: set[int] = set()  # CUDA devices the wrapper allocates on (`_alloc`)
        self.viewed = viewed_layouts(program)   # buffers allocated in the layout their calls view them in

    def const(self, v: Any) -> str:
        if v is None or isinstance(v, (bool, int, str)) or (isinstance(v, float) and math.isfinite(v)):
            return repr(v)
        if isinstance(v, (list, tuple)):
            body = ", ".join(self.expr(x) for x in v)
            return f"[{body}]" if isinstance(v, list) else f"({body}{',' if len(v) == 1 else ''})"
        name = f"_c{len(self.ns)}"
        self.ns[name] = v
        return name

    def expr(self, a: Any) -> str:
        if isinstance(a, SlotOutput):
            return f"b{a.slot}"
        if isinstance(a, StridedArg):
            lay, have = a.layout, self.known.get(a.slot)
            if have is not None and lay.offset == 0 and tuple(have.size) == tuple(lay.size) \
                    and tuple(have.stride) == tuple(lay.stride):
                return f"b{a.slot}"
            return f"_rt(b{a.slot}, {tuple(lay.size)!r}, {tuple(lay.stride)!r}, {lay.offset})"
        if isinstance(a, (list, tuple)) or a is None or isinstance(a, (bool, int, str, float)):
            return self.const(a)
        if isinstance(a, dict):
            return "{" + ", ".join(f"{k!r}: {self.expr(v)}" for k, v in a.items()) + "}"
        return self.const(a)

    def name(self, prefix: str, v: Any) -> str:
        n = f"_{prefix}{len(self.ns)}"
        self.ns[n] = v
        return n


def reads_of(step: Any) -> tuple[int, ...]:
    """The slots a step reads (a kernel's arguments include the buffers it writes)."""
    from torch.utils._pytree import tree_leaves
    if isinstance(step, KernelLaunch):
        return step.arg_slots
    if isinstance(step, ExternCall):
        leaves = tree_leaves((step.args, step.kwargs), is_leaf=lambda x: isinstance(x, StridedArg))
        return tuple(a.slot for a in leaves if isinstance(a, StridedArg))
    if isinstance(step, Alloc) and step.reuse is not None:
        return (step.reuse,)
    return ()


def writes_of(step: Any) -> tuple[int, ...]:
    from torch.utils._pytree import tree_leaves
    if isinstance(step, Alloc):
        return (step.slot,)
    if isinstance(step, ExternCall):
        return tuple(s for s in tree_leaves(step.out_slots) if isinstance(s, int))
    return ()


def output_slots(outputs: Sequence[Any]) -> set[int]:
    return {o.slot for o in outputs if isinstance(o, (SlotOutput, StridedArg))}


def writable(program: Any) -> bool:
    """Every step and output is of a kind the writer knows (else the program runs interpreted)."""
    return (all(type(s) in (Alloc, ExternCall, Free, KernelLaunch) for s in program.steps)
            and all(type(o) in (ConstOutput, SlotOutput, StridedArg) for o in program.outputs))


def generate(program: Any) -> Wrapper:
    """The wrapper of `program` (a runtime.program.Program whose steps and outputs are `writable`)."""
    w = _Writer(program)
    steps, outputs = program.steps, program.outputs
    keep = output_slots(outputs)
    last: dict[int, int] = {}
    for i, step in enumerate(steps):
        for s in (*reads_of(step), *writes_of(step)):
            last[s] = i
    dies: dict[int, list[int]] = {}
    for s, i in last.items():
        if s not in keep:
            dies.setdefault(i, []).append(s)
    fast = [s for s in steps if isinstance(s, KernelLaunch) and s.numel and s._launch.enabled]
    devices = sorted({s._launch.device_index for s in fast})
    body = w.lines
    if fast:
        body.append("if _hooks_set():")
        body.append("    return _interpret(args)")
        for d in devices:
            getter = w.name("stream", next(s for s in fast if s._launch.device_index == d)._launch.stream_getter())
            body.append(f"st{d} = {getter}({d})")
    device_checks_at = len(body)
    allocated = {s.slot for s in steps if isinstance(s, Alloc)}
    for k, s in enumerate(program.input_slots):
        if s is not None and (s in last or s in keep):
            body.append(f"b{s} = args[{k}]")
    # a stolen argument list (AOTAutograd's boxed call) is emptied, so that each input, a backward
    # graph's saved activations above all, is freed after its last use, as Inductor's wrappers do
    body.append("if steal:")
    body.append("    args.clear()")
    for i, step in enumerate(steps):
        if isinstance(step, Alloc):
            _alloc(w, step)
        elif isinstance(step, KernelLaunch):
            if step.numel:
                aligned = [a in allocated for a in step.arg_slots]
                go = w.name("k", step.bind(aligned))
                stream = f"st{step._launch.device_index}" if step._launch.enabled else "None"
                body.append(f"{go}({stream}, {', '.join(f'b{a}' for a in step.arg_slots)})  # {step.name}")
        elif isinstance(step, ExternCall):
            _extern(w, step)
        if i in dies:
            body.append(f"del {', '.join(f'b{s}' for s in sorted(dies[i]))}")
    body.append(f"return [{', '.join(w.expr(_out(o)) for o in outputs)}]")
    if w.alloc_devices:  # is the current device the allocations' device? asked once per call
        w.ns["_getdev"] = _current_device
        body[device_checks_at:device_checks_at] = [f"ondev{d} = _getdev() == {d}" for d in sorted(w.alloc_devices)]
    source = "def wrapper(args, steal=False):\n" + "".join(f"    {line}\n" for line in body)
    code = compile(source, "<autofuse wrapper>", "exec")
    ns = dict(w.ns)
    exec(code, ns)  # noqa: S102 - the source is generated above from the program's own steps
    return Wrapper(source, ns["wrapper"])


def _out(o: Any) -> Any:
    return o.value if isinstance(o, ConstOutput) else o


def viewed_layouts(program: Any) -> dict[int, Layout]:
    """The layout to allocate a buffer in when every ATen call takes it through one same strided view
    (a convolution's channels-last operand, computed in NHWC memory order as a [N, H, W, C] buffer):
    the view's own size and strides over the same memory, so the call takes the buffer itself
    instead of a view made on every call. Kernels see only its pointer. Not for a buffer the
    program returns or hands to a call as it is."""
    allocs = {s.slot: s.layout for s in program.steps if isinstance(s, Alloc)}
    views: dict[int, set[tuple]] = {}
    raw: set[int] = set()
    calls = [leaf for s in program.steps if isinstance(s, ExternCall)
             for leaf in tree_leaves((list(s.args), dict(s.kwargs)), is_leaf=lambda x: isinstance(x, (SlotOutput, StridedArg)))]
    for leaf in calls:
        if isinstance(leaf, StridedArg):
            lay = leaf.layout
            views.setdefault(leaf.slot, set()).add((tuple(lay.size), tuple(lay.stride), lay.offset))
        elif isinstance(leaf, SlotOutput):
            raw.add(leaf.slot)
    raw |= {o.slot for o in program.outputs if isinstance(o, (SlotOutput, StridedArg))}
    out: dict[int, Layout] = {}
    for slot, lay in allocs.items():
        if slot in raw or len(views.get(slot, ())) != 1:
            continue
        ((size, stride, offset),) = views[slot]
        view = Layout(lay.device, lay.dtype, size, stride, 0)
        if offset == 0 and view.storage_span() == lay.storage_span() and view.numel == lay.numel:
            out[slot] = view
    return out


def _alloc(w: _Writer, step: Any) -> None:
    lay = w.viewed.get(step.slot, step.layout)
    new = step._new if lay is step.layout else allocator(lay)
    donor = w.known.get(step.reuse) if step.reuse is not None else None
    if step.reuse is not None and donor is not None and tuple(donor.size) == tuple(lay.size) \
            and tuple(donor.stride) == tuple(lay.stride):
        w.lines.append(f"b{step.slot} = b{step.reuse}")
    elif step.reuse is not None:
        w.lines.append(f"b{step.slot} = _rt(b{step.reuse}, {tuple(lay.size)!r}, {tuple(lay.stride)!r}, 0)")
    elif _empty_strided_cuda is not None and _current_device is not None and torch.device(lay.device).type == "cuda":
        # the C++ allocation inline where the current device is the buffer's (`ondev`, once per call)
        d = torch.device(lay.device).index or 0
        w.alloc_devices.add(d)
        w.ns["_esc"] = _empty_strided_cuda
        w.lines.append(f"b{step.slot} = _esc({tuple(lay.size)!r}, {tuple(lay.stride)!r}, {w.const(lay.dtype)}) "
                       f"if ondev{d} else {w.name('new', new)}()")
    else:
        w.lines.append(f"b{step.slot} = {w.name('new', new)}()")
    if step.poison:
        w.ns["_poison"] = poison
        w.lines.append(f"_poison(b{step.slot})")
    w.known[step.slot] = lay


def _extern(w: _Writer, step: Any) -> None:
    args = ", ".join(w.expr(a) for a in step.args)
    kwargs = ", ".join(f"{k}={w.expr(v)}" for k, v in step.kwargs.items())
    op = direct_callable(step.op)
    call = f"{w.name('op', op)}({', '.join(x for x in (args, kwargs) if x)})  # {step.name}"
    if isinstance(step.out_slots, int):
        w.lines.append(f"b{step.out_slots} = {call}")
        _check_layout(w, step, step.out_slots)
        return
    w.lines.append(f"r = {call}")

    def assign(slots: Any, ref: str) -> None:
        if isinstance(slots, int):
            w.lines.append(f"b{slots} = {ref}")
            _check_layout(w, step, slots)
        elif isinstance(slots, (list, tuple)):
            for k, s in enumerate(slots):
                assign(s, f"{ref}[{k}]")
    assign(step.out_slots, "r")
    w.lines.append("del r")


def _check_layout(w: _Writer, step: Any, slot: int) -> None:
    lay = step.out_layouts[slot]
    size, stride = tuple(lay.size), tuple(lay.stride)
    # an output the op leaves undefined (None: a CUDA attention kernel's unused results) stays None; one
    # whose size the kernel decides otherwise than the op's meta function (embedding_bag's bookkeeping
    # outputs in sum mode, empty on the CPU) is kept as the kernel made it: only ATen ops read those
    w.lines.append(f"if b{slot} is not None and b{slot}.stride() != {stride!r} and b{slot}.shape == {size!r}: "
                   f"b{slot} = _relayout(b{slot}, {size!r}, {stride!r})")
    w.known[slot] = Layout(lay.device, lay.dtype, size, stride, 0)
