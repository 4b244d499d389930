"""The training step of the random-program differential test: forward and backward, compiled vs eager.

A step makes every float32 / float64 input a leaf that requires grad (f16 / bf16, integer and bool
inputs stay plain), runs the program, and takes `torch.autograd.grad` of every float output that
requires grad with respect to those leaves, with seeded random output gradients that are never zero
(magnitudes in [0.5, 1.5], either sign). Leaves are twins of the inputs (a copy of their storage,
same sizes, strides and offset), so a run can never write into the caller's tensors, and a compiled
run that writes over its own inputs (or its backward over the output gradients: kernels may store
their result over an operand that dies in them, autofuse/schedule/in_place.py) is caught afterwards.

A gradient that is None (no differentiable path from the input to any output) counts as zeros of
the input's shape, on both sides: AOTAutograd may materialize a zero gradient where eager's autograd
reports no path, and both mean the same thing. Gradients are compared by value (tests/helpers.py's
tolerances for the input's dtype, NaN equal to NaN), not by stride: `autograd.grad` hands back
whatever layout the last backward op produced, in eager and compiled alike. Outputs are compared
as the forward test compares them, strides included.

Replay a failing training seed with
    python3 -c "from tests.randgraph import make_training_case; print(make_training_case(SEED)[2])"
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from tests.helpers import TOLERANCES, assert_close

GRAD_DTYPES = (torch.float32, torch.float64)
GRAD_SEED = 1234  # the output gradients' generator seed


def twin(t: Any) -> Any:
    """A tensor with a copy of t's storage and t's sizes, strides and offset (expanded inputs stay
    expanded); anything else as it is."""
    if not isinstance(t, torch.Tensor):
        return t
    t = t.detach()
    return torch.empty(0, dtype=t.dtype, device=t.device).set_(
        t.untyped_storage().clone(), t.storage_offset(), t.size(), t.stride())


def wants_grad(a: Any) -> bool:
    """Inputs the step differentiates with respect to."""
    return isinstance(a, torch.Tensor) and a.dtype in GRAD_DTYPES


def output_grad(t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A seeded random gradient for output t: |g| in [0.5, 1.5], random sign, never zero."""
    mag = torch.rand(t.shape, generator=gen, dtype=torch.float64) + 0.5
    sign = torch.where(torch.rand(t.shape, generator=gen) < 0.5, -1.0, 1.0).double()
    return (mag * sign).to(dtype=t.dtype, device=t.device)


@dataclass
class Step:
    """One training step's results: the outputs as a list, which of them were differentiated, the
    leaves it ran on, and one gradient per input (None for inputs that take none)."""

    outputs: list[Any]
    differentiated: list[int]
    leaves: list[Any]
    grads: list[torch.Tensor | None]
    grad_outputs: list[torch.Tensor]

    @property
    def ran_backward(self) -> bool:
        return bool(self.differentiated)

    @property
    def computes_gradient(self) -> bool:
        """Is some differentiated output computed rather than a view of an input? (A program whose
        only differentiable outputs are input views compiles no backward graph.)"""
        inputs = {x.untyped_storage().data_ptr() for x in self.leaves if isinstance(x, torch.Tensor)}
        return any(self.outputs[i].untyped_storage().data_ptr() not in inputs for i in self.differentiated)

    def grad_values(self) -> list[torch.Tensor | None]:
        """Gradients with None as zeros for the inputs that take a gradient (see the module note)."""
        return [g if g is not None or not wants_grad(x) else torch.zeros(x.shape, dtype=x.dtype, device=x.device)
                for g, x in zip(self.grads, self.leaves)]


def training_step(fn: Callable[..., Any], args: Sequence[Any], seed: int = GRAD_SEED) -> Step:
    """Run fn forward on leaf twins of args, then backward from every float output that requires grad."""
    leaves = [twin(a) for a in args]
    for x in leaves:
        if wants_grad(x):
            x.requires_grad_(True)
    out = fn(*leaves)
    outputs = list(out) if isinstance(out, (list, tuple)) else [out]
    diff = [i for i, o in enumerate(outputs)
            if isinstance(o, torch.Tensor) and o.is_floating_point() and o.requires_grad]
    wrt = [x for x in leaves if wants_grad(x)]
    grads: list[torch.Tensor | None] = [None] * len(leaves)
    gouts: list[torch.Tensor] = []
    if diff and wrt:
        gen = torch.Generator().manual_seed(seed)
        gouts = [output_grad(outputs[i], gen) for i in diff]
        got = torch.autograd.grad([outputs[i] for i in diff], wrt, gouts, allow_unused=True)
        it = iter(got)
        grads = [next(it) if wants_grad(x) else None for x in leaves]
    else:
        diff = []
    detached = [o.detach() if isinstance(o, torch.Tensor) else o for o in outputs]
    return Step(detached, diff, leaves, grads, gouts)


def grads_agree(a: Step, b: Step, scale: float = 1.0) -> bool:
    """Do two steps' gradients agree within scale x the tolerance of their dtype?"""
    for ga, gb in zip(a.grad_values(), b.grad_values()):
        if ga is None or gb is None:
            if ga is not gb:
                return False
            continue
        if ga.shape != gb.shape or ga.dtype != gb.dtype:
            return False
        rtol, atol = TOLERANCES[gb.dtype]
        if not torch.allclose(ga.double(), gb.double(), rtol=rtol * scale, atol=atol * scale, equal_nan=True):
            return False
    return True


class Mismatch(AssertionError):
    """The compiled step's results differ from eager's (as opposed to an error of the compiler)."""


def _same(x: torch.Tensor, a: torch.Tensor) -> bool:
    """Bit-for-bit equal values, NaN equal to NaN."""
    if x.is_floating_point():
        return torch.allclose(x, a, rtol=0, atol=0, equal_nan=True)
    return torch.equal(x, a)


def assert_step_matches(actual: Step, expected: Step, args: Sequence[Any]) -> None:
    """Outputs (strides included), gradients (by value, None as zeros), and inputs and output
    gradients the compiled step must have left as they were."""
    assert_close(actual.outputs, expected.outputs)
    assert actual.differentiated == expected.differentiated, \
        f"outputs that require grad: compiled {actual.differentiated}, eager {expected.differentiated}"
    for k, (ga, ge) in enumerate(zip(actual.grad_values(), expected.grad_values())):
        if ge is None:
            assert ga is None, f"input {k} takes no gradient, compiled gave one"
            continue
        assert ga is not None, f"input {k}: no gradient from the compiled step"
        try:
            assert_close(ga, ge, check_stride=False)
        except AssertionError as e:
            raise AssertionError(f"gradient of input {k}: {e}") from None
    for k, (x, a) in enumerate(zip(actual.leaves, args)):
        if isinstance(a, torch.Tensor):
            assert _same(x.detach(), a), f"input {k} was written by the compiled step"
    for k, (g, e) in enumerate(zip(actual.grad_outputs, expected.grad_outputs)):
        assert _same(g, e), f"the gradient of output {actual.differentiated[k]} was written by the compiled backward"


def compare_training(fn: Callable[..., Any], args: Sequence[Any], recorder: Any = None,
                     poison: bool = True) -> Step:
    """Compile fn with autofuse (strict, poisoned buffers unless `poison` is False, which lets
    allocations take over freed buffers; no tuning DB) through torch.compile, run
    the training step eagerly and compiled (twice: the second call runs the programs the first one
    built, on fresh buffers) and assert both match (assert_step_matches; a difference raises
    Mismatch, anything the compiler raises passes through). The last compiled step is returned;
    `recorder` (an autofuse Recorder) collects the graphs it compiled. Column sums beside row
    reductions become column partials at any number of rows (the product's threshold, 1024 rows,
    is above every random program's), so a norm's backward exercises them."""
    from autofuse import CompileOptions, Heuristics
    from autofuse.capture.backend import make_backend

    torch._dynamo.reset()
    heuristics = Heuristics(column_partial_min_rows=1)
    backend = make_backend(CompileOptions(strict=True, poison=poison, use_db=False, recorder=recorder,
                                          heuristics=heuristics))
    compiled = torch.compile(fn, backend=backend, dynamic=False)
    expected = training_step(fn, args)
    for call in ("first", "second"):
        actual = training_step(compiled, args)
        try:
            assert_step_matches(actual, expected, args)
        except AssertionError as e:
            raise Mismatch(f"{call} compiled call: {e}") from None
    return actual
