"""Runtime reuse of tuned plans: look a captured graph up in the tuning DB, build from the stored
plan without measuring anything; on a miss, the default strategy, an error, or (the backend's
job) a tune of that graph.

Note: a DB that cannot be opened, or a stored plan that no longer passes legality, never breaks a
compile: one warning names the problem and the default plan is used (it is always safe).
"""
from __future__ import annotations

import functools
import logging
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from ..plan.graph_hash import Versions, device_key, graph_hash
from ..logs import logger
from ..options import CompileOptions
from ..plan.plan import FusionPlan, PlanError

log = logging.getLogger("autofuse")
_cache_log = logger("cache")


@dataclass(frozen=True)
class Lookup:
    graph_hash: str
    device: str
    hit: bool
    detail: str  # the plan's source on a hit; why nothing matched on a miss


@functools.lru_cache(maxsize=8)
def _open_db(url: str | None) -> Any:
    from tuning_db import TuningDB
    return TuningDB.open(url)


def open_db(url: str | None) -> Any:
    """The tuning DB at url (default location when None), opened once per process."""
    from tuning_db import default_db_url
    return _open_db(url or default_db_url())


def _say(options: CompileOptions, msg: str) -> None:
    log.info(msg)
    _cache_log.info(msg)
    if options.verbose:
        print(msg, file=sys.stderr)


def stored_plan(gm: torch.fx.GraphModule, args: Sequence[Any], options: CompileOptions) -> tuple[FusionPlan | None, Lookup]:
    """The best stored plan for this graph, device and versions (or None), and what happened."""
    key, dev, v = graph_hash(gm, args), device_key(args), Versions.current()
    try:
        db = open_db(options.db)
        rec, reason = db.lookup(key, dev, v.torch, v.triton, v.plan_schema)
    except Exception as e:  # noqa: BLE001 - a broken DB must not break compiling
        warnings.warn(f"autofuse: tuning DB not used ({e}); compiling with the default plan")
        return None, Lookup(key, dev, False, f"tuning DB not usable: {e}")
    if rec is None:
        lookup = Lookup(key, dev, False, reason)
        _say(options, f"autofuse: plan cache miss for graph {key} on {dev}: {reason}")
        if options.on_miss == "error":
            raise PlanError(f"no stored plan for graph {key} on {dev}: {reason}")
        return None, lookup
    try:
        plan = FusionPlan.loads(rec.plan_json)
    except PlanError as e:
        warnings.warn(f"autofuse: stored plan for graph {key} is unreadable ({e}); using the default plan")
        return None, Lookup(key, dev, False, f"stored plan unreadable: {e}")
    _say(options, f"autofuse: plan cache hit for graph {key} on {dev} ({rec.source}"
                  f"{'' if rec.time_us is None else f', {rec.time_us:.1f} us'})")
    return plan, Lookup(key, dev, True, rec.source)
