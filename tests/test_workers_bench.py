"""The several-workers benchmark (`benchmarks/workers.py`): its runs split each study's trial budget
and leave no trial running, on a tiny model in the interpreter."""
import json

import pytest

pytest.importorskip("transformers")


def test_two_workers_split_each_studys_trials_and_the_table_says_so(tmp_path):
    from benchmarks import workers
    out = tmp_path / "w"
    assert workers.main(["--out", str(out), "--model", "bert", "--tiny", "--trials", "4", "--workers", "1,2",
                         "--device", "cpu"]) == 0
    results = json.loads((out / "results.json").read_text())
    one, two = results["runs"]
    for run in (one, two):
        assert run["graphs"] == 1 and run["trials"] == {"COMPLETE": 4}   # the budget, no trial lost or running
        assert run["plans"] == run["workers"] and not run["errors"]
        assert run["tune_s"] > 0 and run["wall_s"] >= run["tune_s"]
    assert list(one["complete_by_worker"][0].values()) == [4]
    assert sum(two["complete_by_worker"][0].values()) == 4   # split between the workers as they came
    table = (out / "results.md").read_text()
    assert "| 2 |" in table and "2 workers: tune time" in table
