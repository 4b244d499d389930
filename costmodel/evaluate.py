"""Held-out evaluation of kernel-time predictions, and the plan-level prediction.

Splits are by graph hash, never by kernel: every candidate of a held-out graph is unseen, as in
the search. Metrics, over the held-out measurements:
- spearman: rank correlation of predicted and measured time over all kernels;
- pairwise: share of candidate pairs within one `group` (same kernel, different configs) ordered
  correctly; pairs whose measured times are within 1% are ties and left out, a predicted tie
  counts half;
- peak@1 / peak@5: over groups with at least 2 candidates, is the predicted-best candidate the
  measured best (within 1%) / among the measured 5 best (within 1% of the 5th);
- noise-tolerant companions (reported next to the strict ones, never instead of them): many configs
  of a kernel are within run-to-run noise of each other, so `peak1_tol` counts a pick within
  `SIGNIFICANT` (2%) of the measured best, and `pairwise_sig` scores only the pairs whose measured
  times differ by more than 2% (`pairs_sig` of them);
- regret: mean over those groups of measured(predicted best) / measured best - 1;
- mae_log: mean |log predicted - log measured|.

TenSet's top-k score (`topk_score`), the figure comparable with TenSet: per graph, the sum over its
kernels of the measured best over the sum of the best measured among the model's k first picks (a
graph's kernels weighed by their time, as TenSet weighs a network's tasks); the mean over graphs.
`CategoryScore` holds it with pairwise and Spearman for one held-out set (a category, or the random
split), as `autofuse retrain` tabulates them.
"""
from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .model import CostModel, measured_us, usable
from .rank import TIE

SIGNIFICANT = 0.02  # measured differences below this are within run-to-run noise on the H200


@dataclass(frozen=True)
class Metrics:
    spearman: float
    pairwise: float
    peak1: float
    peak5: float
    regret: float
    mae_log: float
    kernels: int
    groups: int     # groups with >= 2 candidates
    pairs: int      # non-tied pairs scored
    peak1_tol: float = float("nan")     # predicted best within SIGNIFICANT of the measured best
    pairwise_sig: float = float("nan")  # pairwise accuracy over pairs differing by more than SIGNIFICANT
    pairs_sig: int = 0

    def to_json(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "Metrics":
        return Metrics(**{k: (float("nan") if d.get(k) is None else d[k]) for k in Metrics.__dataclass_fields__})


def _graph_point(graph: str, seed: int) -> float:
    """A graph's fixed point in [0, 1) for a seed."""
    return int(hashlib.sha256(f"{seed}:{graph}".encode()).hexdigest()[:15], 16) / 16**15


def split_by_graph(measurements: Sequence[Mapping[str, Any]], test_fraction: float = 0.25,
                   seed: int = 0) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(train, test): whole graphs to each side, by a seeded hash of the graph.

    A graph is held out when its point is below `test_fraction`, so its side never changes as the
    DB grows (a model trained with one seed never saw the held-out graphs of a later retrain with
    the same seed). With two or more graphs each side gets at least one.
    """
    graphs = sorted({str(m["features"].get("graph")) for m in measurements}, key=lambda g: _graph_point(g, seed))
    if len(graphs) < 2:
        return list(measurements), []
    test = {g for g in graphs if _graph_point(g, seed) < test_fraction}
    if not test:
        test = {graphs[0]}
    if len(test) == len(graphs):
        test.discard(graphs[-1])
    train = [m for m in measurements if str(m["features"].get("graph")) not in test]
    held = [m for m in measurements if str(m["features"].get("graph")) in test]
    return train, held


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 2 or np.all(a == a[0]) or np.all(b == b[0]):
        return float("nan")
    from scipy.stats import spearmanr
    r = spearmanr(a, b).statistic
    return float(r) if np.isfinite(r) else float("nan")


def metrics(measured: Sequence[float], predicted: Sequence[float], groups: Sequence[str]) -> Metrics:
    """Metrics of predicted vs measured times (µs), candidates grouped by `groups` (see the module note)."""
    m = np.asarray(measured, dtype=np.float64)
    p = np.asarray(predicted, dtype=np.float64)
    if len(m) != len(p) or len(m) != len(groups):
        raise ValueError("measured, predicted and groups must have one entry per kernel")
    by_group: dict[str, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        by_group[g].append(i)
    correct, pairs, hits1, hits5, regrets = 0.0, 0, 0, 0, []
    correct_sig, pairs_sig, hits1_tol = 0.0, 0, 0
    multi = [ix for ix in by_group.values() if len(ix) >= 2]
    for ix in multi:
        for a in range(len(ix)):
            for b in range(a + 1, len(ix)):
                i, j = ix[a], ix[b]
                gap = abs(m[i] - m[j]) / min(m[i], m[j])
                if gap <= TIE:
                    continue
                score = 0.5 if p[i] == p[j] else float((p[i] < p[j]) == (m[i] < m[j]))
                pairs += 1
                correct += score
                if gap > SIGNIFICANT:
                    pairs_sig += 1
                    correct_sig += score
        pick = ix[int(np.argmin(p[ix]))]
        ordered = np.sort(m[ix])
        hits1 += m[pick] <= ordered[0] * (1 + TIE)
        hits1_tol += m[pick] <= ordered[0] * (1 + SIGNIFICANT)
        hits5 += m[pick] <= ordered[min(4, len(ordered) - 1)] * (1 + TIE)
        regrets.append(m[pick] / ordered[0] - 1)
    nan = float("nan")
    with np.errstate(divide="ignore", invalid="ignore"):
        mae = float(np.mean(np.abs(np.log(p) - np.log(m)))) if len(m) else nan
    return Metrics(spearman=_spearman(m, p), pairwise=float(correct / pairs) if pairs else nan,
                   peak1=float(hits1 / len(multi)) if multi else nan, peak5=float(hits5 / len(multi)) if multi else nan,
                   regret=float(np.mean(regrets)) if regrets else nan, mae_log=mae,
                   kernels=len(m), groups=len(multi), pairs=pairs,
                   peak1_tol=float(hits1_tol / len(multi)) if multi else nan,
                   pairwise_sig=float(correct_sig / pairs_sig) if pairs_sig else nan, pairs_sig=pairs_sig)


def topk_score(measured: Sequence[float], predicted: Sequence[float], groups: Sequence[str],
               graphs: Sequence[str], k: int) -> float:
    """TenSet's top-k score over graphs (module note); groups of one candidate are left out; NaN: none left."""
    m = np.asarray(measured, dtype=np.float64)
    p = np.asarray(predicted, dtype=np.float64)
    by_group: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, (gr, g) in enumerate(zip(graphs, groups)):
        by_group[(str(gr), str(g))].append(i)
    best: dict[str, float] = defaultdict(float)
    picked: dict[str, float] = defaultdict(float)
    for (graph, _), ix in by_group.items():
        if len(ix) < 2:
            continue
        ix_arr = np.asarray(ix)
        picks = ix_arr[np.lexsort((ix_arr, p[ix_arr]))[:k]]  # the k lowest predictions, earlier row first on ties
        best[graph] += float(m[ix_arr].min())
        picked[graph] += float(m[picks].min())
    return float(np.mean([best[g] / picked[g] for g in best])) if best else float("nan")


@dataclass(frozen=True)
class CategoryScore:
    """A model's scores on one held-out set: TenSet top-1 / top-5, pairwise and Spearman (`metrics`)."""

    category: str
    graphs: int
    rows: int
    top1: float
    top5: float
    pairwise: float
    spearman: float

    def to_json(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


def category_score(category: str, predictor: Any, measurements: Sequence[Mapping[str, Any]]) -> CategoryScore:
    """A predictor's `CategoryScore` on usable measurements, named `category`."""
    rows = usable(measurements)
    pred = list(predictor.predict_us([r["features"] for r in rows])) if rows else []
    groups = [str(r["features"].get("group")) for r in rows]
    graphs = [str(r["features"].get("graph")) for r in rows]
    meas = measured_us(rows)
    full = metrics(meas, pred, groups)
    return CategoryScore(category, len(set(graphs)), len(rows), topk_score(meas, pred, groups, graphs, 1),
                         topk_score(meas, pred, groups, graphs, 5), full.pairwise, full.spearman)


def evaluate(predictor: Any, measurements: Sequence[Mapping[str, Any]]) -> Metrics:
    """Metrics of a predictor (anything with `predict_us(records)`) on usable measurements."""
    rows = usable(measurements)
    pred = list(predictor.predict_us([r["features"] for r in rows])) if rows else []
    return metrics(measured_us(rows), pred, [str(r["features"].get("group")) for r in rows])


def launch_overhead_us(model: Any) -> float:
    """The per-launch term of a model or predictor (0 for one that puts it in each kernel's time)."""
    if hasattr(model, "resolve"):          # a lazily loaded predictor
        model = model.resolve()
    model = getattr(model, "model", model)  # a LearnedPredictor's CostModel
    return float(model.launch_overhead_us) if isinstance(model, CostModel) else 0.0


def predict_plan_us(model: Any, kernel_records: Sequence[dict], n_launches: int) -> float:
    """A plan's time: its kernels' predicted times plus a per-launch overhead for `n_launches`
    launches (kernels and ATen fallbacks). A ByteCountPredictor already adds its overhead per kernel."""
    kernels = float(np.sum(model.predict_us(list(kernel_records)))) if kernel_records else 0.0
    return kernels + n_launches * launch_overhead_us(model)
