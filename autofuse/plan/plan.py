"""FusionPlan: a frozen, serializable value that fully determines the compiled program of a graph.

A plan names scheduler nodes by stable ids (the FX node a buffer was lowered from, plus its index
among that node's buffers), says which multi-use intermediates are realized or recomputed (by FX
node name), partitions the nodes into kernels, and gives each kernel its launch config. Applying
a plan re-checks legality (see apply.py); an illegal or stale plan is rejected with its reason.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ..codegen.config import LaunchConfig

SCHEMA_VERSION = 1


class PlanError(ValueError):
    """A plan that cannot be applied to this graph: illegal, stale or malformed. Says why."""


@dataclass(frozen=True)
class KernelPlan:
    nodes: tuple[str, ...]
    config: LaunchConfig | None = None  # None: the heuristics choose

    def to_json(self) -> dict[str, Any]:
        return {"nodes": list(self.nodes), "config": self.config.to_json() if self.config else None}

    @staticmethod
    def from_json(d: dict[str, Any]) -> "KernelPlan":
        if not isinstance(d, dict):
            raise PlanError(f"a kernel of a plan is a JSON object, not {d!r}")
        cfg = d.get("config")
        if cfg is not None and not isinstance(cfg, dict):
            raise PlanError(f"bad launch config {cfg!r}: not a JSON object")
        try:
            config = LaunchConfig(**cfg) if cfg else None
        except TypeError as e:
            raise PlanError(f"bad launch config {cfg!r}: {e}") from None
        if config is not None:
            why = config_type_error(config)
            if why:
                raise PlanError(f"bad launch config {cfg!r}: {why}")
        return KernelPlan(_names(d["nodes"], "a kernel's nodes"), config)


def config_type_error(cfg: LaunchConfig) -> str | None:
    """Which field of a config read from JSON has the wrong type (a plan is never coerced: "64" is not 64)."""
    for f in fields(LaunchConfig):
        v = getattr(cfg, f.name)
        want = bool if isinstance(f.default, bool) else int
        if want is int and (not isinstance(v, int) or isinstance(v, bool)):
            return f"{f.name} must be an integer, not {v!r}"
        if want is bool and not isinstance(v, bool):
            return f"{f.name} must be true or false, not {v!r}"
    return None


def _names(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(x, str) for x in value):
        raise PlanError(f"{what} must be a list of strings, not {value!r}")
    return tuple(value)


@dataclass(frozen=True)
class FusionPlan:
    graph_key: str
    kernels: tuple[KernelPlan, ...]
    realize: tuple[str, ...] = ()     # FX nodes whose multi-use values are realized
    recompute: tuple[str, ...] = ()   # FX nodes whose multi-use values are recomputed in each consumer
    strategy: str = "file"
    schema_version: int = SCHEMA_VERSION
    conv_layout: str | None = None    # convolutions' operand layout (Heuristics.conv_layout); None: no convolution
    notes: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def realize_decisions(self) -> dict[str, bool]:
        d = {n: True for n in self.realize}
        d.update({n: False for n in self.recompute})
        return d

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": self.schema_version, "graph_key": self.graph_key, "strategy": self.strategy,
                "realize": list(self.realize), "recompute": list(self.recompute),
                "kernels": [k.to_json() for k in self.kernels],
                **({"conv_layout": self.conv_layout} if self.conv_layout is not None else {})}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1, sort_keys=True)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.dumps())

    @staticmethod
    def from_json(d: dict[str, Any]) -> "FusionPlan":
        if not isinstance(d, dict):
            raise PlanError("a plan is a JSON object")
        version = d.get("schema_version")
        if version != SCHEMA_VERSION:
            raise PlanError(f"plan schema version {version!r} is not supported (this autofuse reads version {SCHEMA_VERSION})")
        try:
            if not isinstance(d["graph_key"], str):
                raise PlanError(f"graph_key must be a string, not {d['graph_key']!r}")
            if not isinstance(d["kernels"], list):
                raise PlanError(f"kernels must be a list, not {d['kernels']!r}")
            return FusionPlan(graph_key=d["graph_key"], kernels=tuple(KernelPlan.from_json(k) for k in d["kernels"]),
                              realize=_names(d.get("realize", []), "realize"),
                              recompute=_names(d.get("recompute", []), "recompute"),
                              strategy=str(d.get("strategy", "file")),
                              conv_layout=_conv_layout(d.get("conv_layout")))
        except KeyError as e:
            raise PlanError(f"plan is missing the field {e.args[0]!r}") from None

    @staticmethod
    def loads(text: str) -> "FusionPlan":
        try:
            return FusionPlan.from_json(json.loads(text))
        except json.JSONDecodeError as e:
            raise PlanError(f"plan is not valid JSON: {e}") from None

    @staticmethod
    def load(path: str | Path) -> "FusionPlan":
        p = Path(path)
        if not p.is_file():
            raise PlanError(f"{p}: no such plan file")
        return FusionPlan.loads(p.read_text())


def load_plans(source: "FusionPlan | dict | str | Path") -> dict[str, FusionPlan]:
    """Plans by graph key, from a plan, a dict of plans, or a file holding one plan or {"plans": [...]}."""
    if isinstance(source, FusionPlan):
        return {source.graph_key: source}
    if isinstance(source, dict) and all(isinstance(v, FusionPlan) for v in source.values()):
        return dict(source)
    p = Path(source)
    if not p.is_file():
        raise PlanError(f"{p}: no such plan file")
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise PlanError(f"{p}: not valid JSON: {e}") from None
    items = data["plans"] if isinstance(data, dict) and "plans" in data else [data]
    plans = [FusionPlan.from_json(d) for d in items]
    return {pl.graph_key: pl for pl in plans}


def save_plans(plans: "list[FusionPlan]", path: str | Path) -> None:
    Path(path).write_text(json.dumps({"plans": [pl.to_json() for pl in plans]}, indent=1, sort_keys=True))


CONV_LAYOUTS = ("channels_last", "as_given")


def _conv_layout(value: Any) -> str | None:
    if value is None or value in CONV_LAYOUTS:
        return value
    raise PlanError(f"conv_layout {value!r} is not one of {', '.join(CONV_LAYOUTS)}")
