"""Predictors of kernel time: the interface the tuner ranks candidates with.

A predictor maps kernel feature records (the `features` dicts the tuner stores with each
measurement; no stats) to predicted microseconds. `ByteCountPredictor` needs nothing trained (the
roofline of a memory-bound kernel); `LearnedPredictor` wraps a trained `CostModel`; `load_predictor`
picks the best available for a device without touching the DB until the first prediction.

Note: lookup order in `load_predictor` — the newest cost model stored in the DB for the device, else
the pretrained model shipped in `costmodel/pretrained/<device-slug>.npz`, else byte counts. A model
that fails to load (corrupt blob, a pickle, another feature schema or codegen version, an incompatible
scikit-learn) is skipped with a one-line warning, never raised; no model file ever runs code.
"""
from __future__ import annotations

import json
import re
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Sequence, runtime_checkable

from .features import DEFAULT_COPY_BW
from .model import DEFAULT_LAUNCH_US, CostModel

PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"


@runtime_checkable
class Predictor(Protocol):
    """Predicted time in microseconds of each kernel record, in order. A predictor may also say
    whether it tells one kernel's configs apart (`ranks_configs`, False when absent): the tuner then
    considers more of them (search/candidates.py `candidate_limit`)."""

    def predict_us(self, records: Sequence[dict]) -> list[float]: ...


def _record_bw(record: dict) -> float | None:
    dev = record.get("device") or {}
    bw = dev.get("copy_bw") if isinstance(dev, dict) else None
    return float(bw) if isinstance(bw, (int, float)) and bw > 0 else None


@dataclass(frozen=True)
class ByteCountPredictor:
    """Unique bytes moved over copy bandwidth plus a fixed launch overhead.

    Config-independent by design: candidates that move the same bytes tie, and the caller's
    order (or measurement) decides among them. `copy_bw` None means the record's measured
    device bandwidth, else the H200's.
    """

    copy_bw: float | None = None
    launch_overhead_us: float = DEFAULT_LAUNCH_US
    ranks_configs = False          # every config of a kernel moves the same bytes

    def predict_us(self, records: Sequence[dict]) -> list[float]:
        out = []
        for r in records:
            bw = self.copy_bw or _record_bw(r) or DEFAULT_COPY_BW
            nbytes = float(r.get("bytes_read") or 0) + float(r.get("bytes_written") or 0)
            out.append(nbytes / bw * 1e6 + self.launch_overhead_us)
        return out


@dataclass(frozen=True)
class LearnedPredictor:
    """A trained cost model as a Predictor; byte counts (with a warning) if the model fails to predict,
    e.g. a model pickled by another scikit-learn version — the search must go on."""

    model: "CostModel"
    ranks_configs = True

    def predict_us(self, records: Sequence[dict]) -> list[float]:
        try:
            return [float(t) for t in self.model.predict_us(list(records))]
        except Exception as e:  # noqa: BLE001
            warnings.warn(f"autofuse: cost model {getattr(self.model, 'version', '?')} failed to predict "
                          f"({type(e).__name__}: {e}); using byte counts", stacklevel=2)
            return ByteCountPredictor().predict_us(records)


@dataclass
class GroupContextPredictor:
    """Predicts every record together with all the records of its group (its kernel's other configs)
    seen so far, so that a config predicted alone gets the time it got when its kernel's candidates
    were ranked together.

    Why: a learned model's pair ranker orders a group's configs and hands out the regressor's times in
    that order (`CostModel.predict_us`); a record predicted alone gets the regressor's own time. The
    kernel tuner ranks a kernel's candidates together, but without a GPU its "measurements" and the
    plan totals are single predictions: on softmax the ranker's best config reads 143.8 µs alone
    against the default's 137.3, and a model-only search would keep the default (measured 148 against
    129). A predictor without a ranker predicts each record alone anyway, so this changes nothing there.

    Each group's times are kept until a new record joins it: asking again for configs already ranked
    (the plan totals of every later trial) costs no prediction. The pair ranker scores every pair of a
    group, so without the cache each such ask pays the whole group's ranking again: 1.5 s for 160
    configs on a CPU core, which took the model-only cross-entropy search ranking 160 configs per
    kernel to 95 s against 32 with 48.
    """

    inner: Predictor
    _seen: dict[Any, dict[str, dict]] = field(default_factory=dict, repr=False)
    _times: dict[Any, tuple[int, dict[str, float]]] = field(default_factory=dict, repr=False)  # (records ranked, times)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def ranks_configs(self) -> bool:
        return bool(getattr(self.inner, "ranks_configs", False))

    @staticmethod
    def _ident(record: dict) -> str:
        return json.dumps([record.get("config"), record.get("kernel_fn")], sort_keys=True, default=str)

    def predict_us(self, records: Sequence[dict]) -> list[float]:
        records = list(records)
        alone: list[int] = []                                  # records of no group: predicted as they are
        asked: dict[Any, list[tuple[int, str]]] = {}
        with self._lock:
            for i, r in enumerate(records):
                g = r.get("group") if isinstance(r, dict) else None
                if g is None:
                    alone.append(i)
                    continue
                ident = self._ident(r)
                self._seen.setdefault(g, {}).setdefault(ident, r)
                asked.setdefault(g, []).append((i, ident))
            stale = {g: list(self._seen[g].items()) for g in asked
                     if self._times.get(g, (0, {}))[0] != len(self._seen[g])}
        batch = [r for items in stale.values() for _, r in items]
        preds = list(self.inner.predict_us([records[i] for i in alone] + batch)) if alone or batch else []
        out: list[float] = [0.0] * len(records)
        for i, t in zip(alone, preds):
            out[i] = t
        pos = len(alone)
        with self._lock:
            fresh: dict[Any, dict[str, float]] = {}
            for g, items in stale.items():
                fresh[g] = {ident: preds[pos + k] for k, (ident, _) in enumerate(items)}
                pos += len(items)
                if len(items) >= self._times.get(g, (0, {}))[0]:   # never replaced by an older ranking
                    self._times[g] = (len(items), fresh[g])
            for g, items in asked.items():
                times = fresh.get(g) or self._times[g][1]
                for i, ident in items:
                    out[i] = times[ident]
        return out


def device_slug(device: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200': the file name of a device's pretrained model."""
    return re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-") or "unknown"


def pretrained_path(device: str) -> Path:
    """The shipped model file of a device (`model_file` format; its .json beside it says how it was made)."""
    return PRETRAINED_DIR / f"{device_slug(device)}.npz"


def _load_blob(blob: bytes, where: str) -> "CostModel | None":
    try:
        return CostModel.from_bytes(blob)
    except ValueError as e:  # a refused model (stale, a pickle, damaged) says why in its message
        warnings.warn(f"autofuse: ignoring the cost model in {where}: {e}", stacklevel=3)
        return None
    except Exception as e:  # noqa: BLE001 - any loading problem means "no usable model"
        warnings.warn(f"autofuse: ignoring the cost model in {where}: {type(e).__name__}: {e}", stacklevel=3)
        return None


def resolve_predictor(db: Any, device: str) -> Predictor:
    """The best predictor available now for `device` (see the module note for the order)."""
    if db is not None:
        try:
            row = db.latest_cost_model(device)
        except Exception as e:  # noqa: BLE001 - a DB problem must not stop the tuner
            warnings.warn(f"autofuse: cannot read cost models from the tuning DB: {e}", stacklevel=2)
            row = None
        if row is not None:
            model = _load_blob(row["blob"], f"the tuning DB (version {row.get('version')})")
            if model is not None:
                return LearnedPredictor(model)
    path = pretrained_path(device)
    if path.is_file():
        model = _load_blob(path.read_bytes(), str(path))
        if model is not None:
            return LearnedPredictor(model)
    return ByteCountPredictor()


@dataclass
class LazyPredictor:
    """Resolves `resolve_predictor(db, device)` on first use (unpickling a model costs time)."""

    db: Any
    device: str
    _resolved: Predictor | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def resolve(self) -> Predictor:
        with self._lock:
            if self._resolved is None:
                self._resolved = resolve_predictor(self.db, self.device)
            return self._resolved

    def predict_us(self, records: Sequence[dict]) -> list[float]:
        return self.resolve().predict_us(records)

    @property
    def ranks_configs(self) -> bool:
        return bool(getattr(self.resolve(), "ranks_configs", False))


def load_predictor(db: Any, device: str) -> Predictor:
    """A predictor for `device` backed by `db` (a TuningDB, or None), loaded lazily."""
    return LazyPredictor(db, device)
