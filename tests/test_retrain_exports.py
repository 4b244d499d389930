"""benchmarks/retrain_exports.py (CPU): exports are imported into a fresh DB together with the shipped
model as the current one, then `autofuse retrain` runs on it; an existing DB path is refused."""
import json

from benchmarks import retrain_exports as rx
from costmodel.predict import pretrained_path
from tests.test_costmodel import DATA
from tuning_db import TuningDB


def test_build_db_imports_the_exports_and_the_shipped_model(tmp_path):
    n = rx.build_db(tmp_path / "r.db", [DATA, DATA])    # the second import adds nothing (same keys)
    with TuningDB.open(str(tmp_path / "r.db")) as db:
        assert n == len(db.measurements()) > 100
        shipped = json.loads(pretrained_path(rx.DEVICE).with_suffix(".json").read_text())["version"]
        assert db.latest_cost_model(rx.DEVICE)["version"] == shipped


def test_main_retrains_and_refuses_an_existing_db(tmp_path, capsys):
    db = tmp_path / "r.db"
    assert rx.main([str(DATA), "--db", str(db), "--estimator", "et", "--no-compile"]) == 0
    out = capsys.readouterr().out
    assert "imported" in out and "pairwise accuracy" in out and "stored" in out
    assert rx.main([str(DATA), "--db", str(db)]) == 2
    assert "exists" in capsys.readouterr().err


def test_force_is_passed_to_retrain(tmp_path, monkeypatch):
    """--force reaches `autofuse retrain` (a model scoring worse is stored anyway); without it, not."""
    seen = []
    monkeypatch.setattr("costmodel.cli.main", lambda argv: seen.append(argv) or 0)
    assert rx.main([str(DATA), "--db", str(tmp_path / "a.db"), "--force"]) == 0
    assert rx.main([str(DATA), "--db", str(tmp_path / "b.db")]) == 0
    assert "--force" in seen[0] and "--force" not in seen[1]
