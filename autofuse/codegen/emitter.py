"""The line emitter under KernelWriter: Triton values, nested scopes, and CSE per scope.

Note: every expression a kernel computes becomes one `tmpN = ...` line, emitted once per scope:
an expression already computed in this scope or an enclosing one (the kernel's top, an r loop, a
split's last-program block) is reused by name. A scope also remembers the values of the nodes
evaluated in it, so a node read twice is computed once where both reads can see it.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class TV:
    """A Triton value: variable name and its torch dtype."""

    name: str
    dtype: torch.dtype

    def __str__(self) -> str:
        return self.name


class Scope:
    """One indentation level of the kernel's body: its CSE cache and its nodes' values."""

    def __init__(self, parent: "Scope | None", indent: int) -> None:
        self.parent = parent
        self.cache: dict[str, TV] = {}
        self.node_values: dict[str, TV] = {}
        self.indent = indent

    def lookup(self, key: str) -> TV | None:
        return self._find("cache", key)

    def node_value(self, name: str) -> TV | None:
        return self._find("node_values", name)

    def _find(self, table: str, key: str) -> TV | None:
        """`key` in this scope's table or the nearest enclosing scope's that has it."""
        s: Scope | None = self
        while s is not None:
            found = getattr(s, table).get(key)
            if found is not None:
                return found
            s = s.parent
        return None


class Emitter:
    """The kernel body's lines, the current scope and the counter of temporaries (a base of
    KernelWriter: every part of the writer emits through it)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.scope = Scope(None, 1)
        self.counter = 0

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.scope.indent + line)

    def cse(self, expr: str, dtype: torch.dtype) -> TV:
        key = f"{expr}::{dtype}"
        hit = self.scope.lookup(key)
        if hit is not None:
            return hit
        name = f"tmp{self.counter}"
        self.counter += 1
        self.emit(f"{name} = {expr}")
        tv = TV(name, dtype)
        self.scope.cache[key] = tv
        return tv

    def fresh(self, dtype: torch.dtype) -> TV:
        """A new temporary's name, for a line that assigns several at once (a tuple's halves)."""
        tv = TV(f"tmp{self.counter}", dtype)
        self.counter += 1
        return tv

    def push_scope(self) -> None:
        self.scope = Scope(self.scope, self.scope.indent + 1)

    def pop_scope(self) -> None:
        assert self.scope.parent is not None
        self.scope = self.scope.parent
