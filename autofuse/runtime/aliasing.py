"""Which buffers an ATen fallback may leave shared with another live tensor, decided from op schemas.

Note: a freed buffer's storage may be taken over by a later allocation only if nothing else still
points at it. An ATen fallback whose schema marks a return as an alias of an argument (a view op,
`Tensor(a)`) or an argument as written (an in-place op, `Tensor(a!)`, which returns that argument)
may hand back the argument's storage under another slot; an op without a schema (a Python callable,
a higher-order op) may do anything. The buffers such ops read are never donated, so the reuse plan
is static and no call scans the live tensors.
"""
from __future__ import annotations

from typing import Any, Iterable

from torch.utils._pytree import tree_leaves

# ops that return a view of an argument without saying so in their schema
UNANNOTATED_VIEWS = frozenset({"aten::_unsafe_view"})


def may_alias(op: Any) -> bool:
    """Can op's result share storage with (or be) one of its tensor arguments?"""
    schema = getattr(op, "_schema", None)
    if schema is None or schema.name in UNANNOTATED_VIEWS:
        return True
    if any(r.alias_info is not None for r in schema.returns):
        return True
    return any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


def aliased_slots(steps: Iterable[Any]) -> set[int]:
    """Slots read by a fallback step (an `ExternCall`) whose op may alias its arguments."""
    from .steps import ExternCall, StridedArg
    out: set[int] = set()
    for step in steps:
        if isinstance(step, ExternCall) and may_alias(step.op):
            leaves = tree_leaves((step.args, step.kwargs), is_leaf=lambda x: isinstance(x, StridedArg))
            out.update(a.slot for a in leaves if isinstance(a, StridedArg))
    return out
