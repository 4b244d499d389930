"""Report: what got compiled — kernels, the ATen ops fused into each, rejected fusions, bytes moved
against running every ATen op on its own, the plans, and the graph with its groups as Graphviz dot."""
from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.fx

from .compiler import KernelInfo

# ops that move no data in eager mode (they return views)
VIEW_OPS = {"view", "_unsafe_view", "reshape", "permute", "t", "transpose", "expand", "squeeze", "unsqueeze",
            "slice", "select", "as_strided", "alias", "detach", "unfold", "diagonal", "split", "unbind", "getitem"}


def nbytes(v: Any) -> int:
    """Bytes of a tensor, or of every tensor in a (nested) list or tuple."""
    if isinstance(v, torch.Tensor):
        return v.numel() * v.element_size()
    if isinstance(v, (list, tuple)):
        return sum(nbytes(x) for x in v)
    return 0


def unfused_bytes(gm: torch.fx.GraphModule) -> int:
    """Bytes moved if every ATen op ran as its own kernel: each distinct input read once, outputs written."""
    total = 0
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        name = getattr(getattr(n.target, "overloadpacket", None), "__name__", getattr(n.target, "__name__", ""))
        if name in VIEW_OPS:
            continue
        inputs = {a for a in n.all_input_nodes}
        total += sum(nbytes(a.meta.get("val")) for a in inputs) + nbytes(n.meta.get("val"))
    return total


@dataclass
class Report:
    strategy: str
    kernels: list[KernelInfo]
    graphs: int
    rejected: list[tuple[str, str, str]] = field(default_factory=list)
    plans: list[Any] = field(default_factory=list)
    unfused_bytes: int = 0
    artifacts: list[Any] = field(default_factory=list, repr=False)
    outcomes: list[Any] = field(default_factory=list)  # GraphOutcome of every graph, compiled or eager

    @staticmethod
    def from_recorder(recorder: Any, options: Any) -> "Report":
        kernels: list[KernelInfo] = []
        rejected: list[tuple[str, str, str]] = []
        plans, arts, eager = [], [], 0
        for _, gm, art in recorder.graphs:
            kernels.extend(art.kernels)
            rejected.extend(art.fusion_log.rejected)
            plans.append(art.plan)
            arts.append(art)
            eager += unfused_bytes(gm)
        names = []
        for art in arts:
            name = art.plan.strategy if art.plan is not None else options.strategy
            names.append({"tuning DB": f"{name} (from the tuning DB)", "autotuned": f"{name} (autotuned)",
                          "plan": "plan"}.get(art.source, name))
        strategy = ", ".join(dict.fromkeys(names)) or options.strategy
        outcomes = list(getattr(recorder, "outcomes", []))
        return Report(strategy, kernels, max(len(outcomes), len(recorder.graphs)), rejected, plans, eager, arts,
                      outcomes)

    @property
    def eager_graphs(self) -> list[Any]:
        """The graphs that run eagerly with ATen ops (each a compiler bug), with the reason."""
        return [o for o in self.outcomes if not o.compiled]

    @property
    def bytes_moved(self) -> int:
        return sum(k.bytes_read + k.bytes_written for k in self.kernels)

    @property
    def wrapper_sources(self) -> list[str]:
        """The generated wrapper of each compiled graph (runtime/wrapper.py), "" for one run interpreted."""
        return [getattr(a.program, "source", "") for a in self.artifacts]

    def __str__(self) -> str:
        lines = [f"autofuse explain — strategy {self.strategy}: {self.graphs} graph(s), {len(self.kernels)} kernel(s)"]
        for i, o in enumerate(self.outcomes):
            lines.append(f"  graph {i} ({o.label}): " + (f"compiled, {o.kernels} kernel(s)" if o.compiled
                                                          else f"EAGER (not compiled): {o.reason}"))
        for k in self.kernels:
            lines.append(f"  {k.name}  [{k.kind}]")
            lines.append(f"    aten ops: {', '.join(k.aten_ops) or '-'}")
            if k.kind != "fallback":
                walk = (f"   {k.programs} programs of {k.numel // k.programs} rows, summing columns too"
                        if k.programs else "")
                lines.append(f"    iteration: numel={k.numel} rnumel={k.rnumel}   config: {k.config}{walk}")
                lines.append(f"    reads {', '.join(k.reads) or '-'} ({_mib(k.bytes_read)}); "
                             f"writes {', '.join(k.writes) or '-'} ({_mib(k.bytes_written)})")
            else:
                if k.fn_name:
                    lines.append(f"    runs generated kernel {k.fn_name}")
                lines.append(f"    reads {', '.join(k.reads) or '-'}; writes {', '.join(k.writes) or '-'}")
        if self.rejected:
            lines.append(f"  rejected fusions ({len(set(self.rejected))}):")
            for a, b, why in dict.fromkeys(self.rejected):
                lines.append(f"    {a} + {b}: {why}")
        lines.append(f"  bytes moved: {_mib(self.bytes_moved)} (every ATen op as its own kernel: "
                     f"{_mib(self.unfused_bytes)})")
        return "\n".join(lines)

    def _graph_indices(self) -> tuple[list[int | None], list[int | None]]:
        """Index into `outcomes` of each compiled graph's artifacts, and of each kernel's graph (None
        when the report was built without outcomes)."""
        compiled: list[int | None] = [i for i, o in enumerate(self.outcomes) if o.compiled]
        if len(compiled) != len(self.artifacts):
            compiled = [None] * len(self.artifacts)
        per_kernel = [gi for gi, art in zip(compiled, self.artifacts) for _ in art.kernels]
        return compiled, per_kernel if len(per_kernel) == len(self.kernels) else [None] * len(self.kernels)

    def to_json(self) -> str:
        """Everything the text report shows, plus each kernel's generated Triton source, and each
        compiled graph's generated wrapper ("" for a graph that runs interpreted, null when eager) and
        where its compile time went (`CompiledArtifacts.seconds`)."""
        compiled, kernel_graph = self._graph_indices()
        wrapper = {gi: src for gi, src in zip(compiled, self.wrapper_sources) if gi is not None}
        seconds = {gi: art.seconds for gi, art in zip(compiled, self.artifacts) if gi is not None}
        return json.dumps({
            "strategy": self.strategy,
            "graphs": self.graphs,
            "graph_outcomes": [{"label": o.label, "compiled": o.compiled, "kernels": o.kernels, "reason": o.reason,
                                "wrapper_source": wrapper.get(i), "compile_seconds": seconds.get(i)}
                               for i, o in enumerate(self.outcomes)],
            "kernels": [{"name": k.name, "fn_name": k.fn_name, "graph": gi, "kind": k.kind, "aten_ops": list(k.aten_ops),
                         "nodes": list(k.nodes), "numel": k.numel, "rnumel": k.rnumel, "programs": k.programs,
                         "config": k.config.to_json() if k.config else None,
                         "reads": list(k.reads), "writes": list(k.writes), "bytes_read": k.bytes_read,
                         "bytes_written": k.bytes_written, "source": k.source}
                        for k, gi in zip(self.kernels, kernel_graph)],
            "rejected": [{"a": a, "b": b, "reason": r} for a, b, r in dict.fromkeys(self.rejected)],
            "bytes_moved": self.bytes_moved,
            "unfused_bytes": self.unfused_bytes,
            "plans": [p.to_json() for p in self.plans if p is not None],
        }, indent=2)

    def to_dot(self) -> str:
        """The scheduler graph of every compiled graph, one cluster per kernel."""
        out = ["digraph autofuse {", "  rankdir=TB; node [shape=box, fontsize=10];"]
        for gi, art in enumerate(self.artifacts):
            graph = art.graph
            producer = graph.producer if graph is not None else {}
            for ki, (k, group) in enumerate(zip(art.kernels, art.groups)):
                out.append(f'  subgraph "cluster_{gi}_{ki}" {{ label="{k.name}"; style=rounded;')
                for n in group.nodes:
                    label = f"{n.name}\\n{', '.join(sorted(n.origins))}\\n{n.kind} {list(n.sizes)}"
                    out.append(f'    "{gi}:{n.name}" [label="{label}"];')
                out.append("  }")
            inputs = set()
            for group in art.groups:
                for n in group.nodes:
                    for r in sorted(n.read_names):
                        src = producer.get(r)
                        if src is None:
                            inputs.add(r)
                            out.append(f'  "{gi}:{r}" -> "{gi}:{n.name}";')
                        else:
                            out.append(f'  "{gi}:{src.name}" -> "{gi}:{n.name}" [label="{r}"];')
            for r in sorted(inputs):
                out.append(f'  "{gi}:{r}" [shape=ellipse, label="{r}"];')
        out.append("}")
        return "\n".join(out)

    def render(self, path: str | Path) -> Path:
        """Render the dot graph to .svg or .png with Graphviz's `dot`."""
        path = Path(path)
        fmt = path.suffix.lstrip(".") or "svg"
        exe = shutil.which("dot")
        if exe is None:
            raise RuntimeError("Graphviz is not installed (no `dot` on PATH); use --format dot to get the source")
        subprocess.run([exe, f"-T{fmt}", "-o", str(path)], input=self.to_dot(), text=True, check=True)
        return path


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB" if n >= 2**16 else f"{n} B"
