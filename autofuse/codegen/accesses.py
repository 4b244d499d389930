"""The loads and stores a kernel issues, in program order.

Note: each record names a buffer and its offsets as printed in kernel terms (xindex, rindex, after
simplification), so two records with equal offsets touch the same element at the same (x, r) of
the same program. A load served from the common-subexpression cache issues nothing and is not
recorded. Why: whether a kernel may store an output over an operand it reads (schedule/in_place.py)
depends on where the passes of a looped reduction, the recomputed producers and the hoisted loads
put each load relative to the store, which only the emitted kernel knows.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Access:
    buffer: str
    store: bool
    offsets: str
