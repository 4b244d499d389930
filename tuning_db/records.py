"""PlanRecord: one fusion plan for one graph on one device and software stack, with its time.

A plan is only reusable where it was found: the same graph, device, torch and triton versions and
plan-file schema. `time_us` is a measurement unless `source` is "predicted" (a cost-model estimate).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Mapping

from .errors import DBError

SOURCES = ("tuned", "predicted", "imported")  # or "strategy:<name>"
_SOURCE_RE = re.compile(r"^(tuned|predicted|imported|strategy:[\w.+-]+)$")


@dataclass(frozen=True)
class PlanRecord:
    """A row of the plans table; `id` and `created` (UTC; a naive datetime is taken as UTC) are filled
    in by the database when left None."""

    graph_hash: str
    device: str
    torch_version: str
    triton_version: str
    plan_schema: int
    plan_json: str
    time_us: float | None = None
    baselines: Mapping[str, float] = field(default_factory=dict, hash=False)  # strategy -> time_us
    source: str = "imported"  # "tuned" | "predicted" | "strategy:<name>" | "imported"
    created: datetime | None = None
    id: int | None = None

    @property
    def measured(self) -> bool:
        """A real time, not a prediction: preferred over predicted plans by lookup."""
        return self.time_us is not None and self.source != "predicted"

    def preference(self) -> tuple:
        """Sort key, best first: what `TuningDB.lookup` picks among plans of one stack (see rows.preference_order)."""
        stamp = self.created.timestamp() if self.created is not None else 0.0
        return (not self.measured, self.time_us is None, self.time_us or 0.0, -stamp, -(self.id or 0))

    def check(self) -> None:
        """Refuse a record that would store something unusable."""
        for name in ("graph_hash", "device", "torch_version", "triton_version"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise DBError(f"PlanRecord.{name} must be a non-empty string, not {getattr(self, name)!r}")
        if not isinstance(self.plan_schema, int) or isinstance(self.plan_schema, bool):
            raise DBError(f"PlanRecord.plan_schema must be an int, not {self.plan_schema!r}")
        if not isinstance(self.plan_json, str):
            raise DBError(f"PlanRecord.plan_json must be a JSON string, not {type(self.plan_json).__name__}")
        if self.time_us is not None and not isinstance(self.time_us, (int, float)):
            raise DBError(f"PlanRecord.time_us must be a number or None, not {self.time_us!r}")
        if not _SOURCE_RE.match(self.source or ""):
            raise DBError(f"PlanRecord.source must be tuned, predicted, imported or strategy:<name>, not {self.source!r}")
