"""Fault injection on the CPU: the search never raises on a candidate, unusable databases and
broken plan or model files end a command with one line and leave the files as they were."""
from __future__ import annotations

import random

import pytest
import torch

import autofuse
from autofuse.measure.timing import FakeBenchmarker
from autofuse.plan.space import build_space, multi_use_values
from autofuse.schedule.heuristics import Heuristics
from autofuse.search.graph_tuner import TuneSettings
from autofuse.search.kernels import TunerSettings
from autofuse.search.tune import capture
from tests.helpers import rand


def softmax_and_centered(x):
    return torch.softmax(x, -1), x - x.mean(-1, keepdim=True)


def flat_cost(rec):
    return 10.0 + (rec["config"]["num_warps"] != 4)


def fake_settings(db, **kw):
    return TuneSettings(db=str(db), progress=False, compare_torch_compile=False, finalists=2, runner_ups=0,
                        rounds=1, kernel=TunerSettings(top_k=1, explore=0.0, refine=0), **kw)


def test_every_choice_of_legal_pairs_gives_an_acyclic_plan():
    """Two legal merges can close a cycle through a third group; plan_from_choices skips the second."""
    (_, gm, args), = capture(softmax_and_centered, [rand((8, 32))])
    heur = Heuristics()
    rng = random.Random(0)
    for realize in (True, False):
        space = build_space(gm, args, heur, {n: realize for n in multi_use_values(gm, args, heur)})
        for _ in range(200):
            plan = space.plan_from_choices([c for c in space.legal if rng.random() < 0.5])
            assert sum(len(k.nodes) for k in plan.kernels) == len(space.nodes)


def test_tune_of_softmax_and_centering_completes(tmp_path):
    res = autofuse.tune(softmax_and_centered, [rand((8, 32))], settings=fake_settings(tmp_path / "t.db", trials=40),
                        benchmarker=FakeBenchmarker(flat_cost))
    g = res.graphs[0]
    assert g.stored_id is not None and g.trials >= 40


def _states(db, g):
    import optuna
    from autofuse.search.study import study_name
    study = optuna.load_study(study_name=study_name(g.graph_hash, g.device), storage=f"sqlite:///{db}")
    return [t.state.name for t in study.get_trials(deepcopy=False)], study


def test_a_failing_candidate_scores_infinity_with_its_reason(tmp_path, monkeypatch):
    from autofuse.search import study as study_mod
    real = study_mod.SpaceCache.suggest
    calls = {"n": 0}

    def flaky(self, trial):
        calls["n"] += 1
        if calls["n"] % 3 == 0:
            raise RuntimeError("planted failure of a candidate")
        return real(self, trial)
    monkeypatch.setattr(study_mod.SpaceCache, "suggest", flaky)
    res = autofuse.tune(softmax_and_centered, [rand((8, 32))], settings=fake_settings(tmp_path / "t.db", trials=12),
                        benchmarker=FakeBenchmarker(flat_cost))
    g = res.graphs[0]
    assert g.stored_id is not None
    assert any("planted failure" in why for _, why in g.failures)
    states, study = _states(tmp_path / "t.db", g)
    assert "RUNNING" not in states
    assert any("planted failure" in t.user_attrs.get("error", "") for t in study.get_trials(deepcopy=False))


def test_a_search_that_raises_keeps_the_best_plan_and_leaves_no_trial_running(tmp_path, monkeypatch):
    from autofuse.search.evaluate import PlanEvaluator
    real = PlanEvaluator.evaluate
    calls = {"n": 0}

    def breaking(self, plan):
        calls["n"] += 1
        if calls["n"] == 6:
            raise MemoryError("planted crash in the search")
        return real(self, plan)
    monkeypatch.setattr(PlanEvaluator, "evaluate", breaking)
    db = tmp_path / "t.db"
    res = autofuse.tune(softmax_and_centered, [rand((8, 32))], settings=fake_settings(db, trials=20),
                        benchmarker=FakeBenchmarker(flat_cost))
    g = res.graphs[0]
    assert g.stored_id is not None and any("planted crash" in why for _, why in g.failures)
    states, _ = _states(db, g)
    assert "RUNNING" not in states and "FAIL" in states and states.count("COMPLETE") >= 3
    monkeypatch.setattr(PlanEvaluator, "evaluate", real)
    again = autofuse.tune(softmax_and_centered, [rand((8, 32))],
                          settings=fake_settings(db, trials=20, resume=True), benchmarker=FakeBenchmarker(flat_cost))
    states, _ = _states(db, g)
    assert states.count("COMPLETE") >= 20 and again.graphs[0].stored_id is not None


def test_resume_fails_the_running_trial_of_a_dead_tune(tmp_path):
    import subprocess
    import sys
    db = tmp_path / "t.db"
    res = autofuse.tune(softmax_and_centered, [rand((8, 32))], settings=fake_settings(db, trials=4),
                        benchmarker=FakeBenchmarker(flat_cost))
    _, study = _states(db, res.graphs[0])
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    from autofuse.search.study import worker_id
    host = worker_id().rpartition(":")[0]
    orphan = study.ask()
    orphan.set_user_attr("worker", f"{host}:{int(dead.stdout)}")   # a process that no longer exists
    autofuse.tune(softmax_and_centered, [rand((8, 32))], settings=fake_settings(db, trials=6, resume=True),
                  benchmarker=FakeBenchmarker(flat_cost))
    states, study = _states(db, res.graphs[0])
    assert "RUNNING" not in states
    assert study.get_trials(deepcopy=False)[orphan.number].state.name == "FAIL"
