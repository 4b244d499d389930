"""`retrain`: a new cost model from the tuning DB's measurements, stored only if it is not worse.

Steps: the device's usable measurements; a split by graph hash; the estimator (given, or chosen
by `select.compare_estimators` on the training graphs alone, so the held-out graphs stay unseen);
fit on the training graphs; the new model and the DB's current one scored on the same held-out
graphs; stored when the new one's pairwise accuracy is at least the current one's (log-time error
decides when either has no scorable pair), or when forced.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

from .evaluate import Metrics, evaluate, split_by_graph
from .features import precompile
from .model import DEFAULT_ESTIMATOR, CostModel, fit, usable
from .predict import DEFAULT_LAUNCH_US, LearnedPredictor
from .select import Comparison, choose, compare_estimators

MIN_MEASUREMENTS = 20
MIN_GRAPHS = 2


@dataclass(frozen=True)
class RetrainOptions:
    """How to train (what to train on and whether to store are retrain's own arguments)."""

    estimator: str | None = DEFAULT_ESTIMATOR  # None: choose by comparison on the training graphs
    compile: bool = True                       # sm_90 compile features (registers, spills, occupancy)
    test_fraction: float = 0.25
    workers: int = 1                           # processes compiling kernels for features
    launch_overhead_us: float = DEFAULT_LAUNCH_US
    ranker: bool = True                        # a pair ranker orders each kernel's configs (`rank`)


@dataclass(frozen=True)
class RetrainResult:
    """What retrain did and why; `stored` only when the new model went into the DB."""

    device: str | None
    stored: bool
    message: str
    model: CostModel | None = None
    model_id: int | None = None
    new: Metrics | None = None
    current: Metrics | None = None
    current_version: str | None = None
    comparison: tuple[Comparison, ...] = field(default=())
    train_size: int = 0
    test_size: int = 0


def _not_worse(new: Metrics, cur: Metrics) -> bool:
    if not math.isnan(new.pairwise) and not math.isnan(cur.pairwise):
        return new.pairwise >= cur.pairwise - 1e-12
    if math.isnan(cur.mae_log):
        return True
    return not math.isnan(new.mae_log) and new.mae_log <= cur.mae_log + 1e-12


def pick_device(measurements: Sequence[dict], device: str | None) -> tuple[str | None, str]:
    """The device to train for, and a note when it was picked among several."""
    if device is not None:
        return device, ""
    counts = Counter(str(m["device"]) for m in usable(measurements))
    if not counts:
        return None, ""
    best, n = counts.most_common(1)[0]
    note = "" if len(counts) == 1 else (
        f"the DB has measurements of {len(counts)} devices ({', '.join(sorted(counts))}); "
        f"training for {best!r}, the one with most ({n}); pass --device to choose")
    return best, note


def _load_current(db: Any, device: str, seed: int) -> tuple[CostModel | None, str | None, str]:
    row = db.latest_cost_model(device)
    if row is None:
        return None, None, ""
    version = row.get("version")
    try:
        model = CostModel.from_bytes(row["blob"])
    except Exception as e:  # noqa: BLE001 - an unreadable current model is replaced, not fatal
        return None, version, f"the current model {version} cannot be loaded ({type(e).__name__}: {e}); treating it as absent"
    their = (row.get("trained_on") or {}).get("split_seed")
    note = "" if their == seed else (
        f"the current model {version} was split with seed {their}, not {seed}: it may have trained on some of "
        f"these held-out graphs, so its score here can be optimistic")
    return model, version, note


def retrain(db: Any, device: str | None = None, force: bool = False, seed: int = 0,
            options: RetrainOptions | None = None) -> RetrainResult:
    """Train, evaluate against the current model on the same held-out graphs, store if not worse."""
    opts = options or RetrainOptions()
    every = db.measurements(device)
    device, note = pick_device(every, device)
    rows = usable([m for m in every if device is None or str(m["device"]) == device])
    graphs = {str(m["features"].get("graph")) for m in rows}
    where = f" for {device}" if device else ""
    if len(rows) < MIN_MEASUREMENTS or len(graphs) < MIN_GRAPHS:
        return RetrainResult(device, False, (
            f"too few measurements to train a cost model{where}: {len(rows)} usable from {len(graphs)} graph(s) "
            f"(need at least {MIN_MEASUREMENTS} from {MIN_GRAPHS} graphs; `autofuse tune` collects them on a GPU)"))
    if opts.compile and opts.workers > 1:
        precompile([m["features"] for m in rows], opts.workers)  # the held-out rows too, in parallel
    train, test = split_by_graph(rows, opts.test_fraction, seed)
    comparison: tuple[Comparison, ...] = ()
    estimator = opts.estimator
    if estimator is None:
        comparison = tuple(compare_estimators(train, seeds=(seed, seed + 1, seed + 2), compile=opts.compile,
                                              workers=opts.workers))
        estimator = choose(comparison) if any(c.name != "bytes" for c in comparison) else DEFAULT_ESTIMATOR
    model = fit(train, estimator, seed, compile=opts.compile, launch_overhead_us=opts.launch_overhead_us,
                workers=opts.workers, ranker=opts.ranker)
    new = evaluate(LearnedPredictor(model), test)
    current, current_version, load_note = _load_current(db, device, seed)
    cur = evaluate(LearnedPredictor(current), test) if current is not None else None
    better = cur is None or _not_worse(new, cur)
    notes = [n for n in (note, load_note) if n]
    common = dict(model=model, new=new, current=cur, current_version=current_version, comparison=comparison,
                  train_size=len(train), test_size=len(test))
    if not (better or force):
        notes.append(f"not stored: the new model ({model.version}) is worse than the current one "
                     f"({current_version}) on the same held-out graphs; --force stores it anyway")
        return RetrainResult(device, False, "; ".join(notes), **common)
    metrics = {"heldout": new.to_json(), "current_on_heldout": cur.to_json() if cur else None,
               "current_version": current_version, "forced": bool(force and not better),
               "comparison": {c.name: c.metrics.to_json() for c in comparison}}
    trained_on = dict(model.trained_on, split_seed=seed, test_fraction=opts.test_fraction,
                      test_graphs=len({str(m["features"].get("graph")) for m in test}), test_measurements=len(test),
                      estimator=estimator, compiled_features=opts.compile)
    model_id = db.put_cost_model(device, model.version, model.to_bytes(), metrics, trained_on)
    verdict = "stored (forced, although worse than the current one)" if not better else "stored"
    notes.append(f"{verdict}: {model.version} as cost model #{model_id} for {device}")
    return RetrainResult(device, True, "; ".join(notes), model_id=model_id, **common)
