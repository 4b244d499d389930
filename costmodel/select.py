"""Choosing the estimator with evidence: every candidate trained and scored on the same held-out graphs.

Each seed is one split by graph hash; a candidate's row is its mean over the seeds. The byte-count
predictor is scored alongside as the floor to beat. The choice: highest pairwise accuracy, then
peak@1, then lowest log-time error.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .evaluate import Metrics, metrics, split_by_graph
from .features import feature_matrix
from .model import DEFAULT_TARGET, ESTIMATORS, fit_matrix, measured_us, predict_matrix, usable
from .predict import ByteCountPredictor


@dataclass(frozen=True)
class Comparison:
    """One row of the comparison: an estimator's metrics averaged over the splits."""

    name: str
    metrics: Metrics
    fit_seconds: float
    splits: int


def _mean(ms: Sequence[Metrics]) -> Metrics:
    def avg(field: str) -> float:
        vals = [getattr(m, field) for m in ms if not math.isnan(getattr(m, field))]
        return float(np.mean(vals)) if vals else float("nan")
    return Metrics(avg("spearman"), avg("pairwise"), avg("peak1"), avg("peak5"), avg("regret"), avg("mae_log"),
                   sum(m.kernels for m in ms), sum(m.groups for m in ms), sum(m.pairs for m in ms),
                   peak1_tol=avg("peak1_tol"), pairwise_sig=avg("pairwise_sig"), pairs_sig=sum(m.pairs_sig for m in ms))


def compare_estimators(measurements: Sequence[Mapping[str, Any]], names: Sequence[str] = ESTIMATORS,
                       seeds: Sequence[int] = (0, 1, 2), test_fraction: float = 0.25, compile: bool = True,
                       workers: int = 1, target: str = DEFAULT_TARGET) -> list[Comparison]:
    """Every estimator in `names` (and byte counts) on the same splits; best first (see `choose`)."""
    rows = usable(measurements)
    x_all = feature_matrix([r["features"] for r in rows], compile=compile, workers=workers)
    y_all = measured_us(rows)
    index = {id(r): i for i, r in enumerate(rows)}
    results: dict[str, list[Metrics]] = {n: [] for n in ("bytes", *names)}
    seconds: dict[str, float] = {n: 0.0 for n in results}
    for seed in seeds:
        train, test = split_by_graph(rows, test_fraction, seed)
        if not train or not test:
            continue
        tr = np.array([index[id(r)] for r in train])
        te = np.array([index[id(r)] for r in test])
        groups = [str(rows[i]["features"].get("group")) for i in te]
        bytes_pred = ByteCountPredictor().predict_us([rows[i]["features"] for i in te])
        results["bytes"].append(metrics(y_all[te], bytes_pred, groups))
        for name in names:
            t0 = time.perf_counter()
            est = fit_matrix(x_all[tr], y_all[tr], name, seed, target)
            seconds[name] += time.perf_counter() - t0
            pred = np.exp(predict_matrix(est, x_all[te], target))
            results[name].append(metrics(y_all[te], pred, groups))
    table = [Comparison(n, _mean(ms), seconds[n] / max(len(ms), 1), len(ms)) for n, ms in results.items() if ms]
    return sorted(table, key=_rank)


def _rank(c: Comparison) -> tuple:
    m = c.metrics
    def key(v: float, sign: float) -> float:
        return math.inf if math.isnan(v) else sign * v
    return (key(m.pairwise, -1), key(m.peak1, -1), key(m.mae_log, 1), c.name)


def choose(table: Sequence[Comparison]) -> str:
    """The best learned estimator of a comparison (never the byte-count floor)."""
    learned = [c for c in sorted(table, key=_rank) if c.name != "bytes"]
    if not learned:
        raise ValueError("no estimator was scored (too few graphs to hold any out?)")
    return learned[0].name


def format_comparison(table: Sequence[Comparison]) -> str:
    def f(v: float) -> str:
        return "-" if math.isnan(v) else f"{v:.3f}"
    header = ("estimator", "spearman", "pairwise", "pw(>2%)", "peak@1", "peak@1(2%)", "peak@5", "regret", "mae_log", "fit_s",
              "splits")
    rows = [(c.name, f(c.metrics.spearman), f(c.metrics.pairwise), f(c.metrics.pairwise_sig), f(c.metrics.peak1),
             f(c.metrics.peak1_tol), f(c.metrics.peak5),
             f(c.metrics.regret), f(c.metrics.mae_log), f"{c.fit_seconds:.2f}", str(c.splits)) for c in table]
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in (header, *rows))
