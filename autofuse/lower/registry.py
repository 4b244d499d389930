"""The one registry of lowerings, keyed by ATen op (overload or overload packet), or by an op's
qualified name ("prims::fma") for an op that exists only once some other module defined it."""
from __future__ import annotations

from typing import Callable

import torch

Lowering = Callable[..., object]


class Unsupported(Exception):
    """Raised by a lowering for an input it cannot express; the op then runs as an ATen fallback."""


class LoweringRegistry:
    def __init__(self) -> None:
        self._by_op: dict[object, Lowering] = {}

    def register(self, *ops: object) -> Callable[[Lowering], Lowering]:
        def deco(fn: Lowering) -> Lowering:
            for op in ops:
                if op in self._by_op:
                    raise ValueError(f"duplicate lowering for {op}")
                self._by_op[op] = fn
            return fn

        return deco

    def lookup(self, target: object) -> Lowering | None:
        fn = self._by_op.get(target)
        if fn is None and isinstance(target, torch._ops.OpOverload):
            fn = self._by_op.get(target.overloadpacket)
            if fn is None:
                fn = self._by_op.get(target.overloadpacket._qualified_op_name)
        return fn

    def __contains__(self, target: object) -> bool:
        return self.lookup(target) is not None

    def ops(self) -> list[object]:
        return list(self._by_op)


LOWERINGS = LoweringRegistry()
register = LOWERINGS.register
