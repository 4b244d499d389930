"""The user's surface: compile(model) and explain(model, inputs)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from .options import CompileOptions


def _options(options: CompileOptions | None, kw: dict) -> CompileOptions:
    options = options or CompileOptions()
    return options.with_(**kw) if kw else options


def compile(model: Callable[..., Any], *, options: CompileOptions | None = None, **kw: Any) -> Callable[..., Any]:
    """Compile an nn.Module or function with autofuse (like torch.compile(model, backend="autofuse")).

    Keyword arguments override fields of CompileOptions (strategy=, poison=, strict=, verbose=).
    """
    from .capture.backend import make_backend
    opts = _options(options, kw)
    return torch.compile(model, backend=make_backend(opts), dynamic=False)


@dataclass
class Recorder:
    """Collects the compiled artifacts of every graph a compile produces."""

    graphs: list[tuple[str, Any, Any]] = field(default_factory=list)

    def record(self, label: str, gm: Any, artifacts: Any) -> None:
        self.graphs.append((label, gm, artifacts))


def explain(model: Callable[..., Any], example_inputs: Sequence[Any], *, options: CompileOptions | None = None,
            **kw: Any) -> "Report":
    """Compile model for example_inputs and report its kernels (running it once, without gradients)."""
    from .report import Report
    recorder = Recorder()
    opts = _options(options, kw).with_(recorder=recorder)
    torch._dynamo.reset()
    fn = compile(model, options=opts)
    with torch.no_grad():
        fn(*example_inputs)
    torch._dynamo.reset()
    return Report.from_recorder(recorder, opts)
