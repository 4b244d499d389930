"""`autofuse.tune(model, example_inputs)`: capture every graph, search each, store the winners.

Note: graphs are captured first (one run of the model through the backend, nothing tuned), so
the time budget can be split over them; then each distinct graph is tuned, and finally the model
is timed end to end — eager, torch.compile, autofuse's default strategies, and autofuse.compile
reading the plans just stored — so the closing table shows what a user of the tuned plans gets.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import torch
from tuning_db import DBError

from ..capture.training import training_loss
from ..capture.fresh import compile_fresh
from ..measure.timing import Benchmarker, Timing, copy_bandwidth
from ..measure.verify import compare
from .interrupts import stop_requested
from .graph_tuner import GraphResult, GraphTuner, Row, TuneSettings
from .table import error_line, table


@dataclass
class TuneResult:
    graphs: list[GraphResult]
    model_rows: list[Row] = field(default_factory=list)
    copy_bw: float | None = None
    measured: bool = True
    interrupted: bool = False
    db_url: str = ""
    errors: list[str] = field(default_factory=list)   # graphs whose tune failed: "label: reason"

    def to_json(self) -> dict[str, Any]:
        def row(r: Row) -> dict[str, Any]:
            return {"variant": r.variant, "us": r.us, "kernels": r.kernels, "measured": r.measured, "note": r.note}
        return {"copy_bw": self.copy_bw, "measured": self.measured, "interrupted": self.interrupted, "db": self.db_url,
                "graphs": [{"label": g.label, "graph_hash": g.graph_hash, "device": g.device, "source": g.source,
                            "why": g.why, "min_bytes": g.min_bytes, "trials": g.trials,
                            "new_measurements": g.new_measurements, "reused_measurements": g.reused_measurements,
                            "reused_choices": g.reused_choices, "search_s": g.search_s,
                            "tuning_seconds": g.tuning_seconds, "failures": g.failures[:50],
                            "plan": g.plan.to_json(), "rows": [row(r) for r in g.rows]} for g in self.graphs],
                "model": [row(r) for r in self.model_rows], "errors": self.errors}

    def report(self) -> str:
        out = []
        if not self.measured:
            out.append("autofuse tune: no GPU — nothing was measured. Kernels ran in Triton's interpreter for "
                       "correctness; plans were ranked by the cost model's predictions (byte-count estimate when "
                       "no model is trained) and stored as *predicted*, for this device only.")
        for g in self.graphs:
            title = (f"graph {g.label} {g.graph_hash[:12]} on {g.device}: {g.trials} trials, "
                     f"{g.new_measurements} kernel variants measured, {g.reused_measurements} reused from the DB, "
                     f"{g.reused_choices} kernels tuned once for identical ones, "
                     f"{g.min_bytes / 2**20:.1f} MiB minimum — {g.why}")
            out.append(table(title, g.rows, g.min_bytes, self.copy_bw))
            if self.measured and g.new_measurements and g.search_s > 0:
                out.append(throughput(g.new_measurements, g.search_s, g.tuning_seconds))
            if g.failures:
                out.append(f"  {len(g.failures)} failures (scored infinity), first: " +
                           "; ".join(f"{w}: {e}" for w, e in g.failures[:3]))
        if self.model_rows:
            total = sum(g.min_bytes for g in self.graphs)
            out.append(table("whole model", self.model_rows, total, self.copy_bw))
        for e in self.errors:
            out.append(f"failed: {e} (its measurements are kept; --resume continues)")
        if self.interrupted:
            out.append("interrupted: what was measured is kept; the best plans verified so far were stored.")
        out.append(f"tuning DB: {self.db_url}")
        return "\n\n".join(out)


def throughput(variants: int, search_s: float, seconds: dict[str, float]) -> str:
    """One line: variants measured per second of search, and where the kernel tuning's time went."""
    named = {"compile_and_check": "compile and check", "timing": "timing", "codegen": "code generation",
             "ranking": "cost-model ranking", "store": "DB writes"}
    parts = [f"{label} {seconds.get(k, 0.0):.1f} s" for k, label in named.items()]
    rest = seconds.get("kernels", 0.0) - sum(seconds.get(k, 0.0) for k in named)
    parts.append(f"other {max(rest, 0.0):.1f} s")
    return (f"  {variants} kernel variants measured in {search_s:.1f} s of search ({variants / search_s:.1f} per s); "
            f"kernel tuning {seconds.get('kernels', 0.0):.1f} s: " + ", ".join(parts))


def capture(model: Callable[..., Any], example_inputs: Sequence[Any], train: bool = False,
            example_kwargs: dict[str, Any] | None = None) -> list[tuple[str, torch.fx.GraphModule, list]]:
    """The ATen graphs (and their real inputs) of one inference call of the model, or with `train`
    of one training step: its forward and backward graphs (`training_loss`). The model's mode and
    its parameters' gradients are left as they were."""
    from ..capture.backend import make_backend
    from ..options import CompileOptions
    graphs: list[tuple[str, torch.fx.GraphModule, list]] = []
    kwargs = example_kwargs or {}

    def collect(gm: torch.fx.GraphModule, args: Sequence[Any], label: str) -> None:
        graphs.append((label, gm, list(args)))
        return None

    fn = compile_fresh(model, make_backend(CompileOptions(use_db=False, tuner=collect)), dynamic=False)
    if not train:
        with torch.no_grad():
            fn(*example_inputs, **kwargs)
        return graphs
    module = model if isinstance(model, torch.nn.Module) else None
    was_training = module.training if module is not None else False
    grads = {p: p.grad for p in module.parameters()} if module is not None else {}
    try:
        if module is not None:
            module.train()
        with torch.enable_grad():
            training_loss(fn(*example_inputs, **kwargs)).backward()
    finally:
        if module is not None:
            module.train(was_training)
        for p, g in grads.items():
            p.grad = g
    return graphs


def tune(model: Callable[..., Any], example_inputs: Sequence[Any], *, settings: TuneSettings | None = None,
         benchmarker: Benchmarker | None = None, train: bool = False, example_kwargs: dict[str, Any] | None = None,
         **overrides: Any) -> TuneResult:
    """Search, verify and store a plan for every graph of model(*example_inputs, **example_kwargs):
    its inference graphs, or with `train` the forward and backward graphs of a training step.

    Keyword overrides set fields of TuneSettings (trials=, time_budget=, db=, seed=, resume=, ...).
    """
    from ..runtime.reuse import open_db
    settings = replace(settings or TuneSettings(), **overrides)
    db = open_db(settings.db)
    kwargs = example_kwargs or {}
    on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in (*example_inputs, *kwargs.values()))
    copy_bw = copy_bandwidth() if on_gpu and benchmarker is None else None
    start = time.monotonic()
    graphs = capture(model, example_inputs, train, kwargs)
    from ..plan.graph_hash import graph_hash
    distinct: dict[str, tuple[str, Any, list]] = {}
    for label, gm, args in graphs:
        distinct.setdefault(graph_hash(gm, args), (label, gm, args))
    tuner = GraphTuner(db, settings, benchmarker, copy_bw)
    results: list[GraphResult] = []
    errors: list[str] = []
    interrupted = False
    for i, (label, gm, args) in enumerate(distinct.values()):
        if stop_requested():
            interrupted = True
            break
        deadline = None
        if settings.time_budget is not None:
            left = settings.time_budget - (time.monotonic() - start)
            deadline = time.monotonic() + max(1.0, left / (len(distinct) - i))
        try:
            res = tuner.run(gm, args, f"{label} {i + 1}/{len(distinct)}", deadline)
        except KeyboardInterrupt:
            interrupted = True
            break
        except DBError:
            raise  # the DB cannot take the results: no other graph can be tuned into it either
        except Exception as e:  # noqa: BLE001 - one graph's failure keeps the other graphs' plans
            errors.append(f"graph {label} {i + 1}/{len(distinct)}: {error_line(e, 200)}")
            continue
        results.append(res)
        if res.interrupted:
            interrupted = True
            break
    measured = all(r.source == "tuned" for r in results)
    out = TuneResult(results, copy_bw=copy_bw, measured=measured, interrupted=interrupted, db_url=db.url, errors=errors)
    if on_gpu and benchmarker is None and settings.compare_torch_compile and not interrupted and not train:
        out.model_rows = model_rows(model, example_inputs, settings, kwargs)
    return out


def model_rows(model: Callable[..., Any], inputs: Sequence[Any], settings: TuneSettings,
               kwargs: dict[str, Any]) -> list[Row]:
    """The whole model end to end: eager, torch.compile, autofuse strategies, autofuse with the stored plans."""
    from ..capture.backend import make_backend
    from ..measure.timing import CudaEventBenchmarker
    from ..options import CompileOptions
    bench = CudaEventBenchmarker()
    with torch.no_grad():
        expected = model(*inputs, **kwargs)
    rows: list[Row] = []
    builders = {
        "eager": lambda: model,
        "torch.compile": lambda: compile_fresh(model, "inductor"),
        "autofuse inductor": lambda: compile_fresh(model, make_backend(CompileOptions(strategy="inductor", use_db=False)),
                                                   dynamic=False),
        "autofuse tvm": lambda: compile_fresh(model, make_backend(CompileOptions(strategy="tvm", use_db=False)),
                                              dynamic=False),
        "autofuse tuned": lambda: compile_fresh(model, make_backend(CompileOptions(db=settings.db, on_miss="error")),
                                                dynamic=False),
    }
    for name, build in builders.items():
        try:
            fn = build()
            with torch.no_grad():
                why = compare(fn(*inputs, **kwargs), expected)
                if why:
                    rows.append(Row(name, None, note=f"wrong: {why}"))
                    continue
                t: Timing = bench.time(lambda: fn(*inputs, **kwargs), {"kind": "plan", "kernels": []})
            rows.append(Row(name, t.median_us))
        except Exception as e:  # noqa: BLE001 - a failing variant is reported, the table goes on
            rows.append(Row(name, None, note=f"failed: {error_line(e)}"))
    return rows
