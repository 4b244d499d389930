"""CompileOptions: every knob of a compile, as one explicit frozen value."""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from .schedule.heuristics import Heuristics

STRATEGIES = ("inductor", "tvm", "none")
# torch.compile's modes as autofuse options: "reduce-overhead" replays CUDA graphs; "max-autotune"
# searches each graph the tuning DB lacks at its first compile (minutes, as Inductor's does) and
# stores the winner, so the next compile of it measures nothing
MODES: dict[str, dict[str, Any]] = {
    "default": {},
    "reduce-overhead": {"cudagraphs": True},
    "max-autotune": {"on_miss": "tune", "cudagraphs": True},
    "max-autotune-no-cudagraphs": {"on_miss": "tune"},
}


@dataclass(frozen=True)
class CompileOptions:
    strategy: str = "inductor"
    plan: Any = None              # a FusionPlan, {graph key: FusionPlan}, or a plan file: overrides the strategy
    use_db: bool = True           # look each graph up in the tuning DB and build from its stored plan
    db: str | None = None         # tuning DB path or SQLAlchemy URL (default: $AUTOFUSE_DB, else the user cache)
    on_miss: str = "default"      # no stored plan: "default" (the strategy), "error", or "tune"
    heuristics: Heuristics = field(default_factory=Heuristics)
    poison: bool = False          # fill fresh buffers with NaN/garbage: unwritten elements show up in tests
    strict: bool = False          # raise compiler errors instead of running the graph eagerly
    verbose: bool = False
    cudagraphs: bool = False      # replay each graph's program as a CUDA graph (inference on the GPU; outputs reused)
    autotune: bool = True         # no stored plan, on the GPU: measure a few configs of each reduction kernel at
                                  # its first compile, as Inductor does (search/autotune.py); False: size rules only
    fallback_random: bool = False  # dropout and rand as ATen ops, drawing eager's numbers; False: drawn inside
                                   # the generated kernels (capture/random_ops.py), as Inductor draws them
    max_sizes: int = 8            # input signatures (sizes, strides) one graph is compiled for; later ones run
                                  # with ATen ops, as Dynamo stops recompiling a frame at its recompile limit (8)
    recorder: Any = field(default=None, compare=False)  # collects compiled programs (explain, tests)
    tuner: Any = field(default=None, compare=False)     # (gm, args, label) -> FusionPlan | None: a search picks each graph's plan

    def __post_init__(self) -> None:
        if self.plan is not None:
            from .plan.plan import load_plans
            object.__setattr__(self, "plan", load_plans(self.plan))
        if self.on_miss not in ("default", "error", "tune"):
            raise ValueError(f"on_miss must be 'default', 'error' or 'tune', not {self.on_miss!r}")
        if self.max_sizes < 1:
            raise ValueError(f"max_sizes must be at least 1, not {self.max_sizes!r}")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}; choose one of {', '.join(STRATEGIES)}")

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "CompileOptions":
        """Options from a plain dict (torch.compile's `options=`); `heuristics` may be a dict too.
        An unknown key is a ValueError that lists the known ones."""
        known = {f.name for f in fields(CompileOptions)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown autofuse option(s) {', '.join(map(repr, unknown))}; known: {', '.join(sorted(known))}")
        d = dict(d)
        if isinstance(d.get("heuristics"), dict):
            d["heuristics"] = Heuristics(**d["heuristics"])
        return CompileOptions(**d)

    @staticmethod
    def from_mode(mode: str) -> "CompileOptions":
        """Options for torch.compile's `mode=` (`MODES`); an unknown mode is a ValueError listing them."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; autofuse knows {', '.join(MODES)}")
        return CompileOptions(**MODES[mode])

    def with_(self, **kw: Any) -> "CompileOptions":
        return replace(self, **kw)
