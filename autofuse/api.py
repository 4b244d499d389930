"""The user's surface: compile(model) and explain(model, inputs)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from .options import CompileOptions


def _options(options: CompileOptions | None, kw: dict) -> CompileOptions:
    """Explicit keyword overrides; asking for a strategy or a plan means: do not take one from the DB."""
    kw = {k: v for k, v in kw.items() if not (k in ("strategy", "plan", "db") and v is None)}
    if ("strategy" in kw or "plan" in kw) and "use_db" not in kw:
        kw["use_db"] = False
    options = options or CompileOptions()
    return options.with_(**kw) if kw else options


def _positional(example_inputs: Sequence[Any]) -> Sequence[Any]:
    """example_inputs, checked to be a sequence of inputs: a lone tensor would be iterated over its
    first dim, each row passed as an argument of its own (a confusing error deep in the model)."""
    if isinstance(example_inputs, torch.Tensor):
        raise TypeError("example_inputs is the sequence of the model's positional inputs: "
                        "pass a single tensor x as (x,)")
    return example_inputs


def compile(model: Callable[..., Any], *, options: CompileOptions | None = None, dynamic: bool | None = False,
            **kw: Any) -> Callable[..., Any]:
    """Compile an nn.Module or function with autofuse (like torch.compile(model, backend="autofuse")).

    Keyword arguments override fields of CompileOptions (strategy=, plan=, db=, on_miss=, poison=,
    strict=, verbose=). Graphs are looked up in the tuning DB unless a strategy or plan is given.
    `dynamic` is torch.compile's: False (the default) traces every new size as a static graph, the
    graphs `autofuse tune` stores plans for; None lets Dynamo make a size that changed symbolic (a
    growing key/value cache then compiles once: docs/design.md, "Sizes").
    """
    from .capture.backend import make_backend
    opts = _options(options, kw)
    return torch.compile(model, backend=make_backend(opts), dynamic=dynamic)


@dataclass(frozen=True)
class GraphOutcome:
    """How one captured graph runs: compiled by autofuse, or eagerly with ATen ops and why."""

    label: str               # "forward", "backward", "inference" or "traced"
    compiled: bool
    kernels: int = 0
    reason: str = ""         # the compiler's exception text when the graph runs eagerly


@dataclass
class Recorder:
    """Collects the compiled artifacts of every graph a compile produces, and every graph's outcome
    (compiled or eager, with the reason) in capture order."""

    graphs: list[tuple[str, Any, Any]] = field(default_factory=list)
    outcomes: list[GraphOutcome] = field(default_factory=list)

    def record(self, label: str, gm: Any, artifacts: Any) -> None:
        self.graphs.append((label, gm, artifacts))
        self.outcomes.append(GraphOutcome(label, True, len(artifacts.kernels)))

    def record_eager(self, label: str, gm: Any, reason: str) -> None:
        self.outcomes.append(GraphOutcome(label, False, 0, reason))


def explain(model: Callable[..., Any], example_inputs: Sequence[Any] = (), *, options: CompileOptions | None = None,
            example_kwargs: dict[str, Any] | None = None, **kw: Any) -> "Report":
    """Compile model for example_inputs (and keyword inputs) and report every graph — compiled or
    run eagerly, and why — and its kernels (running it once, without gradients)."""
    from .capture.backend import make_backend
    from .capture.fresh import compile_fresh
    from .report import Report
    recorder = Recorder()
    opts = _options(options, kw).with_(recorder=recorder)
    fn = compile_fresh(model, make_backend(opts), dynamic=False)  # traced afresh; other compiled code kept
    with torch.no_grad():
        fn(*_positional(example_inputs), **(example_kwargs or {}))
    return Report.from_recorder(recorder, opts)


def tune(model: Callable[..., Any], example_inputs: Sequence[Any], **kw: Any) -> Any:
    """Search and store plans for every graph of model(*example_inputs) (see `autofuse.search.tune`).

    Keywords: trials=, time_budget= (seconds), db=, seed=, resume=, settings= (autofuse.TuneSettings),
    benchmarker= (injected timer; default CUDA events on the GPU, predictions on the CPU).
    Returns a TuneResult; `.report()` is the closing table.
    """
    from .search.tune import tune as _tune
    return _tune(model, _positional(example_inputs), **kw)
