"""Cost models as data: a fitted model's parameters in an .npz (numpy arrays plus one JSON header),
never a pickle, so loading a model from a shared tuning DB or a download cannot run code.

Note: a model is a preprocessing step (NaN filled with per-column values, or all-empty columns
set to 0) and a tree ensemble: gradient-boosted trees (a start value plus a scaled sum of trees),
a forest (the mean of its trees), or histogram gradient boosting (a baseline plus a sum of trees;
a classifier applies the logistic function). Each tree is stored as flat arrays (feature,
threshold, children, NaN direction, leaf values). Loading rebuilds scikit-learn's own compiled
tree evaluators from those arrays (never from pickled objects), and the sums run in scikit-learn's
order and dtypes, so predictions equal the fitted estimator's bit for bit. The header records the
scikit-learn, feature-schema and codegen versions; a model whose feature schema or codegen version
is not this code's is refused (`StaleModel`), because its columns would mean other things.
"""
from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

FORMAT = 3
_HEADER = "header.json"


class StaleModel(ValueError):
    """A model file made for another feature schema or code generator: refused, with the reason."""


def codegen_version() -> int:
    from autofuse.codegen import CODEGEN_VERSION
    return CODEGEN_VERSION


# --- the loaded forms: evaluators over arrays -------------------------------------------------------

@dataclass(frozen=True)
class Fill:
    """Columns that were all NaN in training read 0 (FillEmptyColumns)."""

    empty: np.ndarray

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.array(x, dtype=np.float64, copy=True)
        x[:, self.empty] = 0.0
        return x


@dataclass(frozen=True)
class Impute:
    """NaN replaced by the column's training statistic (SimpleImputer)."""

    values: np.ndarray

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.array(x, dtype=np.float64, copy=True)
        rows, cols = np.nonzero(np.isnan(x))
        x[rows, cols] = self.values[cols]
        return x


def _cart_tree(t: Mapping[str, np.ndarray], n_features: int) -> Any:
    """scikit-learn's compiled decision tree, rebuilt from arrays (as its own unpickling does)."""
    from sklearn.tree._tree import NODE_DTYPE, Tree
    n = len(t["left"])
    nodes = np.zeros(n, dtype=NODE_DTYPE)
    nodes["left_child"], nodes["right_child"] = t["left"], t["right"]
    nodes["feature"], nodes["threshold"] = t["feature"], t["threshold"]
    if "missing_go_to_left" in nodes.dtype.names:
        nodes["missing_go_to_left"] = t["missing_left"]
    tree = Tree(n_features, np.array([1], dtype=np.intp), 1)
    tree.__setstate__({"max_depth": int(t["depth"]), "node_count": n, "nodes": nodes,
                       "values": np.asarray(t["value"], dtype=np.float64).reshape(n, 1, 1)})
    return tree


@dataclass(frozen=True)
class CartEnsemble:
    """Gradient-boosted trees ("boost": start + Σ scale·tree) or a forest ("mean": Σ tree / n)."""

    kind: str
    start: float
    scale: float
    trees: tuple[Any, ...]          # scikit-learn Tree objects
    values: tuple[np.ndarray, ...]  # each tree's leaf values

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x32 = np.ascontiguousarray(x, dtype=np.float32)  # scikit-learn's trees compare float32 inputs
        if self.kind == "boost":
            out = np.full(x.shape[0], self.start, dtype=np.float64)
            for tree, v in zip(self.trees, self.values):
                out += self.scale * v[tree.apply(x32)]
            return out
        out = np.zeros(x.shape[0], dtype=np.float64)
        for tree, v in zip(self.trees, self.values):
            out += v[tree.apply(x32)]
        out /= len(self.trees)
        return out


def _hist_tree(t: Mapping[str, np.ndarray]) -> Any:
    from sklearn.ensemble._hist_gradient_boosting.common import PREDICTOR_RECORD_DTYPE
    from sklearn.ensemble._hist_gradient_boosting.predictor import TreePredictor
    nodes = np.zeros(len(t["left"]), dtype=PREDICTOR_RECORD_DTYPE)
    for name, key in (("value", "value"), ("feature_idx", "feature"), ("num_threshold", "threshold"),
                      ("missing_go_to_left", "missing_left"), ("left", "left"), ("right", "right"),
                      ("is_leaf", "is_leaf")):
        nodes[name] = t[key]
    empty = np.zeros((0, 8), dtype=np.uint32)
    return TreePredictor(nodes, empty, empty)


def _threads() -> int:
    """The OpenMP threads scikit-learn itself would use now (threadpool_limits applies)."""
    try:
        from sklearn.utils._openmp_helpers import _openmp_effective_n_threads
        return int(_openmp_effective_n_threads())
    except ImportError:
        return 1


# Below this many rows a tree is evaluated on one thread: each tree's OpenMP region costs more than
# its rows. The tuner ranks a kernel's configs in batches of 40-200 rows; 600 trees over 40 rows
# took 3.7 ms on one thread and 36.8 ms on two (2000 rows: 39 against 118 ms; 2-core host).
ONE_THREAD_ROWS = 10_000


@dataclass(frozen=True)
class HistEnsemble:
    """Histogram gradient boosting: baseline + Σ tree (scikit-learn's compiled tree predictor)."""

    baseline: float
    trees: tuple[Any, ...]
    n_features: int

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float64)
        out = np.zeros((x.shape[0], 1), dtype=np.float64, order="F")
        out += self.baseline
        known = np.zeros((0, 8), dtype=np.uint32)
        f_idx = np.zeros(self.n_features, dtype=np.uint32)
        threads = 1 if x.shape[0] < ONE_THREAD_ROWS else _threads()
        for tree in self.trees:
            out[:, 0] += tree.predict(x, known, f_idx, threads)
        return out[:, 0]


@dataclass(frozen=True)
class LoadedEstimator:
    """A regressor (`predict`) or binary classifier (`predict_proba`) rebuilt from a model file."""

    prepare: Any       # Fill | Impute
    ensemble: Any      # CartEnsemble | HistEnsemble
    classifier: bool = False
    arrays: Mapping[str, Any] | None = None  # what it was loaded from: saved again unchanged

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.ensemble(self.prepare(x))

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        from scipy.special import expit
        raw = self.ensemble(self.prepare(x))
        p = np.empty((raw.shape[0], 2), dtype=raw.dtype)
        p[:, 1] = expit(raw)
        p[:, 0] = 1 - p[:, 1]
        return p


# --- export: a fitted scikit-learn pipeline to arrays -----------------------------------------------

def _export_cart(tree: Any) -> dict[str, np.ndarray]:
    t = tree.tree_
    nodes = t.__getstate__()["nodes"]
    missing = nodes["missing_go_to_left"] if "missing_go_to_left" in nodes.dtype.names else np.zeros(len(nodes), np.uint8)
    return {"left": t.children_left.astype(np.int64), "right": t.children_right.astype(np.int64),
            "feature": t.feature.astype(np.int64), "threshold": t.threshold.astype(np.float64),
            "missing_left": missing.astype(np.uint8), "value": t.value[:, 0, 0].astype(np.float64),
            "depth": np.int64(t.max_depth)}


def _export_hist(pred: Any) -> dict[str, np.ndarray]:
    n = pred.nodes
    if np.any(n["is_categorical"]):
        raise ValueError("categorical splits are not supported in model files")
    return {"left": n["left"].astype(np.int64), "right": n["right"].astype(np.int64),
            "feature": n["feature_idx"].astype(np.int64), "threshold": n["num_threshold"].astype(np.float64),
            "missing_left": n["missing_go_to_left"].astype(np.uint8), "value": n["value"].astype(np.float64),
            "is_leaf": n["is_leaf"].astype(np.uint8)}


def export_estimator(est: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(description, arrays) of a fitted estimator: a two-step pipeline (FillEmptyColumns or
    SimpleImputer, then one of the tree ensembles `model.ESTIMATORS` makes or the pair classifier)."""
    if isinstance(est, LoadedEstimator):
        return dict(est.arrays["spec"]), dict(est.arrays["arrays"])
    from sklearn.ensemble import (ExtraTreesRegressor, GradientBoostingRegressor, HistGradientBoostingClassifier,
                                  HistGradientBoostingRegressor, RandomForestRegressor)
    from sklearn.impute import SimpleImputer
    steps = [s for _, s in est.steps]
    if len(steps) != 2:
        raise ValueError(f"cannot store a pipeline of {len(steps)} steps")
    prep, reg = steps
    arrays: dict[str, np.ndarray] = {}
    spec: dict[str, Any] = {"n_features": int(reg.n_features_in_)}
    if isinstance(prep, SimpleImputer):
        spec["prepare"] = "impute"
        arrays["prepare"] = np.asarray(prep.statistics_, dtype=np.float64)
    elif type(prep).__name__ == "FillEmptyColumns":
        spec["prepare"] = "fill"
        arrays["prepare"] = np.asarray(prep.empty_, dtype=bool)
    else:
        raise ValueError(f"cannot store a {type(prep).__name__} step")
    trees: list[dict[str, np.ndarray]]
    if isinstance(reg, GradientBoostingRegressor):
        if reg.init_ == "zero" or not hasattr(reg.init_, "constant_"):
            raise ValueError("only gradient boosting started from the mean can be stored")
        spec.update(ensemble="boost", start=float(np.asarray(reg.init_.constant_, dtype=np.float64).ravel()[0]),
                    scale=float(reg.learning_rate))
        trees = [_export_cart(t) for t in reg.estimators_[:, 0]]
    elif isinstance(reg, (RandomForestRegressor, ExtraTreesRegressor)):
        spec.update(ensemble="mean")
        trees = [_export_cart(t) for t in reg.estimators_]
    elif isinstance(reg, (HistGradientBoostingRegressor, HistGradientBoostingClassifier)):
        if reg.n_trees_per_iteration_ != 1 or getattr(reg, "is_categorical_", None) is not None:
            raise ValueError("only single-output, non-categorical histogram boosting can be stored")
        spec.update(ensemble="hist", baseline=float(np.asarray(reg._baseline_prediction).ravel()[0]),
                    classifier=isinstance(reg, HistGradientBoostingClassifier))
        if spec["classifier"] and list(reg.classes_) != [0, 1]:
            raise ValueError("only 0/1 classifiers can be stored")
        trees = [_export_hist(p[0]) for p in reg._predictors]
    else:
        raise ValueError(f"cannot store a {type(reg).__name__}")
    spec["trees"] = len(trees)
    for i, t in enumerate(trees):
        for k, v in t.items():
            arrays[f"tree{i}.{k}"] = np.asarray(v)
    return spec, arrays


def load_estimator(spec: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> LoadedEstimator:
    prepare = {"impute": Impute, "fill": Fill}[spec["prepare"]](arrays["prepare"])
    trees = [{k.split(".", 1)[1]: arrays[k] for k in arrays if k.startswith(f"tree{i}.")} for i in range(spec["trees"])]
    n_features = int(spec["n_features"])
    if spec["ensemble"] in ("boost", "mean"):
        ens: Any = CartEnsemble(spec["ensemble"], float(spec.get("start", 0.0)), float(spec.get("scale", 1.0)),
                                tuple(_cart_tree(t, n_features) for t in trees),
                                tuple(np.asarray(t["value"], dtype=np.float64) for t in trees))
    elif spec["ensemble"] == "hist":
        ens = HistEnsemble(float(spec["baseline"]), tuple(_hist_tree(t) for t in trees), n_features)
    else:
        raise ValueError(f"unknown ensemble {spec['ensemble']!r}")
    return LoadedEstimator(prepare, ens, bool(spec.get("classifier", False)),
                           {"spec": dict(spec), "arrays": dict(arrays)})


# --- the file ---------------------------------------------------------------------------------------

def versions() -> dict[str, Any]:
    import sklearn

    from .features import FEATURE_SCHEMA
    return {"sklearn": sklearn.__version__, "feature_schema": FEATURE_SCHEMA, "codegen": codegen_version()}


def dumps(fields: Mapping[str, Any], parts: Mapping[str, Any]) -> bytes:
    """An .npz: header.json (the model's fields, the versions, each part's description) and the
    parts' arrays under "<part>/<name>"."""
    header = {"format": FORMAT, "versions": versions(), "fields": dict(fields), "parts": {}}
    arrays: dict[str, np.ndarray] = {}
    for name, est in parts.items():
        if est is None:
            continue
        spec, arrs = export_estimator(est)
        header["parts"][name] = spec
        arrays.update({f"{name}/{k}": v for k, v in arrs.items()})
    buf = io.BytesIO()
    arrays[_HEADER] = np.frombuffer(json.dumps(header, default=str).encode(), dtype=np.uint8)
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def is_model_file(blob: bytes) -> bool:
    return bytes(blob[:2]) == b"PK"


def loads(blob: bytes) -> tuple[dict[str, Any], dict[str, LoadedEstimator]]:
    """(fields, parts) of a model file; ValueError if it is not one, StaleModel if it is another
    feature schema's or code generator's. Never unpickles (allow_pickle=False)."""
    blob = bytes(blob)
    if not is_model_file(blob):
        what = "a pickle (an older, unsafe format: retrain to replace it)" if blob[:1] == b"\x80" else "not a model file"
        raise ValueError(f"cost model blob is {what}")
    try:
        with np.load(io.BytesIO(blob), allow_pickle=False) as z:
            files = {k: z[k] for k in z.files}
    except (ValueError, OSError, zipfile.BadZipFile) as e:
        raise ValueError(f"damaged cost model file: {e}") from None
    if _HEADER not in files:
        raise ValueError("not an autofuse cost model file (no header)")
    header = json.loads(bytes(files.pop(_HEADER)).decode())
    if header.get("format") != FORMAT:
        raise ValueError(f"cost model file format {header.get('format')!r}, this autofuse reads {FORMAT}")
    theirs, ours = header.get("versions", {}), versions()
    for key, what in (("feature_schema", "feature schema"), ("codegen", "codegen version")):
        if theirs.get(key) != ours[key]:
            raise StaleModel(f"cost model made for {what} {theirs.get(key)}, this autofuse has {ours[key]}: "
                             f"refused (retrain it)")
    parts = {}
    for name, spec in header["parts"].items():
        prefix = f"{name}/"
        parts[name] = load_estimator(spec, {k[len(prefix):]: v for k, v in files.items() if k.startswith(prefix)})
    return dict(header["fields"], versions=theirs), parts

