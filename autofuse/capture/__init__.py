"""Capture: Dynamo + AOTAutograd into functional ATen graphs, and model files."""
from .backend import CompiledGraph, autofuse_backend, make_backend, register

__all__ = ["CompiledGraph", "autofuse_backend", "make_backend", "register"]
