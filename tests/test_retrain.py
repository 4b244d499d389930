"""Retrain keeps the better model (the shipped one counts as current when the DB has none),
`retrain --from-export` trains on measurement exports, and model files are data: every estimator
round-trips with identical predictions, a pickle is never loaded, a stale model is refused."""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from costmodel import model_file
from costmodel.cli import main as costmodel_main
from costmodel.model import CostModel, fit
from costmodel.predict import ByteCountPredictor, LearnedPredictor, pretrained_path, resolve_predictor
from costmodel.synth import H200
from costmodel.train import RetrainOptions, retrain
from tests.test_costmodel import DATA, _db, dataset, dataset_db  # noqa: F401 - the cost-model fixtures
from tuning_db import TuningDB

FAST = RetrainOptions(estimator="et", compile=False, ranker=False)  # a fit in a fraction of a second
DEV = H200["name"]


@pytest.fixture
def shipped_dir(tmp_path, monkeypatch):
    import costmodel.predict as predict
    d = tmp_path / "pretrained"
    d.mkdir()
    monkeypatch.setattr(predict, "PRETRAINED_DIR", d)
    return d


def _ship(model: CostModel, device: str = DEV) -> None:
    path = pretrained_path(device)
    path.write_bytes(model.to_bytes())
    path.with_suffix(".json").write_text(json.dumps({"version": model.version, "trained_on": {"split_seed": 0}}))


def test_a_worse_model_is_not_put_in_use_over_the_shipped_one(tmp_path, dataset, shipped_dir):
    """30 measurements of 3 graphs train a poor model; the shipped one (trained on all graphs) stays."""
    shipped = fit(dataset, "et", compile=False, ranker=False)
    _ship(shipped)
    graphs = sorted({r["features"]["graph"] for r in dataset})[:3]
    few = [r for r in dataset if r["features"]["graph"] in graphs][:30]
    with _db(tmp_path, rows=few) as db:
        r = retrain(db, options=RetrainOptions(estimator="et", compile=False, test_fraction=0.34, ranker=False))
        assert not r.stored and r.current is not None and "the shipped" in r.current_version
        assert r.message.startswith("kept the current model") or "kept the current model" in r.message
        assert "pairwise accuracy" in r.message or "log-time error" in r.message
        assert db.latest_cost_model(DEV) is None
        used = resolve_predictor(db, DEV)
        assert isinstance(used, LearnedPredictor) and used.model.version == shipped.version
        forced = retrain(db, force=True, options=RetrainOptions(estimator="et", compile=False, test_fraction=0.34,
                                                                ranker=False))
        assert forced.stored and "forced" in forced.message
        assert resolve_predictor(db, DEV).model.version == forced.model.version


def test_a_better_model_replaces_the_shipped_one_and_says_why(tmp_path, dataset, dataset_db, shipped_dir):
    graphs = sorted({r["features"]["graph"] for r in dataset})[:2]
    weak = fit([r for r in dataset if r["features"]["graph"] in graphs], "et", compile=False, ranker=False)
    _ship(weak)
    with _db(tmp_path, dataset_db) as db:
        r = retrain(db, options=FAST)
        assert r.stored and r.current is not None and r.new.pairwise > r.current.pairwise
        assert "now the one in use" in r.message and "pairwise accuracy" in r.message
        assert resolve_predictor(db, DEV).model.version == r.model.version


def test_retrain_from_export_imports_trains_and_ships(tmp_path, shipped_dir, capsys):
    db = tmp_path / "r.db"
    argv = ["retrain", "--from-export", str(DATA), str(DATA), "--db", str(db), "--estimator", "et", "--no-compile",
            "--no-ranker"]
    assert costmodel_main(argv + ["--ship"]) == 0
    out = capsys.readouterr().out
    assert "imported" in out and "pairwise accuracy" in out and "stored" in out and "shipped" in out
    with TuningDB.open(str(db)) as d:
        n = len(d.measurements())
        stored = d.latest_cost_model(DEV)["version"]
    assert out.count("imported") == 1 and f"imported {n} measurements" in out   # the second copy adds nothing
    meta = json.loads(pretrained_path(DEV).with_suffix(".json").read_text())
    assert meta["version"] == stored and meta["command"].startswith("python -m autofuse retrain --from-export ")
    assert CostModel.from_bytes(pretrained_path(DEV).read_bytes()).version == stored
    assert costmodel_main(argv) == 2 and "exists" in capsys.readouterr().err      # a fresh DB only
    assert costmodel_main(["retrain", "--ship"]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kernel_key": 1}\n')
    assert costmodel_main(["retrain", "--from-export", str(bad), "--db", str(tmp_path / "b.db")]) == 2
    assert "bad.jsonl:1: not a measurement" in capsys.readouterr().err


def test_the_shipped_model_records_the_products_command():
    meta = json.loads(pretrained_path("cuda:NVIDIA H200:sm90").with_suffix(".json").read_text())
    assert meta["command"].startswith("python -m autofuse retrain --from-export ") and "benchmarks" not in meta["command"]


# --- model files ------------------------------------------------------------------------------------

@pytest.mark.parametrize("estimator", ["hgb", "gbr", "rf", "et"])
def test_every_estimator_round_trips_with_identical_predictions(estimator, dataset, monkeypatch):
    from costmodel.features import feature_matrix
    from costmodel.rank import RANKER_PARAMS
    monkeypatch.setitem(RANKER_PARAMS, "max_iter", 40)   # a small pair classifier: the same code, quicker
    rows = dataset[:300]
    model = fit(rows, estimator, compile=False, ranker=estimator == "hgb")
    again = CostModel.from_bytes(model.to_bytes())
    assert again == model and isinstance(again.estimator, model_file.LoadedEstimator)
    recs = [r["features"] for r in dataset]
    assert np.array_equal(again.predict_log_us(recs), model.predict_log_us(recs))
    x = feature_matrix(recs, compile=False)
    x[::7, 3] = np.nan
    from costmodel.model import REGRESSOR_NAMES, columns
    xr = columns(x, REGRESSOR_NAMES)
    assert np.array_equal(again.estimator.predict(xr), model.estimator.predict(xr))
    if model.ranker is not None:
        a, b = np.arange(0, 200), np.arange(100, 300)
        pr = model.ranker.pair_rows(x, a, b)
        assert np.array_equal(again.ranker.estimator.predict_proba(pr), model.ranker.estimator.predict_proba(pr))
    assert CostModel.from_bytes(again.to_bytes()).to_bytes() == again.to_bytes()   # saved again unchanged


def test_the_shipped_model_file_loads_without_pickle():
    path = pretrained_path("cuda:NVIDIA H200:sm90")
    assert path.suffix == ".npz" and not path.with_suffix(".pkl").exists()
    model = CostModel.from_bytes(path.read_bytes())
    meta = json.loads(path.with_suffix(".json").read_text())
    assert model.version == meta["version"] and model.ranker is not None
    assert set(model.trained_on["versions"]) == {"sklearn", "feature_schema", "codegen"}


class _Planted:
    """Unpickling this creates a file: the proof that a blob was unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def test_a_pickle_is_never_loaded(tmp_path, dataset):
    marker = tmp_path / "ran"
    blob = pickle.dumps({"format": 2, "model": _Planted(str(marker))})
    with pytest.raises(ValueError, match="pickle"):
        CostModel.from_bytes(blob)
    assert not marker.exists()
    with pytest.warns(UserWarning, match="pickle"):
        p = resolve_predictor(_OneModel(blob), "NVIDIA A100")
    assert isinstance(p, ByteCountPredictor) and not marker.exists()


class _OneModel:
    def __init__(self, blob: bytes) -> None:
        self.blob = blob

    def latest_cost_model(self, device):
        return {"blob": self.blob, "version": "v"}


@pytest.mark.parametrize("key", ["feature_schema", "codegen"])
def test_a_model_of_another_feature_schema_or_codegen_is_refused_in_one_line(key, dataset, monkeypatch):
    model = fit(dataset, "et", compile=False, ranker=False)
    real = model_file.versions
    monkeypatch.setattr(model_file, "versions", lambda: dict(real(), **{key: -1}))
    old = model.to_bytes()
    monkeypatch.setattr(model_file, "versions", real)
    with pytest.raises(model_file.StaleModel, match="refused"):
        CostModel.from_bytes(old)
    with pytest.warns(UserWarning) as caught:
        p = resolve_predictor(_OneModel(old), "NVIDIA A100")
    assert isinstance(p, ByteCountPredictor)
    (w,) = [w for w in caught if "cost model" in str(w.message)]
    assert "\n" not in str(w.message) and "retrain" in str(w.message)


@pytest.mark.parametrize("blob", [b"", b"PK\x03\x04garbage", b"not a model"])
def test_damaged_model_files_are_value_errors(blob):
    with pytest.raises(ValueError):
        CostModel.from_bytes(blob)


def test_a_db_export_is_an_export_its_other_rows_skipped(tmp_path, dataset_db):
    """`autofuse db export` writes a header, graphs and plans beside the measurements: retrain takes
    the measurements."""
    from costmodel.exports import import_exports
    from autofuse.cli import main as autofuse_main
    out = tmp_path / "all.jsonl"
    with TuningDB.open(str(dataset_db)) as d:
        n = len(d.measurements())
    assert autofuse_main(["db", "--db", str(dataset_db), "export", str(out)]) == 0
    kinds = {json.loads(line).get("kind") for line in out.read_text().splitlines() if line.strip()}
    assert "measurement" in kinds and len(kinds) > 1
    with TuningDB.open(str(tmp_path / "fresh.db")) as fresh:
        assert import_exports(fresh, [out]) == n
