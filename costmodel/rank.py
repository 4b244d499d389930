"""PairRanker: which of two configs of one kernel is faster, learned from pairs (RankNet-style, with trees).

The search asks the model one question: which configs of this kernel to measure. A regressor of
absolute log time spends its capacity on the 1000x spread between kernels; a classifier of config
pairs within a group (same kernel, different launch configs) learns only the question asked. On the
held-out H200 graphs it ranks better than every regressor target tried (absolute, within-group
deviation, clipped deviation, within-group rank): docs/costmodel.md.

Note: training pairs are the ordered pairs (a, b) of one group whose measured times differ by more
than `TIE`, labelled "a is faster"; a pair's row is the config features of a minus b, of a,
of b, and the kernel features (`pair_rows`). A record's score is its mean probability of beating the
other records of its group (a Borda count over both orders of each pair). `CostModel` keeps the
regressor's times and hands them out within each group in the ranker's order (`order_within_groups`),
so a group's predicted times, and any sum over them, stay the regressor's. The classifier has 600
trees of 63 leaves: on retrain's held-out graphs it is not worse than 300 of 31 on any metric
(docs/costmodel.md).
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from autofuse.codegen.options import FLAG_OPTIONS

from .features import COMPILED_NAMES, RELATIVE_NAMES
from .preprocess import FillEmptyColumns
from .threads import thread_limit

# Measured times within 1% of each other are ties: no training pair here, no scored pair in `evaluate`.
TIE = 0.01

CONFIG_NAMES = frozenset({
    "persistent", "looped", "XBLOCK", "RBLOCK", "num_warps", "num_stages", "split", *FLAG_OPTIONS, "log_XBLOCK", "log_RBLOCK", "block_elems", "elems_per_thread", "grid", "log_grid", "r_iters",
    "x_util", "r_util", "waves_nominal",
    *COMPILED_NAMES, *RELATIVE_NAMES})

# The pair classifier's settings (HistGradientBoostingClassifier); see the module note on its size.
RANKER_PARAMS: dict[str, Any] = dict(max_iter=600, learning_rate=0.06, max_leaf_nodes=63, min_samples_leaf=20,
                                     early_stopping=False)


# Pairs scored at once from which the classifier predicts on all cores (see `PairRanker.scores`).
PARALLEL_PAIRS = 4096


def group_indices(groups: Sequence[Any]) -> list[list[int]]:
    """Row indices by group, groups of 2 or more only (`None`: a group of its own)."""
    by: dict[Any, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        by[("row", i) if g is None else ("g", g)].append(i)
    return [ix for ix in by.values() if len(ix) >= 2]


@dataclass(frozen=True)
class PairRanker:
    """A fitted pair classifier over the columns `feature_names` of a feature matrix."""

    feature_names: tuple[str, ...]
    estimator: Any = field(repr=False, compare=False)

    def _split(self) -> tuple[np.ndarray, np.ndarray]:
        config = np.array([n in CONFIG_NAMES for n in self.feature_names])
        return np.flatnonzero(config), np.flatnonzero(~config)

    def pair_rows(self, x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        c, k = self._split()
        return np.hstack([x[a][:, c] - x[b][:, c], x[a][:, c], x[b][:, c], x[a][:, k]])

    def scores(self, x: np.ndarray, groups: Sequence[Any]) -> np.ndarray:
        """Each row's mean probability of beating the others of its group (NaN: alone in its group)."""
        out = np.full(x.shape[0], np.nan)
        ixs = group_indices(groups)
        if not ixs:
            return out
        a = np.concatenate([np.repeat(ix, len(ix)) for ix in ixs])
        b = np.concatenate([np.tile(ix, len(ix)) for ix in ixs])
        keep = a != b
        a, b = a[keep], b[keep]
        # one thread for the few pairs of a measured group (OpenMP start-up costs more than it saves); all
        # cores for a search's ranking of its whole candidate list (160 configs: 25 440 pairs). The
        # probabilities are the same either way: each row's trees are summed alone.
        with thread_limit(1 if len(a) < PARALLEL_PAIRS else None):
            p = self.estimator.predict_proba(self.pair_rows(x, a, b))[:, 1]
        wins = np.zeros(x.shape[0])
        np.add.at(wins, a, p)
        np.add.at(wins, b, 1.0 - p)
        for ix in ixs:
            out[ix] = wins[ix] / (2.0 * (len(ix) - 1))
        return out


def training_pairs(log_us: np.ndarray, groups: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, label): ordered pairs of one group more than TIE apart; label 1 when a is faster."""
    tie = math.log1p(TIE)
    a_all, b_all = [], []
    for ix in group_indices(groups):
        ix = np.asarray(ix)
        a, b = np.repeat(ix, len(ix)), np.tile(ix, len(ix))
        keep = np.abs(log_us[a] - log_us[b]) > tie
        a_all.append(a[keep])
        b_all.append(b[keep])
    a = np.concatenate(a_all) if a_all else np.zeros(0, dtype=int)
    b = np.concatenate(b_all) if b_all else np.zeros(0, dtype=int)
    return a, b, (log_us[a] < log_us[b]).astype(int)


def fit_ranker(x: np.ndarray, log_us: np.ndarray, groups: Sequence[Any], feature_names: Sequence[str],
               seed: int = 0) -> PairRanker | None:
    """A PairRanker from a feature matrix and measured log times; None when no pair of both labels exists."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.pipeline import make_pipeline
    a, b, label = training_pairs(np.asarray(log_us, dtype=np.float64), groups)
    if len(set(label.tolist())) < 2:
        return None
    est = make_pipeline(FillEmptyColumns(), HistGradientBoostingClassifier(**RANKER_PARAMS, random_state=seed))
    ranker = PairRanker(tuple(feature_names), est)
    with thread_limit(1):
        est.fit(ranker.pair_rows(x, a, b), label)
    return ranker


def order_within_groups(log_us: np.ndarray, scores: np.ndarray, groups: Sequence[Any]) -> np.ndarray:
    """The predicted log times of each group handed out in score order: the highest score gets the
    group's lowest time (ties of time broken by a hair, so the order is the ranker's)."""
    out = np.array(log_us, dtype=np.float64, copy=True)
    for ix in group_indices(groups):
        ix = np.asarray(ix)
        s = scores[ix]
        if not np.all(np.isfinite(s)):
            continue
        order = ix[np.lexsort((ix, -s))]  # best first; the earlier record first on equal scores
        times = np.sort(out[ix])
        out[order] = times + np.arange(len(ix)) * 1e-9
    return out
