"""Lowering: functional ATen FX graph -> IR (buffers, lazy pointwise bodies, reductions, fallbacks)."""
from . import bucketize, convolution, creation, flex_attention, indexing, matmul, mutation, pointwise, pooling, random, reductions, scans, scatter, sort, views  # noqa: F401  (register lowerings)
from .graph import GraphLowering, LoweringError
from .registry import LOWERINGS, Unsupported

__all__ = ["GraphLowering", "LoweringError", "LOWERINGS", "Unsupported"]
