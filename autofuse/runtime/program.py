"""The compiled program of one graph specialization: a list of steps, and the wrapper that runs them.

Note: buffers live in a list of slots; a step frees slots after their last use, and an
allocation may take the storage of a freed buffer of the same device, dtype and size (the
compiler decides which, never a buffer an ATen fallback may alias: runtime/aliasing.py). A call
runs the generated wrapper (runtime/wrapper.py); the step interpreter (`new_env` and each step's
`run`) serves the search, the probes, and calls made while a Triton launch hook is set. The
steps themselves are in runtime/steps.py.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..ir.values import Layout
from .steps import (Alloc, ConstOutput, ExternCall, Free, KernelLaunch, SlotOutput, StridedArg,  # noqa: F401
                    allocator, poison)
from . import wrapper as _wrapper
from .precompile import precompile

__all__ = ["Alloc", "ConstOutput", "ExternCall", "Free", "KernelLaunch", "Program", "SlotOutput", "StridedArg",
           "allocator", "poison"]


@dataclass
class Program:
    """Runs the steps on the inputs and returns the outputs (tensors, views or constants).

    `layouts` holds the layout of each input slot (the specialization's), so the wrapper passes an
    input as itself where a step reads it in that layout."""

    num_slots: int
    input_slots: tuple[int | None, ...]
    steps: list[Any]
    outputs: list[Callable[[list], Any]]
    kernels: list[Any] = field(default_factory=list)
    layouts: dict[int, Layout] = field(default_factory=dict)
    writes_inputs: bool = False  # a kernel stores an input update into the input (schedule/input_updates.py)
    _wrapper: Any = field(default=None, repr=False, compare=False)

    @property
    def wrapper(self) -> Any:
        """The generated wrapper (runtime/wrapper.py), written on first use; None for a program with a
        step or output the writer does not know (it then runs interpreted)."""
        if self._wrapper is None:
            precompile([s for s in self.steps if isinstance(s, KernelLaunch)])
            try:
                self._wrapper = _wrapper.generate(self) if _wrapper.writable(self) else False
            except Exception as e:  # noqa: BLE001 - the interpreter runs any program; a wrapper is only faster
                warnings.warn(f"autofuse: no wrapper for this program ({type(e).__name__}: {e}); running its steps")
                self._wrapper = False
        return self._wrapper or None

    @property
    def source(self) -> str:
        """The wrapper's Python source ("" when the program runs interpreted)."""
        w = self.wrapper
        return w.source if w is not None else ""

    @property
    def mutates_inputs(self) -> bool:
        """Does a step write into its operands (an input update, `lower/mutation.py`)? A CUDA graph
        replay would write the graph's static copies of the inputs instead of the caller's."""
        return self.writes_inputs or any(
            isinstance(s, ExternCall) and getattr(getattr(s.op, "_schema", None), "is_mutable", False)
            for s in self.steps)

    def new_env(self, args: Sequence[Any]) -> list:
        """The slot list of one run, holding the inputs (the search and probes run steps one by one)."""
        env: list = [None] * self.num_slots
        for slot, a in zip(self.input_slots, args):
            if slot is not None:
                env[slot] = a
        return env

    def __call__(self, args: Sequence[Any], steal: bool = False) -> list[Any]:
        """The outputs of one call. `steal`: the caller hands `args` (a list) over, and the wrapper
        empties it so that each input can be freed after its last use."""
        w = self._wrapper if self._wrapper is not None else self.wrapper
        return w.fn(args, steal) if w else self.interpret(args)

    def interpret(self, args: Sequence[Any]) -> list[Any]:
        """Run the steps one by one (the same result as the wrapper, slower)."""
        env = self.new_env(args)
        for step in self.steps:
            step.run(env)
        return [o(env) for o in self.outputs]
