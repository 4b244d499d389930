"""A torch.compile wrapper whose Dynamo cache entries are its own.

Note: explain and tune must see every graph of a model each time they are called, but Dynamo keeps
compiled code per code object, and `torch._dynamo.reset()` would drop the user's other compiled
functions too. `isolate_recompiles=True` gives one compile call its own cache region: it compiles
afresh, does not count against the recompile limit of other regions, and leaves them alone. On a
torch without that option, the model is called through a function with a new code object, so the
outermost frame starts with an empty cache, and the frames after a graph break may recompile up to
Dynamo's accumulated limit while the call runs.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

import torch


def supports_isolation() -> bool:
    """Whether this torch's torch.compile takes isolate_recompiles."""
    return "isolate_recompiles" in inspect.signature(torch.compile).parameters


def compile_fresh(model: Callable[..., Any], backend: Any, *, isolate: bool | None = None,
                  **kw: Any) -> Callable[..., Any]:
    """torch.compile(model, backend=backend, **kw), traced afresh and without touching other
    compiled functions' caches (isolate=None: use Dynamo's isolation when this torch has it)."""
    if isolate is None:
        isolate = supports_isolation()
    if isolate:
        return torch.compile(model, backend=backend, isolate_recompiles=True, **kw)

    def call(*args: Any, **kwargs: Any) -> Any:
        return model(*args, **kwargs)

    call.__code__ = call.__code__.replace()  # a new code object: its cache line starts empty
    compiled = torch.compile(call, backend=backend, **kw)
    config = torch._dynamo.config
    # the frames after a graph break keep their code objects: while this call runs, their earlier
    # entries (other backends) must not count against the per-frame recompile limit
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    scoped = {name: getattr(config, "accumulated_" + name)} if hasattr(config, "accumulated_" + name) else {}

    traced: list[bool] = []  # after the first call, calls go straight to the compiled code (it is timed)

    def run(*args: Any, **kwargs: Any) -> Any:
        if traced:
            return compiled(*args, **kwargs)
        with config.patch(**scoped):
            out = compiled(*args, **kwargs)
        traced.append(True)
        return out

    return run
