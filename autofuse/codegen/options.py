"""The launch-config options (split, online, cache_hints, early_loads, fast_tanh, YBLOCK), each defined once.

Note: an option is a LaunchConfig field that changes a kernel's generated code where it is legal.
Its entry here holds everything the rest of the compiler asks about it: its legality on a kernel
(`eligible`, and `why_not` for a given config, with the plan checker's words), its default rule
(applied by Heuristics.launch_config, in registry order), the twin a candidate config gets in the
tuner's list (`variant`), its moves in the tuner's local search (`neighbours`) and the codegen module
that emits its code (`codegen`: split.py, online.py, cache_hints.py, early_loads.py, fast_math.py,
tiling.py; KernelWriter calls into it where the option changes the kernel). The plan checker
(plan/apply.py), the tuner (search/candidates.py, search/kernels.py), the defaults
(schedule/heuristics.py, compiler.py), KernelWriter's guard and the cost model's features (the
on/off options, `FLAG_OPTIONS`) read this table.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from .cache_hints import why_not_cache_hints
from .config import FLAGS, LaunchConfig
from .device import DeviceFacts
from .early_loads import why_not_early_loads
from .fast_math import why_not_fast_tanh
from .online import online_pairs, why_not_online
from .split import MAX_SPLIT, why_not_split
from .tiling import MAX_Y_PROGRAMS, Tiling, choose_tiling, default_tile, why_not_tile2d

if TYPE_CHECKING:
    from ..schedule.heuristics import Heuristics
    from ..schedule.loops import Placement
    from ..schedule.nodes import SchedulerNode


@dataclass(frozen=True)
class KernelView:
    """What an option's legality reads of a kernel: its placed nodes, whether it reduces, its r extent."""

    members: Sequence[tuple["SchedulerNode", "Placement"]]
    is_reduction: bool
    rnumel: int = 1

    @classmethod
    def of(cls, group: Any) -> "KernelView":
        """The view of a fusion group."""
        return cls(group.placements(), group.is_reduction, group.rnumel)


@dataclass(frozen=True)
class DefaultContext:
    """What a default rule reads: the kernel's kind and sizes, the target, and whether the option is
    legal on the kernel (`legal`, from `default_legality`); `tile`: a pointwise kernel's (y, x)
    split where 2-D tiles are legal on it (codegen/tiling.py)."""

    kind: str
    numel: int
    rnumel: int
    interpret: bool
    outer: bool
    device: DeviceFacts
    legal: bool
    tile: Tiling | None = None


def _keep(h: "Heuristics", cfg: LaunchConfig, ctx: DefaultContext) -> LaunchConfig:
    return cfg


def _none(cfg: LaunchConfig, reduction: bool) -> tuple[LaunchConfig, ...]:
    return ()


@dataclass(frozen=True)
class Option:
    """One launch-config option.
    `eligible(view, persistent, split)`: None when turning the option on is legal on a kernel laid
    out so, else why not (it reads a config only through `persistent` and `split`).
    `why_not(cfg, view)`: None when cfg's setting of the option is legal on the kernel (off always is).
    `default(heuristics, cfg, ctx)`: the default config with this option's rule applied.
    `variant(cfg)`: the twin of a candidate config with the option on (None: the option comes from
    the config ranges instead), listed where `eligible` allows; `interpreter`: whether it is listed
    when kernels run in Triton's interpreter.
    `neighbours(cfg, reduction)`: the local search's moves of this option from cfg.
    `default_legality`: whether the defaults ask `eligible` (for a looped row without split);
    `default_in_interpreter`: whether they ask it when kernels run in the interpreter;
    `pointwise`: whether the option is for pointwise kernels (the defaults ask its legality of them,
    not of reductions); `codegen`: the codegen module (autofuse.codegen.<codegen>) that emits its code."""

    name: str
    codegen: str
    eligible: Callable[[KernelView, bool, int], str | None]
    why_not: Callable[[LaunchConfig, KernelView], str | None]
    default: Callable[["Heuristics", LaunchConfig, DefaultContext], LaunchConfig] = _keep
    variant: Callable[[LaunchConfig], LaunchConfig] | None = None
    interpreter: bool = True
    neighbours: Callable[[LaunchConfig, bool], tuple[LaunchConfig, ...]] = _none
    default_legality: bool = False
    default_in_interpreter: bool = True
    pointwise: bool = False


# ---- split: the r range cut into chunks reduced by separate programs (split.py) -----------------------
def _split_eligible(view: KernelView, persistent: bool, split: int) -> str | None:
    """Legal as it stands, or with the kernel's softmax sums run online (the defaults then turn
    online on; a config that splits without it is rejected by _split_why_not)."""
    why = why_not_split(view.members, view.is_reduction)
    if why is None or persistent or not view.is_reduction:
        return why
    pairs = online_pairs(view.members)
    return why if not pairs or why_not_split(view.members, True, pairs) is not None else None


def _split_why_not(cfg: LaunchConfig, view: KernelView) -> str | None:
    if cfg.split == 1:
        return None
    if not 1 <= cfg.split <= MAX_SPLIT:
        return f"split={cfg.split} is outside [1, {MAX_SPLIT}]"
    why = why_not_split(view.members, view.is_reduction, online_pairs(view.members) if cfg.online else None)
    if why is not None:
        return f"split={cfg.split} is impossible: {why}"
    if cfg.persistent and cfg.RBLOCK * cfg.split < view.rnumel:
        return (f"persistent split reduction with RBLOCK*split={cfg.RBLOCK * cfg.split} < rnumel={view.rnumel} "
                "(each chunk must fit one RBLOCK)")
    return None


def _split_default(h: "Heuristics", cfg: LaunchConfig, ctx: DefaultContext) -> LaunchConfig:
    if ctx.legal and ctx.kind == "reduction" and not ctx.interpret:
        return replace(cfg, split=h.choose_split(cfg, ctx.numel, ctx.rnumel, ctx.device, ctx.outer))
    return cfg


def _split_neighbours(cfg: LaunchConfig, reduction: bool) -> tuple[LaunchConfig, ...]:
    if reduction and cfg.split > 1:  # a split's partials: doubled or halved
        return replace(cfg, split=cfg.split * 2), replace(cfg, split=cfg.split // 2)
    return ()


# ---- online: a softmax's sum in its max's r loop (online.py) --------------------------------------------
_ONLINE_LAYOUT = "online softmax is for looped reductions (a persistent row is read once anyway)"


def _online_eligible(view: KernelView, persistent: bool, split: int) -> str | None:
    if not view.is_reduction or persistent:
        return _ONLINE_LAYOUT
    return why_not_online(view.members, view.is_reduction)


def _online_why_not(cfg: LaunchConfig, view: KernelView) -> str | None:
    if not cfg.online:
        return None
    if not view.is_reduction or cfg.persistent:
        return _ONLINE_LAYOUT
    why = why_not_online(view.members, view.is_reduction)
    return None if why is None else f"online softmax is impossible: {why}"


def _online_default(h: "Heuristics", cfg: LaunchConfig, ctx: DefaultContext) -> LaunchConfig:
    if ctx.legal and ctx.kind == "reduction" and not cfg.persistent:
        rblock = cfg.RBLOCK if ctx.interpret or cfg.split > 1 else h.online_rblock(cfg.RBLOCK, ctx.rnumel)
        return replace(cfg, online=True, RBLOCK=rblock)
    return cfg


# ---- cache_hints: L2 eviction hints on a reduction's loads, streaming stores (cache_hints.py) ----------
def _hints_eligible(view: KernelView, persistent: bool, split: int) -> str | None:
    return why_not_cache_hints(view.members, view.is_reduction, persistent)


def _hints_default(h: "Heuristics", cfg: LaunchConfig, ctx: DefaultContext) -> LaunchConfig:
    if (ctx.legal and h.looped_cache_hints and ctx.kind == "reduction" and not ctx.interpret and not ctx.outer
            and not cfg.persistent and cfg.split == 1 and (h.online_cache_hints or not cfg.online)):
        return replace(cfg, cache_hints=True)
    return cfg


# ---- early_loads: a persistent reduction's later loads issued first (early_loads.py) --------------------
def _early_eligible(view: KernelView, persistent: bool, split: int) -> str | None:
    return why_not_early_loads(view.members, view.is_reduction, persistent, split)


# ---- fast_tanh: tanh through the hardware's approximation, 16-bit kernels only (fast_math.py) ---------
def _tanh_eligible(view: KernelView, persistent: bool, split: int) -> str | None:
    return why_not_fast_tanh(view.members)


# ---- YBLOCK: a pointwise kernel run as [YBLOCK, XBLOCK] tiles of its (y, x) split (tiling.py) ---------
def _tile_eligible(view: KernelView, persistent: bool, split: int) -> str | None:
    return why_not_tile2d(view.members, view.is_reduction)


def _tile_why_not(cfg: LaunchConfig, view: KernelView) -> str | None:
    if cfg.YBLOCK == 0:
        return None
    if cfg.YBLOCK < 0 or cfg.YBLOCK & (cfg.YBLOCK - 1):
        return f"YBLOCK={cfg.YBLOCK} is not a power of two"
    why = _tile_eligible(view, cfg.persistent, cfg.split)
    if why is not None:
        return f"2-D tiles (YBLOCK={cfg.YBLOCK}) are impossible: {why}"
    tiling = choose_tiling(view.members)
    if -(-tiling.ynumel // cfg.YBLOCK) > MAX_Y_PROGRAMS:
        return f"YBLOCK={cfg.YBLOCK} needs more than {MAX_Y_PROGRAMS} y tiles (ynumel={tiling.ynumel})"
    return None


def _tile_default(h: "Heuristics", cfg: LaunchConfig, ctx: DefaultContext) -> LaunchConfig:
    if ctx.legal and ctx.kind == "pointwise" and ctx.tile is not None:
        y, x, warps = default_tile(ctx.tile, ctx.interpret, h.interpreter_block_elems)
        return replace(cfg, YBLOCK=y, XBLOCK=x, num_warps=warps)
    return cfg


def _tile_variant(cfg: LaunchConfig) -> LaunchConfig:
    """A 1-D config's tiled twin of as many elements per program: YBLOCK the larger square side."""
    if cfg.YBLOCK:
        return cfg
    y = 1 << (cfg.XBLOCK.bit_length() // 2)
    return replace(cfg, YBLOCK=y, XBLOCK=max(cfg.XBLOCK // y, 1))


def _tile_neighbours(cfg: LaunchConfig, reduction: bool) -> tuple[LaunchConfig, ...]:
    """A tile reshaped at the same elements (y doubled or halved), or back to 1-D; a 1-D pointwise
    config's tiled twin (the caller drops it where tiles are illegal)."""
    if reduction:
        return ()
    if not cfg.YBLOCK:
        return (_tile_variant(cfg),)
    y, x = cfg.YBLOCK, cfg.XBLOCK
    out = [replace(cfg, YBLOCK=y * 2, XBLOCK=x // 2)] if x > 1 else []
    out += [replace(cfg, YBLOCK=y // 2, XBLOCK=x * 2)] if y > 1 else []
    return (*out, replace(cfg, YBLOCK=0, XBLOCK=x * y))


def _flag_why_not(name: str, eligible: Callable[[KernelView, bool, int], str | None]
                  ) -> Callable[[LaunchConfig, KernelView], str | None]:
    """why_not of a boolean option whose legality is `eligible` alone."""
    def why_not(cfg: LaunchConfig, view: KernelView) -> str | None:
        if not getattr(cfg, name):
            return None
        why = eligible(view, cfg.persistent, cfg.split)
        return None if why is None else f"{name} is impossible: {why}"
    return why_not


def _flag_variant(name: str) -> Callable[[LaunchConfig], LaunchConfig]:
    return lambda cfg: replace(cfg, **{name: True})


# Registry order is the order of the plan checker's verdicts, of the default rules (each sees the
# config the ones before it made) and of the neighbours' moves.
OPTIONS: tuple[Option, ...] = (
    Option("split", "split", _split_eligible, _split_why_not, default=_split_default, neighbours=_split_neighbours,
           default_legality=True),
    Option("online", "online", _online_eligible, _online_why_not, default=_online_default,
           variant=lambda cfg: replace(cfg, online=not cfg.online), default_legality=True),
    Option("cache_hints", "cache_hints", _hints_eligible, _flag_why_not("cache_hints", _hints_eligible),
           default=_hints_default,
           variant=_flag_variant("cache_hints"), default_legality=True, default_in_interpreter=False,
           neighbours=lambda cfg, reduction: (replace(cfg, cache_hints=not cfg.cache_hints),)),
    Option("early_loads", "early_loads", _early_eligible, _flag_why_not("early_loads", _early_eligible),
           variant=_flag_variant("early_loads"),
           neighbours=lambda cfg, reduction: (replace(cfg, early_loads=not cfg.early_loads),) if reduction else ()),
    Option("fast_tanh", "fast_math", _tanh_eligible, _flag_why_not("fast_tanh", _tanh_eligible),
           variant=_flag_variant("fast_tanh"), interpreter=False),  # no inline PTX in the interpreter
    Option("YBLOCK", "tiling", _tile_eligible, _tile_why_not, default=_tile_default, variant=_tile_variant,
           neighbours=_tile_neighbours, default_legality=True, pointwise=True),
)


# the on/off options (LaunchConfig's bool fields), in registry order: the cost model's feature columns
FLAG_OPTIONS: tuple[str, ...] = tuple(o.name for o in OPTIONS if o.name in FLAGS)


def option(name: str) -> Option:
    """The registry's entry called `name`."""
    return next(o for o in OPTIONS if o.name == name)


def why_not_options(cfg: LaunchConfig, view: KernelView) -> str | None:
    """The first option cfg sets illegally on the kernel, with why; None when all are legal."""
    for opt in OPTIONS:
        why = opt.why_not(cfg, view)
        if why is not None:
            return why
    return None


def default_legality(view: KernelView, interpret: bool) -> dict[str, bool]:
    """Option name -> whether the defaults may turn it on for this kernel (a looped row without
    split is the layout asked; a pointwise option is asked of pointwise kernels)."""
    return {o.name: view.is_reduction != o.pointwise and (o.default_in_interpreter or not interpret)
            and o.eligible(view, False, 1) is None for o in OPTIONS if o.default_legality}


def apply_defaults(h: "Heuristics", cfg: LaunchConfig, kind: str, numel: int, rnumel: int, interpret: bool,
                   outer: bool, device: DeviceFacts, legal: Mapping[str, bool],
                   tile: Tiling | None = None) -> LaunchConfig:
    """cfg with every option's default rule applied, in registry order."""
    for opt in OPTIONS:
        ctx = DefaultContext(kind, numel, rnumel, interpret, outer, device, legal.get(opt.name, False), tile)
        cfg = opt.default(h, cfg, ctx)
    return cfg


def option_variants(cfg: LaunchConfig, interpret: bool, eligible: Callable[[Option, bool, int], bool]
                    ) -> list[LaunchConfig]:
    """The candidate list's twins of cfg, in registry order: one per option whose variant is legal
    (`eligible(option, persistent, split)`, which the caller may cache)."""
    return [opt.variant(cfg) for opt in OPTIONS
            if opt.variant is not None and (opt.interpreter or not interpret)
            and eligible(opt, cfg.persistent, cfg.split)]


def option_neighbours(cfg: LaunchConfig, reduction: bool) -> list[LaunchConfig]:
    """Every option's local-search moves from cfg, in registry order."""
    return [c for opt in OPTIONS for c in opt.neighbours(cfg, reduction)]
