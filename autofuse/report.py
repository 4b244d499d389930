"""Report: what got compiled — kernels, the ATen ops fused into each, and rejected fusions."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .compiler import KernelInfo


@dataclass
class Report:
    strategy: str
    kernels: list[KernelInfo]
    graphs: int
    rejected: list[tuple[str, str, str]] = field(default_factory=list)

    @staticmethod
    def from_recorder(recorder: Any, options: Any) -> "Report":
        kernels: list[KernelInfo] = []
        rejected: list[tuple[str, str, str]] = []
        for _, _, art in recorder.graphs:
            kernels.extend(art.kernels)
            rejected.extend(art.fusion_log.rejected)
        return Report(options.strategy, kernels, len(recorder.graphs), rejected)

    @property
    def bytes_moved(self) -> int:
        return sum(k.bytes_read + k.bytes_written for k in self.kernels)

    def __str__(self) -> str:
        lines = [f"autofuse explain — strategy {self.strategy}: {self.graphs} graph(s), {len(self.kernels)} kernel(s)"]
        for k in self.kernels:
            lines.append(f"  {k.name}  [{k.kind}]")
            lines.append(f"    aten ops: {', '.join(k.aten_ops) or '-'}")
            if k.kind != "fallback":
                lines.append(f"    iteration: numel={k.numel} rnumel={k.rnumel}   config: {k.config}")
                lines.append(f"    reads {', '.join(k.reads) or '-'} ({k.bytes_read} B); "
                             f"writes {', '.join(k.writes) or '-'} ({k.bytes_written} B)")
            else:
                lines.append(f"    reads {', '.join(k.reads) or '-'}; writes {', '.join(k.writes) or '-'}")
        if self.rejected:
            lines.append(f"  rejected fusions ({len(self.rejected)}):")
            seen = set()
            for a, b, why in self.rejected:
                if (a, b, why) in seen:
                    continue
                seen.add((a, b, why))
                lines.append(f"    {a} + {b}: {why}")
        lines.append(f"  bytes moved: {self.bytes_moved} B")
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps({
            "strategy": self.strategy,
            "graphs": self.graphs,
            "kernels": [{"name": k.name, "kind": k.kind, "aten_ops": list(k.aten_ops), "numel": k.numel,
                         "rnumel": k.rnumel, "config": k.config.to_json() if k.config else None,
                         "reads": list(k.reads), "writes": list(k.writes), "bytes_read": k.bytes_read,
                         "bytes_written": k.bytes_written} for k in self.kernels],
            "rejected": [{"a": a, "b": b, "reason": r} for a, b, r in self.rejected],
            "bytes_moved": self.bytes_moved,
        }, indent=2)
