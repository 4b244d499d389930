"""What a tune is allowed to do: `TuneSettings` for a whole tune, with the per-kernel config search's
settings (`KernelTuneSettings`) as its `kernel` field."""
from __future__ import annotations

from dataclasses import dataclass

from ..schedule.heuristics import Heuristics


@dataclass(frozen=True)
class KernelTuneSettings:
    """How one kernel's launch config is searched (search/kernels.py): ranked, explored, refined."""

    top_k: int = 6                 # configs measured per kernel, besides the default
    explore: float = 0.25          # share of top_k drawn at random from the rest of the candidates
    max_candidates: int | None = None  # configs considered (nearest the default first) before ranking;
                                       # None: `candidate_limit` (more where a learned model ranks them)
    kernel_timeout_s: float = 2.0  # a first run longer than this scores infinity
    seed: int = 0
    refine: int = 24               # then up to this many neighbours of the fastest measured (one knob each), best-first
    kinds: tuple[str, ...] | None = None  # the kernel kinds searched ("pointwise", "reduction", "scan"); None: all.
                                          # The others run their default config, untimed
    reference: bool = False        # also measure the reduction configs Inductor's default mode would time
                                   # for the kernel (search/reference.py)


@dataclass(frozen=True)
class TuneSettings:
    """The settings of `autofuse.tune` and `autofuse tune`: the plan search of each graph, and (`kernel`)
    the config search of each kernel."""

    trials: int = 40                    # trials per graph, in its study: every worker's and (resume) earlier runs' count
    time_budget: float | None = None    # seconds for the whole tune (split over the graphs)
    db: str | None = None               # tuning DB path or URL (default: $AUTOFUSE_DB, else the user cache)
    seed: int = 0
    resume: bool = False
    finalists: int = 3                  # best distinct trials verified and timed end to end
    runner_ups: int = 2                 # and the best one with a kernel's close runner-up config (evaluate.runner_up_plans)
    rounds: int = 3                     # interleaved end-to-end timing rounds
    # the references too: a tuned plan measures every config the default plan's autotune does
    kernel: KernelTuneSettings = KernelTuneSettings(reference=True)
    heuristics: Heuristics = Heuristics()
    progress: bool = True
    compare_torch_compile: bool = True  # time eager and torch.compile for the closing table (GPU only)
