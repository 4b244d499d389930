"""`retrain`: a new cost model from the tuning DB's measurements, stored only if it is not worse.

Steps: the device's usable measurements; a split by graph hash; the estimator (given, or chosen
by `select.compare_estimators` on the training graphs alone, so the held-out graphs stay unseen);
fit on the training graphs; the new model and the DB's current one scored on the same held-out
graphs — the current one being the DB's newest model, else the shipped one; stored (and so put in
use) only when the new one's pairwise accuracy is higher (log-time error decides when either has no
scorable pair), or when forced.

Leave-one-category-out (`leave_one_category_out`, with `RetrainOptions.loco`): the same training
on every other kernel category's measurements (`categories.py`), scored on the held-out category
with TenSet's top-k scores, next to the new model's scores on the random graph split.
"""
from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from .categories import CATEGORIES, group_categories
from .evaluate import CategoryScore, Metrics, category_score, evaluate, split_by_graph
from .features import feature_matrix, precompile
from .model import DEFAULT_ESTIMATOR, DEFAULT_LAUNCH_US, CostModel, fit, usable
from .predict import LearnedPredictor, pretrained_path
from .select import Comparison, choose, compare_estimators

MIN_MEASUREMENTS = 20
MIN_GRAPHS = 2
MIN_CATEGORY_GRAPHS = 5  # a category is held out on its own when its kernels come from this many graphs


@dataclass(frozen=True)
class RetrainOptions:
    """How to train (what to train on and whether to store are retrain's own arguments)."""

    estimator: str | None = DEFAULT_ESTIMATOR  # None: choose by comparison on the training graphs
    compile: bool = True                       # sm_90 compile features (registers, spills, occupancy)
    test_fraction: float = 0.25
    workers: int = 1                           # processes compiling kernels for features
    launch_overhead_us: float = DEFAULT_LAUNCH_US
    ranker: bool = True                        # a pair ranker orders each kernel's configs (`rank`)
    loco: bool = False                         # also score leave-one-category-out (one training per category)


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
    random_split: CategoryScore | None = None  # the new model's top-k scores on the held-out graphs
    loco: tuple[CategoryScore, ...] = field(default=())


def _better(new: Metrics, cur: Metrics) -> tuple[bool, str]:
    """Whether the new model ranks better than the current one on the same held-out data, and why:
    pairwise accuracy decides; log-time error when either has no scorable pair."""
    if not math.isnan(new.pairwise) and not math.isnan(cur.pairwise):
        verdict = new.pairwise > cur.pairwise + 1e-12
        return verdict, f"held-out pairwise accuracy {new.pairwise:.3f} (new) vs {cur.pairwise:.3f} (current)"
    if math.isnan(cur.mae_log):
        return True, "the current model scores nothing on the held-out data"
    verdict = not math.isnan(new.mae_log) and new.mae_log < cur.mae_log - 1e-12
    return verdict, f"held-out log-time error {new.mae_log:.3f} (new) vs {cur.mae_log:.3f} (current)"


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


def _current_row(db: Any, device: str) -> tuple[dict | None, str]:
    """The model in use for the device: the DB's newest, else the shipped one (as a DB row would be)."""
    row = db.latest_cost_model(device)
    if row is not None:
        return row, "the tuning DB's"
    path = pretrained_path(device)
    if not path.is_file():
        return None, ""
    meta_path = path.with_suffix(".json")
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    return {"blob": path.read_bytes(), "version": meta.get("version", path.stem),
            "trained_on": meta.get("trained_on", {})}, "the shipped"


def _load_current(db: Any, device: str, seed: int) -> tuple[CostModel | None, str | None, str]:
    row, where = _current_row(db, device)
    if row is None:
        return None, None, ""
    version = f"{row.get('version')}, {where}"
    try:
        model = CostModel.from_bytes(row["blob"])
    except Exception as e:  # noqa: BLE001 - an unusable current model is replaced, not fatal
        return None, version, f"the current model ({version}) cannot be used ({e}); treating it as absent"
    their = (row.get("trained_on") or {}).get("split_seed")
    note = "" if their == seed else (
        f"the current model {version} was split with seed {their}, not {seed}: it may have trained on some of "
        f"these held-out graphs, so its score here can be optimistic")
    return model, version, note


def retrain(db: Any, device: str | None = None, force: bool = False, seed: int = 0,
            options: RetrainOptions | None = None,
            on_score: Callable[[CategoryScore], None] | None = None) -> RetrainResult:
    """Train, evaluate against the current model on the same held-out graphs, store if not worse;
    with `options.loco`, also leave each category out (`on_score` sees the random split's score, then
    each category's, as they come)."""
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
    model = train_model(train, estimator, seed, opts)
    new = evaluate(LearnedPredictor(model), test)
    random_split = category_score("random split", LearnedPredictor(model), test)
    if opts.loco and on_score:
        on_score(random_split)
    loco = leave_one_category_out(rows, estimator, seed, opts, on_score) if opts.loco else ()
    current, current_version, load_note = _load_current(db, device, seed)
    cur = evaluate(LearnedPredictor(current), test) if current is not None else None
    better, why = (True, "no model is in use") if cur is None else _better(new, cur)
    notes = [n for n in (note, load_note) if n]
    common = dict(model=model, new=new, current=cur, current_version=current_version, comparison=comparison,
                  train_size=len(train), test_size=len(test), random_split=random_split, loco=loco)
    if not (better or force):
        notes.append(f"kept the current model ({current_version}): the new one ({model.version}) ranks worse, or no better, "
                     f"on the same held-out graphs ({why}); --force stores it anyway")
        return RetrainResult(device, False, "; ".join(notes), **common)
    metrics = {"heldout": new.to_json(), "current_on_heldout": cur.to_json() if cur else None,
               "current_version": current_version, "forced": bool(force and not better),
               "comparison": {c.name: c.metrics.to_json() for c in comparison}}
    if loco:
        metrics["loco"] = [s.to_json() for s in (random_split, *loco)]
    trained_on = dict(model.trained_on, split_seed=seed, test_fraction=opts.test_fraction,
                      test_graphs=len({str(m["features"].get("graph")) for m in test}), test_measurements=len(test),
                      estimator=estimator, compiled_features=opts.compile)
    model_id = db.put_cost_model(device, model.version, model.to_bytes(), metrics, trained_on)
    verdict = "stored (forced, although not better than the current one)" if not better else "stored"
    notes.append(f"{verdict}: {model.version} as cost model #{model_id} for {device}, now the one in use ({why})")
    return RetrainResult(device, True, "; ".join(notes), model_id=model_id, **common)


def train_model(train: Sequence[Any], estimator: str, seed: int, opts: RetrainOptions, x: Any = None) -> CostModel:
    """The model retrain trains on these measurements (`x`: their precomputed feature matrix, if any)."""
    return fit(train, estimator, seed, compile=opts.compile, launch_overhead_us=opts.launch_overhead_us,
               workers=opts.workers, ranker=opts.ranker, x=x)


def _held_out_score(args: tuple) -> CategoryScore:
    category, train, x, test, estimator, seed, opts = args
    model = train_model(train, estimator, seed, opts, x=x)
    return category_score(category, LearnedPredictor(model), test)


def leave_one_category_out(rows: Sequence[Any], estimator: str, seed: int, opts: RetrainOptions,
                           on_score: Callable[[CategoryScore], None] | None = None,
                           min_graphs: int = MIN_CATEGORY_GRAPHS) -> tuple[CategoryScore, ...]:
    """For each category (`categories.py`) whose kernels come from at least `min_graphs` graphs: a
    model trained as retrain trains it on every other category's measurements, scored on this one.

    Rows are usable measurements. With `opts.workers` > 1 the categories train in that many processes.
    """
    rows = usable(rows)
    of_group = group_categories(rows)
    cats = [of_group[str(m["features"].get("group"))] for m in rows]
    x = feature_matrix([m["features"] for m in rows], compile=opts.compile, workers=opts.workers)
    jobs = []
    for category in sorted(set(cats), key=lambda c: CATEGORIES.index(c)):
        held = [i for i, c in enumerate(cats) if c == category]
        kept = [i for i, c in enumerate(cats) if c != category]
        graphs = {str(rows[i]["features"].get("graph")) for i in held}
        if len(graphs) < min_graphs or len(kept) < MIN_MEASUREMENTS:
            continue
        jobs.append((category, [rows[i] for i in kept], x[kept], [rows[i] for i in held], estimator, seed, opts))
    scores: list[CategoryScore] = []
    if opts.workers > 1 and len(jobs) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        # spawned, not forked: a child forked after the parent's OpenMP trees ran hangs in OpenMP's pool
        with ProcessPoolExecutor(min(opts.workers, len(jobs)), mp_context=multiprocessing.get_context("spawn")) as pool:
            for score in pool.map(_held_out_score, jobs):
                scores.append(score)
                if on_score:
                    on_score(score)
    else:
        for job in jobs:
            scores.append(_held_out_score(job))
            if on_score:
                on_score(scores[-1])
    return tuple(scores)
