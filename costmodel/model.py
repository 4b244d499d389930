"""CostModel: a scikit-learn regressor of log kernel time over `features.FEATURE_NAMES`, as a value.

The estimator learns log(time / roofline) by default (`roofline_us`: bytes over bandwidth plus a
2 µs floor); on the synthetic set that lifts held-out pairwise accuracy by 4-10 points over
learning log(time) itself, for every estimator. A model may also carry a `rank.PairRanker`, which
orders the records of one group (one kernel's configs, by the records' "group") within a call of
`predict_us`; the regressor's times are kept, handed out in the ranker's order.

The model is what the tuning DB stores (as a `model_file`: arrays and JSON, never a pickle, with its
version, feature list, the versions it was made with and a description of its training data) and what `LearnedPredictor` wraps. Training rows are the measurements whose
stats have a positive median (failed or wrong kernels carry `median_us` null and are skipped).

Note: candidate estimators (`ESTIMATORS`) are compared by `select.compare_estimators` on graphs
held out of training; HistGradientBoosting handles NaN features natively, the others see NaN
replaced by the training median (`SimpleImputer`, keeping all-NaN columns as 0).
"""
from __future__ import annotations

import hashlib
import math
import platform
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .features import FEATURE_NAMES, FEATURE_SCHEMA, RELATIVE_NAMES, feature_matrix
from .preprocess import FillEmptyColumns
from .threads import thread_limit
from .rank import RANKER_PARAMS, PairRanker, fit_ranker, order_within_groups

MODEL_FORMAT = 2
ESTIMATORS = ("hgb", "gbr", "rf", "et")
DEFAULT_ESTIMATOR = "hgb"
TARGETS = ("log_over_roofline", "log_us")
# The regressor's columns: the config-relative features help the pair ranker but cost the regressor
# absolute accuracy on held-out H200 graphs (log-time MAE 0.27 -> 0.30, mean of 5 splits).
REGRESSOR_NAMES = tuple(n for n in FEATURE_NAMES if n not in RELATIVE_NAMES)
DEFAULT_TARGET = "log_over_roofline"
ROOFLINE_FLOOR_US = 2.0
DEFAULT_LAUNCH_US = 3.0      # per-kernel launch overhead


def _native_nan(est: Any) -> Any:
    from sklearn.pipeline import make_pipeline
    return make_pipeline(FillEmptyColumns(), est)


def _imputed(est: Any) -> Any:
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    return make_pipeline(SimpleImputer(strategy="median", keep_empty_features=True), est)


def make_estimator(name: str, seed: int = 0) -> Any:
    """A fresh, unfitted regressor by short name (see ESTIMATORS)."""
    from sklearn.ensemble import (ExtraTreesRegressor, GradientBoostingRegressor, HistGradientBoostingRegressor,
                                  RandomForestRegressor)
    makers: dict[str, Callable[[], Any]] = {
        "hgb": lambda: _native_nan(HistGradientBoostingRegressor(
            max_iter=400, learning_rate=0.06, max_leaf_nodes=31, min_samples_leaf=10, l2_regularization=1e-3,
            early_stopping=False, random_state=seed)),
        "gbr": lambda: _imputed(GradientBoostingRegressor(n_estimators=400, learning_rate=0.05, max_depth=5,
                                                          subsample=0.8, random_state=seed)),
        "rf": lambda: _imputed(RandomForestRegressor(n_estimators=300, min_samples_leaf=2, max_features=0.5,
                                                     random_state=seed)),
        "et": lambda: _imputed(ExtraTreesRegressor(n_estimators=300, min_samples_leaf=2, max_features=0.7,
                                                   random_state=seed)),
    }
    if name not in makers:
        raise ValueError(f"unknown estimator {name!r}; choose one of {', '.join(ESTIMATORS)}")
    return makers[name]()


def usable(measurements: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Measurements that can train or test a model: a positive, finite median and no error; twins
    merged (`merge_twins`)."""
    out = []
    for m in measurements:
        s = m.get("stats") or {}
        t = s.get("median_us")
        if isinstance(t, (int, float)) and math.isfinite(t) and t > 0 and not s.get("error") and m.get("features"):
            out.append(m)
    return merge_twins(out)


def _twin_key(m: Mapping[str, Any]) -> tuple | None:
    """Identity of the kernel: device, group, source and the config with num_stages read as 1 (a
    loop-free kernel compiles to the same code at every value, and a looped one ran at the same time
    within the noise: features.py, schema 7); None for a record without a group, config or source."""
    f = m["features"]
    if f.get("group") is None or not isinstance(f.get("config"), dict) or not f.get("source"):
        return None
    cfg = dict(f["config"], num_stages=1)
    src = hashlib.sha256(str(f["source"]).encode()).hexdigest()
    return (str(m.get("device")), str(f["group"]), src, repr(sorted(cfg.items())))


def merge_twins(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One row per compiled kernel, in first-seen order. Why: the data hold configs that compile to
    the same machine code (loop-free kernels measured at num_stages 1 and 2: 3119 pointwise pairs);
    as two candidates, their noise-only differences would be pairs to rank and peaks to miss. A merged row keeps the first record with the geometric mean of the medians and
    `stats["twins"]`, the number merged."""
    by: dict[Any, list[Mapping[str, Any]]] = {}
    for i, m in enumerate(rows):
        key = _twin_key(m)
        by.setdefault(("row", i) if key is None else key, []).append(m)
    out: list[Mapping[str, Any]] = []
    for ms in by.values():
        if len(ms) == 1:
            out.append(ms[0])
            continue
        t = math.exp(sum(math.log(float(m["stats"]["median_us"])) for m in ms) / len(ms))
        out.append(dict(ms[0], stats=dict(ms[0]["stats"], median_us=t, twins=len(ms))))
    return out


def measured_us(measurements: Sequence[Mapping[str, Any]]) -> np.ndarray:
    return np.array([float(m["stats"]["median_us"]) for m in measurements], dtype=np.float64)


def describe(measurements: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What a model was trained on: counts, devices, kinds, time range, and the software stack."""
    import sklearn
    feats = [m["features"] for m in measurements]
    created = sorted(str(m["created"]) for m in measurements if m.get("created") is not None)
    try:
        import triton
        triton_version = triton.__version__
    except Exception:  # noqa: BLE001
        triton_version = None
    return {"measurements": len(feats), "graphs": len({f.get("graph") for f in feats}),
            "groups": len({f.get("group") for f in feats}),
            "kinds": {k: sum(f.get("kind") == k for f in feats) for k in ("pointwise", "reduction")},
            "devices": sorted({str(m.get("device")) for m in measurements}),
            "first": created[0] if created else None, "last": created[-1] if created else None,
            "feature_schema": FEATURE_SCHEMA, "sklearn": sklearn.__version__, "triton": triton_version,
            "python": platform.python_version()}


def roofline_us(x: np.ndarray) -> np.ndarray:
    """Bytes over copy bandwidth plus a floor, from a FEATURE_NAMES matrix: the part of a kernel's
    time the byte count already explains. Learning the log of time over it leaves the trees the
    config and op-mix effects, which are multiplicative, instead of the 1000x spread of sizes."""
    ideal = x[:, FEATURE_NAMES.index("ideal_us")]
    return np.where(np.isfinite(ideal), ideal, 0.0) + ROOFLINE_FLOOR_US


def _offset(x: np.ndarray, target: str) -> np.ndarray:
    if target == "log_over_roofline":
        return np.log(roofline_us(x))
    if target == "log_us":
        return np.zeros(x.shape[0])
    raise ValueError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")


def fit_matrix(x: np.ndarray, y_us: np.ndarray, estimator_name: str, seed: int = 0,
               target: str = DEFAULT_TARGET, offset_x: np.ndarray | None = None) -> Any:
    """A fitted estimator from a FEATURE_NAMES matrix and measured µs (see `predict_matrix`);
    `offset_x`: the FEATURE_NAMES matrix when `x` holds other columns."""
    est = make_estimator(estimator_name, seed)
    with thread_limit(1):  # OpenMP threads make small fits slower, by 10x on a shared machine
        est.fit(x, np.log(y_us) - _offset(x if offset_x is None else offset_x, target))
    return est


def predict_matrix(est: Any, x: np.ndarray, target: str = DEFAULT_TARGET, columns: np.ndarray | None = None) -> np.ndarray:
    """log(µs) predicted from a FEATURE_NAMES matrix (`columns`: the estimator's own, if they differ)."""
    with thread_limit(1):
        return np.asarray(est.predict(x if columns is None else columns), dtype=np.float64) + _offset(x, target)


@dataclass(frozen=True)
class CostModel:
    """A fitted regressor of log kernel time and everything needed to use it on new records."""

    version: str
    estimator_name: str
    feature_names: tuple[str, ...]
    estimator: Any = field(repr=False, compare=False)
    compiled_features: bool = True          # were sm_90 compile features used (and must be at predict time)
    target: str = DEFAULT_TARGET            # what the estimator predicts (see `roofline_us`)
    launch_overhead_us: float = DEFAULT_LAUNCH_US  # per kernel launch, added at the plan level
    trained_on: Mapping[str, Any] = field(default_factory=dict, compare=False)
    ranker: Any = field(default=None, repr=False, compare=False)  # rank.PairRanker, or None (a model of format 2
                                                                  # pickled before rankers reads as None)

    def _columns(self, x: np.ndarray) -> np.ndarray | None:
        """The model's columns of a FEATURE_NAMES matrix (None: the same); unknown ones NaN."""
        return columns(x, self.feature_names)

    def predict_log_us(self, records: Sequence[dict]) -> np.ndarray:
        if not records:
            return np.zeros(0)
        x = feature_matrix(records, compile=self.compiled_features)
        out = predict_matrix(self.estimator, x, self.target, self._columns(x))
        if self.ranker is None:
            return out
        groups = [r.get("group") if isinstance(r, dict) else None for r in records]
        xr = columns(x, self.ranker.feature_names)
        return order_within_groups(out, self.ranker.scores(x if xr is None else xr, groups), groups)

    def predict_us(self, records: Sequence[dict]) -> np.ndarray:
        """Predicted kernel times (µs) of kernel feature records."""
        return np.exp(self.predict_log_us(records))

    def to_bytes(self) -> bytes:
        """The model as a model file (`model_file`: arrays and JSON, no pickle)."""
        from . import model_file
        fields = {"version": self.version, "estimator_name": self.estimator_name,
                  "feature_names": list(self.feature_names), "compiled_features": self.compiled_features,
                  "target": self.target, "launch_overhead_us": self.launch_overhead_us,
                  "trained_on": dict(self.trained_on),
                  "ranker_feature_names": list(self.ranker.feature_names) if self.ranker is not None else None}
        return model_file.dumps(fields, {"estimator": self.estimator,
                                         "ranker": self.ranker.estimator if self.ranker is not None else None})

    @staticmethod
    def from_bytes(blob: bytes) -> "CostModel":
        """The model in a blob from `to_bytes`; ValueError if it is something else (a pickle included:
        it is never loaded), `model_file.StaleModel` if it was made for other features or codegen."""
        from . import model_file
        f, parts = model_file.loads(blob)
        ranker = PairRanker(tuple(f["ranker_feature_names"]), parts["ranker"]) if "ranker" in parts else None
        return CostModel(str(f["version"]), str(f["estimator_name"]), tuple(f["feature_names"]), parts["estimator"],
                         bool(f["compiled_features"]), str(f["target"]), float(f["launch_overhead_us"]),
                         dict(f["trained_on"], versions=f["versions"]), ranker)


def columns(x: np.ndarray, names: Sequence[str]) -> np.ndarray | None:
    """The columns `names` of a FEATURE_NAMES matrix (None: the same); unknown ones NaN."""
    if tuple(names) == FEATURE_NAMES:
        return None
    cols = {n: i for i, n in enumerate(FEATURE_NAMES)}
    out = np.full((x.shape[0], len(names)), np.nan)
    for j, n in enumerate(names):
        if n in cols:
            out[:, j] = x[:, cols[n]]
    return out


def model_version(estimator_name: str, measurements: Sequence[Mapping[str, Any]], seed: int,
                  compiled: bool = True) -> str:
    """Deterministic: the same training data, estimator (with "+rank" when a ranker is trained), seed
    and compile-features flag give the same version."""
    h = hashlib.sha256()
    for m in measurements:
        h.update(str(m.get("kernel_key", "")).encode())
        h.update(repr(m["stats"]["median_us"]).encode())
    h.update(f"{estimator_name}:{seed}:{FEATURE_SCHEMA}:{MODEL_FORMAT}".encode())
    if "+rank" in estimator_name:  # the ranker's settings (since schema 5; older versions stay as stored)
        h.update(repr(sorted(RANKER_PARAMS.items())).encode())
    if not compiled:  # (models with compile features keep the versions they had before the flag counted)
        h.update(b":no-compile")
    return f"cm{FEATURE_SCHEMA}-{estimator_name}-{h.hexdigest()[:10]}"


def fit(measurements: Sequence[Mapping[str, Any]], estimator: str = DEFAULT_ESTIMATOR, seed: int = 0,
        compile: bool = True, launch_overhead_us: float = DEFAULT_LAUNCH_US, workers: int = 1,
        x: np.ndarray | None = None, target: str = DEFAULT_TARGET, ranker: bool = True) -> CostModel:
    """Train on measurements ({"features", "stats", ...} as `TuningDB.measurements` returns them).

    Unusable rows (failed kernels) are dropped; `x` may pass the precomputed feature matrix of the
    usable rows (`usable(measurements)`, in order). ValueError when fewer than 2 usable rows remain.
    `ranker`: also fit a `rank.PairRanker` on the pairs of configs within each group (none is kept
    when the data has no such pair).
    """
    rows = usable(measurements)
    if len(rows) < 2:
        raise ValueError(f"too few usable measurements to train on ({len(rows)})")
    if x is None:
        x = feature_matrix([m["features"] for m in rows], compile=compile, workers=workers)
    y = measured_us(rows)
    est = fit_matrix(columns(x, REGRESSOR_NAMES), y, estimator, seed, target, offset_x=x)
    pairs = None
    if ranker:
        pairs = fit_ranker(x, np.log(y), [m["features"].get("group") for m in rows], FEATURE_NAMES, seed)
    name = f"{estimator}+rank" if pairs is not None else estimator
    return CostModel(model_version(name, rows, seed, compile), estimator, REGRESSOR_NAMES, est, compile, target,
                     float(launch_overhead_us), dict(describe(rows), target=target, estimator=estimator,
                                                     ranker="pairs-hgb" if pairs is not None else None), pairs)
