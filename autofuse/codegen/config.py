"""LaunchConfig: the per-kernel launch parameters, an explicit value chosen by heuristics or a plan."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class LaunchConfig:
    XBLOCK: int
    RBLOCK: int = 1
    num_warps: int = 4
    num_stages: int = 1
    persistent: bool = True

    def to_json(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        kind = "persistent" if self.persistent else "looped"
        return f"XBLOCK={self.XBLOCK} RBLOCK={self.RBLOCK} num_warps={self.num_warps} num_stages={self.num_stages} {kind}"
