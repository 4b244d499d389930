"""The search (autofuse tune) on the CPU under a deterministic fake timer: a planted optimum is
found, measurements are stored once and reused, failures score infinity and are reported, a wrong
plan never wins, Ctrl-C keeps the best plan and resume continues, two workers share one study."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace

import pytest
import torch

import autofuse
from autofuse.measure.timing import FakeBenchmarker, Timing
from autofuse.measure.verify import compare
from autofuse.search import finalists as finalists_mod
from autofuse.search.finalists import Finalist, pick
from autofuse.search.graph_tuner import TuneSettings
from autofuse.search.candidates import DEFAULT_CANDIDATES, RANKED_CANDIDATES, best_config
from autofuse.search.settings import KernelTuneSettings
from autofuse.search.study import study_name
from tests.helpers import rand, seed_fn
from tests.test_tuning_db import db_url, pg_admin_url  # noqa: F401 - the tuning DB's backend fixtures
from tuning_db import TuningDB

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def byte_count_ranking(monkeypatch):
    """Rank configs by byte counts, as on the CPU, on every device: the planted costs are the fake
    timer's, and a shipped learned model (the GPU's default) would pick other top-k configs."""
    from costmodel.predict import ByteCountPredictor
    monkeypatch.setattr("autofuse.search.graph_tuner.load_predictor", lambda db, dev: ByteCountPredictor())


def seed_args(device):
    return (rand((24, 40), device=device), rand((40,), device=device), rand((40,), device=device),
            rand((40,), device=device))


def planted_cost(rec):
    """10 us per kernel; a mean kernel that computes relu inline costs 30 more; num_warps != 2 costs 7.
    The optimum realizes relu in its own kernel and fuses mean with the epilogue (no default plan does)."""
    us = 10.0
    if "mean" in rec["nodes"] and "< 0, 0," in rec["source"]:
        us += 30
    if rec["config"]["num_warps"] != 2:
        us += 7
    return us


def planted_optimum(plan) -> bool:
    """Two kernels: the mean fused with the epilogue, reading relu's values from a buffer (relu, or
    the sum p + q computed from it, realized by the other kernel) instead of computing relu inline."""
    groups = [set(k.nodes) for k in plan.kernels]
    return (len(groups) == 2 and any({"mean", "output"} <= g for g in groups)
            and not any({"relu", "mean"} <= g for g in groups) and bool({"relu", "add_1"} & set(plan.realize)))


def settings(db, **kw):
    """top_k 8: on the GPU the relu kernel's first num_warps=2 candidate is the 8th (its default is
    XBLOCK 1024 at 8 warps, and the pointwise `.cs` family interleaves), so the planted optimum needs
    7 ranked configs there; on the CPU (interpreter defaults) fewer."""
    kw.setdefault("trials", 16)
    return TuneSettings(db=str(db), progress=False, compare_torch_compile=False,
                        kernel=KernelTuneSettings(top_k=kw.pop("top_k", 8), explore=0.0, refine=kw.pop("refine", 0)), **kw)


def kernel_calls(fb):
    return [c for c in fb.calls if c.get("kind") in ("pointwise", "reduction")]


def test_planted_optimum_found_and_stored(tmp_path, device):
    fb = FakeBenchmarker(planted_cost)
    args = seed_args(device)
    res = autofuse.tune(seed_fn, args, settings=settings(tmp_path / "t.db"), benchmarker=fb)
    g = res.graphs[0]
    assert planted_optimum(g.plan), g.plan.dumps()
    assert all(k.config.num_warps == 2 for k in g.plan.kernels)
    tuned = next(r for r in g.rows if r.variant == "autofuse tuned")
    default = next(r for r in g.rows if r.variant == "autofuse inductor")
    assert tuned.us == pytest.approx(2 * 10 + 2 * 1.0)       # two kernels + launch term of the fake
    assert default.us == pytest.approx(10 + 30 + 7 + 1.0)     # one kernel, relu inline, default warps
    assert g.source == "tuned" and g.stored_id is not None
    # the stored plan is what autofuse.compile now uses, and it computes the right values
    rec = autofuse.api.Recorder()
    f = autofuse.compile(seed_fn, db=str(tmp_path / "t.db"), on_miss="error", recorder=rec, poison=True)
    assert compare(f(*args), seed_fn(*args)) is None
    assert rec.graphs[0][2].plan.kernels == g.plan.kernels
    assert rec.graphs[0][2].source == "tuning DB"
    assert "autofuse tuned" in res.report()


def test_db_contents_and_measured_once(tmp_path, device):
    db_path = tmp_path / "t.db"
    fb = FakeBenchmarker(planted_cost)
    args = seed_args(device)
    res = autofuse.tune(seed_fn, args, settings=settings(db_path, trials=12), benchmarker=fb)
    g = res.graphs[0]
    with TuningDB.open(db_path) as db:
        ms = db.measurements()
        assert len(ms) == g.new_measurements == len(kernel_calls(fb)) > 0
        keys = {m["kernel_key"] for m in ms}
        assert len(keys) == len(ms)                           # no kernel measured twice
        for m in ms:
            f = m["features"]
            assert f["graph"] == g.graph_hash and f["group"] and f["kind"] in ("pointwise", "reduction")
            assert "def KERNEL(" in f["source"] and f["signature"] and f["config"]["XBLOCK"] >= 1
            assert m["stats"]["median_us"] == pytest.approx(planted_cost(f)) and m["stats"]["error"] is None
        plans = db.plans(g.graph_hash)
        assert len(plans) == 1 and plans[0].source == "tuned" and plans[0].time_us == pytest.approx(22.0)
        assert {"autofuse inductor", "autofuse tvm", "autofuse tuned"} <= set(plans[0].baselines)
    import optuna
    study = optuna.load_study(study_name=study_name(g.graph_hash, g.device), storage=f"sqlite:///{db_path}")
    assert len(study.trials) == 12
    assert {t.user_attrs.get("baseline") for t in study.trials[:3]} == {"inductor", "tvm", "none"}
    # a second tune measures nothing again: every kernel's time comes from the DB
    fb2 = FakeBenchmarker(planted_cost)
    res2 = autofuse.tune(seed_fn, args, settings=settings(db_path, trials=12), benchmarker=fb2)
    assert kernel_calls(fb2) == [] and res2.graphs[0].new_measurements == 0
    assert res2.graphs[0].reused_measurements > 0 and "reused from the DB" in res2.report()
    assert planted_optimum(res2.graphs[0].plan)


class FailingBench(FakeBenchmarker):
    """Configs with 16 warps fail as if they ran out of resources."""

    def time(self, fn, what):
        if what.get("kind") in ("pointwise", "reduction") and what["config"]["num_warps"] == 16:
            raise RuntimeError("out of resource: shared memory, Required: 262144, Hardware limit: 232448")
        return super().time(fn, what)


class _BiasedAttention(torch.nn.Module):
    """Attention whose additive mask is a parameter (T5's relative position bias)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(64, 192)
        self.bias = torch.nn.Embedding(32, 4)

    def forward(self, x):
        n = x.shape[1]
        q, k, v = self.proj(x).view(x.shape[0], n, 3, 4, 16).permute(2, 0, 3, 1, 4)
        pos = torch.arange(n, device=x.device)
        mask = self.bias((pos[None, :] - pos[:, None]).abs()).permute(2, 0, 1)[None].expand(x.shape[0], 4, n, n)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask.contiguous(), scale=1.0)


def test_an_inference_graph_with_parameters_is_tuned_without_recording_gradients(tmp_path, device):
    """The graph's ATen ops run as captured (no grad): attention refuses a mask that requires grad."""
    torch.manual_seed(0)
    model = _BiasedAttention().to(device)
    x = rand((2, 16, 64), device=device)
    res = autofuse.tune(model, (x,), settings=settings(tmp_path / "t.db", trials=2), benchmarker=FakeBenchmarker(planted_cost))
    assert res.errors == [] and len(res.graphs) == 1


def test_failing_kernels_scored_infinity_and_reported(tmp_path, device):
    db_path = tmp_path / "t.db"
    fb = FailingBench(planted_cost)
    res = autofuse.tune(seed_fn, seed_args(device), settings=settings(db_path, trials=6, top_k=40), benchmarker=fb)
    g = res.graphs[0]
    fails = [e for _, e in g.failures if "out of resource" in e]
    assert fails, g.failures
    assert "failures" in res.report()
    with TuningDB.open(db_path) as db:
        bad = [m for m in db.measurements() if m["stats"]["error"]]
    assert bad and all(m["features"]["config"]["num_warps"] == 16 and m["stats"]["median_us"] is None for m in bad)
    assert all(k.config.num_warps != 16 for k in g.plan.kernels)
    assert g.stored_id is not None


def test_wrong_plan_is_never_stored(tmp_path, device, monkeypatch):
    real_verify = finalists_mod.verify

    def verify(f, gm, args, expected, options, reference=None):
        real_verify(f, gm, args, expected, options, reference)
        if "relu" in f.plan.realize:                     # pretend the optimum computes wrong values
            f.error = "output[0]: wrong values (max abs error 1, tolerance rtol=0.0001 atol=0.0001)"

    monkeypatch.setattr("autofuse.search.graph_tuner.verify", verify)
    fb = FakeBenchmarker(planted_cost)
    res = autofuse.tune(seed_fn, seed_args(device), settings=settings(tmp_path / "t.db"), benchmarker=fb)
    g = res.graphs[0]
    assert "relu" not in g.plan.realize
    assert any("rejected: output[0]: wrong values" in e for _, e in g.failures)
    with TuningDB.open(tmp_path / "t.db") as db:
        assert all("relu" not in json.loads(p.plan_json)["realize"] for p in db.plans(g.graph_hash))


def _bf16_cancellation(x):
    y = x * 1000.0
    return (y + 1.0) - y     # eager rounds y + 1 to bf16 (spacing 4 there): 0 or 4; exactly 1


def test_a_plan_nearer_the_float64_result_than_eager_is_stored(tmp_path, device):
    """Eager rounds every bf16 intermediate, a kernel keeps them in f32: the default plan's values lie
    outside the bf16 tolerance of eager's but nearer the float64 result, so it is verified and
    stored, and `autofuse.compile(on_miss="error")` finds it."""
    x = (rand((257, 33), device=device) + 0.5).to(torch.bfloat16)
    assert (_bf16_cancellation(x).double() - 1).abs().max() >= 1
    res = autofuse.tune(_bf16_cancellation, (x,), settings=settings(tmp_path / "t.db", trials=2),
                        benchmarker=FakeBenchmarker(planted_cost))
    g = res.graphs[0]
    assert g.stored_id is not None, g.why
    f = autofuse.compile(_bf16_cancellation, db=str(tmp_path / "t.db"), on_miss="error")
    assert (f(x).double() - 1).abs().max() < 0.01


def test_check_outputs_keeps_rejecting_a_result_further_from_float64_than_eager():
    from autofuse.measure.verify import check_outputs
    exact = torch.linspace(-4, 4, 1001, dtype=torch.float64)
    eager = (exact + 0.2).to(torch.bfloat16)
    assert check_outputs((exact + 0.01).to(torch.bfloat16), eager, lambda: exact) is None
    why = check_outputs((exact - 0.5).to(torch.bfloat16), eager, lambda: exact)
    assert why is not None and "float64" in why
    assert check_outputs((exact - 0.5).to(torch.bfloat16), eager) is not None and \
        "float64" not in check_outputs((exact - 0.5).to(torch.bfloat16), eager)


def test_pick_needs_more_than_noise():
    inc = Finalist("default", None, rounds_us=[100.0, 101.0, 104.0])
    close = Finalist("tuned", None, rounds_us=[99.0, 100.0, 98.5])
    far = Finalist("tuned", None, rounds_us=[80.0, 81.0, 80.5])
    wrong = Finalist("tuned", None, rounds_us=[10.0], error="wrong values")
    assert pick(inc, [close])[0] is inc and "spread" in pick(inc, [close])[1]
    assert pick(inc, [far, wrong])[0] is far
    assert pick(inc, [wrong])[0] is inc


def test_a_close_challenger_wins_only_in_every_one_of_nine_paired_rounds():
    from autofuse.search.finalists import CONFIRM_MIN_ROUNDS, needs_confirmation, time_rounds
    inc = Finalist("default", None, rounds_us=[100.0, 101.0, 104.0])
    close = Finalist("tuned", None, rounds_us=[99.0, 100.0, 98.5])
    assert needs_confirmation(inc, [close]) is close
    inc.rounds_us += [100.2] * (CONFIRM_MIN_ROUNDS - 3)
    close.rounds_us += [100.0] * (CONFIRM_MIN_ROUNDS - 3)
    winner, why = pick(inc, [close])
    assert winner is close and f"all {CONFIRM_MIN_ROUNDS} paired rounds" in why
    assert needs_confirmation(inc, [close]) is None       # decided: no more rounds
    close.rounds_us[-1] = 100.3                            # one round lost: noise, keep the default
    winner, why = pick(inc, [close])
    assert winner is inc and "in 8 of 9 paired rounds" in why

    class Order:   # records the order candidates are timed in
        measures = True

        def __init__(self):
            self.seen = []

        def time(self, fn, what):
            self.seen.append(what["plan"])
            return type("T", (), {"median_us": 1.0, "measured": True})()
    plans = [type("P", (), {"to_json": lambda self, n=n: n})() for n in "abc"]
    fs = [Finalist(n, p, program=lambda a: None) for n, p in zip("abc", plans)]
    bench = Order()
    time_rounds(fs, [], bench, 3)
    assert "".join(bench.seen) == "abcbcacab"


class InterruptingBench(FakeBenchmarker):
    def __init__(self, cost, after):
        super().__init__(cost)
        self.after = after

    def time(self, fn, what):
        if what.get("kind") in ("pointwise", "reduction") and len(kernel_calls(self)) >= self.after:
            raise KeyboardInterrupt
        return super().time(fn, what)


def test_ctrl_c_keeps_best_and_resume_continues(tmp_path, device):
    db_path = tmp_path / "t.db"
    args = seed_args(device)
    fb = InterruptingBench(planted_cost, after=12)
    res = autofuse.tune(seed_fn, args, settings=settings(db_path, trials=24), benchmarker=fb)
    g = res.graphs[0]
    assert res.interrupted and g.interrupted and "interrupted" in res.report()
    assert g.stored_id is not None                              # the best verified plan so far is stored
    with TuningDB.open(db_path) as db:
        n_before = len(db.measurements())
        assert n_before == 12                                   # what was measured is kept
    import optuna
    study = optuna.load_study(study_name=study_name(g.graph_hash, g.device), storage=f"sqlite:///{db_path}")
    done_before = len([t for t in study.trials if t.state.name == "COMPLETE"])
    assert done_before < 24
    fb2 = FakeBenchmarker(planted_cost)
    res2 = autofuse.tune(seed_fn, args, settings=settings(db_path, trials=32, resume=True), benchmarker=fb2)
    study = optuna.load_study(study_name=study_name(g.graph_hash, g.device), storage=f"sqlite:///{db_path}")
    assert len([t for t in study.trials if t.state.name == "COMPLETE"]) == 32
    measured_again = {json.dumps(c["config"], sort_keys=True) + c["source"] for c in kernel_calls(fb2)}
    with TuningDB.open(db_path) as db:
        first = {json.dumps(m["features"]["config"], sort_keys=True) + m["features"]["source"]
                 for m in db.measurements()[:n_before]}
    assert not (measured_again & first)                         # nothing measured twice
    assert planted_optimum(res2.graphs[0].plan)


WORKER = textwrap.dedent("""
    import sys, json
    sys.path.insert(0, {root!r})
    import torch, autofuse
    from autofuse.measure.timing import FakeBenchmarker
    from autofuse.search.graph_tuner import TuneSettings
    from autofuse.search.candidates import best_config
    from autofuse.search.settings import KernelTuneSettings
    from tests.test_search import planted_cost
    from tests.helpers import seed_fn
    g = torch.Generator().manual_seed(0)
    args = (torch.randn(24, 40, generator=g), torch.randn(40, generator=g), torch.randn(40, generator=g),
            torch.randn(40, generator=g))
    s = TuneSettings(db={db!r}, trials={trials}, resume=True, seed={seed}, progress=False, compare_torch_compile=False,
                     kernel=KernelTuneSettings(explore=0.0))
    res = autofuse.tune(seed_fn, args, settings=s, benchmarker=FakeBenchmarker(planted_cost))
    print("RESULT", json.dumps({{"trials": res.graphs[0].trials, "hash": res.graphs[0].graph_hash,
                                 "device": res.graphs[0].device}}))
""")


def test_two_workers_share_one_study(db_url):
    """On SQLite (a file) and PostgreSQL (a server, as several machines would share it)."""
    db_path = db_url
    TuningDB.open(db_path).close()
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    procs = [subprocess.Popen([sys.executable, "-c", WORKER.format(root=ROOT, db=db_path, trials=10, seed=s)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for s in (1, 2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    results = [json.loads(next(l for l in out.splitlines() if l.startswith("RESULT"))[7:]) for out, _ in outs]
    import optuna
    study = optuna.load_study(study_name=study_name(results[0]["hash"], results[0]["device"]), storage=db_path)
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    # both workers added trials to the one study; the baselines are in it (two workers starting at
    # the same moment may both enqueue them: SQLite has no row locks, and a duplicate costs no measurement)
    # the budget is the study's: the workers split its 10 trials (asking at the same moment, both may
    # take the last one)
    assert 10 <= len(complete) <= 11 and len({t.number for t in complete}) == len(complete)
    baselines = [t.user_attrs.get("baseline") for t in complete if t.user_attrs.get("baseline")]
    assert set(baselines) == {"inductor", "none", "tvm"} and len(baselines) <= 6
    with TuningDB.open(db_path) as db:
        keys = [m["kernel_key"] for m in db.measurements()]
        assert len(keys) == len(set(keys))
        assert len(db.plans(results[0]["hash"])) == 2


def test_ask_tell_skips_a_trial_the_other_worker_finished_first():
    """Two workers took one enqueued trial (SQLite has no row locks) and the other finished it before
    this worker's objective wrote to it: that trial is skipped, the next ones run and are told."""
    import optuna

    from autofuse.search.graph_tuner import _ask_tell

    class Study:
        def __init__(self):
            self.n, self.told = 0, []

        def ask(self):
            self.n += 1
            return self.n

        def tell(self, trial, value=None, state=None):
            self.told.append((trial, value))

        def get_trials(self, deepcopy, states):   # finished: the told ones and the other worker's trial 2
            return [None] * (len(self.told) + (self.n >= 2))

    def objective(trial):
        if trial == 2:
            raise optuna.exceptions.UpdateFinishedTrialError("Trial#2 has already finished and can not be updated.")
        return float(trial)

    study = Study()
    _ask_tell(study, objective, 4, None)
    assert study.told == [(1, 1.0), (3, 3.0), (4, 4.0)]

    def broken(trial):
        raise ValueError("a bug in the objective is not another worker's trial")

    with pytest.raises(ValueError):
        _ask_tell(Study(), broken, 2, None)


def test_a_trial_that_reaches_the_deadline_is_dropped_and_the_search_ends():
    """A kernel search that would start past the time budget ends its trial (failed, not a partial
    estimate) and the search, without an error."""
    import optuna

    from autofuse.search.graph_tuner import _ask_tell
    from autofuse.search.kernels import PastDeadline
    study = optuna.create_study()

    def objective(trial):
        if trial.number == 1:
            raise PastDeadline("kernel k reached after the search's time budget")
        return float(trial.number)

    _ask_tell(study, objective, 5, None)
    assert [t.state.name for t in study.get_trials()] == ["COMPLETE", "FAIL"]


def test_past_the_deadline_the_default_trial_finishes_and_a_later_one_stops(tmp_path, device, monkeypatch):
    """The search's first trial (the default plan) runs whatever the time; a later trial raises at its
    first kernel past the deadline; the default plan is verified and stored."""
    from autofuse.search import graph_tuner, kernels
    started = []
    real = graph_tuner.GraphSearch.objective

    def objective(self, trial):
        started.append(trial.number)
        self.deadline = 0.0   # long past: every trial after the first stops at its first new kernel
        return real(self, trial)
    monkeypatch.setattr(graph_tuner.GraphSearch, "objective", objective)
    raised = []
    real_tune = kernels.KernelTuner.tune

    def tune(self, *a, **k):
        try:
            return real_tune(self, *a, **k)
        except kernels.PastDeadline:
            raised.append(1)
            raise
    monkeypatch.setattr(kernels.KernelTuner, "tune", tune)
    args = seed_args(device)
    res = autofuse.tune(seed_fn, args, settings=settings(tmp_path / "t.db", trials=6), benchmarker=FakeBenchmarker(planted_cost))
    (g,) = res.graphs
    assert started[:2] == [0, 1] and raised and g.stored_id is not None


def test_cli_tune_without_gpu_stores_predicted(tmp_path):
    model = tmp_path / "small.py"
    model.write_text(textwrap.dedent("""
        import torch
        class Model(torch.nn.Module):
            def forward(self, x, w):
                return torch.softmax(x * w, dim=-1)
        def get_inputs():
            g = torch.Generator().manual_seed(0)
            return [torch.randn(20, 33, generator=g), torch.randn(33, generator=g)]
        def get_init_inputs():
            return []
    """))
    db_path = tmp_path / "t.db"
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-m", "autofuse", "tune", str(model), "--trials", "4", "--db", str(db_path),
                        "--device", "cpu", "--no-progress", "--json", str(tmp_path / "r.json")],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "nothing was measured" in r.stdout and "predicted" in r.stdout
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["measured"] is False and data["graphs"][0]["source"] == "predicted"
    with TuningDB.open(db_path) as db:
        plans = db.plans(data["graphs"][0]["graph_hash"])
        assert [p.source for p in plans] == ["predicted"] and plans[0].device == "cpu:triton-interpreter"
        assert db.measurements() == []                        # predictions are never stored as measurements


def test_on_miss_tune_at_compile_time(tmp_path, device):
    args = seed_args(device)
    rec = autofuse.api.Recorder()
    f = autofuse.compile(seed_fn, db=str(tmp_path / "t.db"), on_miss="tune", recorder=rec)
    assert compare(f(*args), seed_fn(*args)) is None
    with TuningDB.open(tmp_path / "t.db") as db:
        graphs = db.list_graphs()
        assert len(graphs) == 1 and db.plans(graphs[0]["hash"])


def test_fake_benchmarker_counts_and_timing_stats():
    t = Timing.of([3.0, 1.0, 2.0, 10.0, 2.5])
    assert t.median_us == 2.5 and t.min_us == 1.0 and t.reps == 5 and t.spread_us > 0
    fb = FakeBenchmarker(lambda r: 5.0)
    assert fb.time(lambda: None, {"kind": "plan", "kernels": [{}, {}]}).median_us == 12.0


class RankingPredictor:
    """Predicts the planted cost exactly: the search should then measure its top-k and no more."""

    def predict_us(self, records):
        return [planted_cost(r) for r in records]


def test_only_top_k_configs_are_measured(tmp_path, device, monkeypatch):
    monkeypatch.setattr("autofuse.search.graph_tuner.load_predictor", lambda db, dev: RankingPredictor())
    fb = FakeBenchmarker(planted_cost)
    res = autofuse.tune(seed_fn, seed_args(device), settings=settings(tmp_path / "t.db", trials=6, top_k=2), benchmarker=fb)
    per_group: dict[str, list] = {}
    for c in kernel_calls(fb):
        per_group.setdefault(c["group"], []).append(c["config"])
    assert per_group and all(len(v) <= 3 for v in per_group.values())   # the default + the top 2
    # the predictor ranks num_warps=2 first, so every kernel's pick is one of those
    assert all(k.config.num_warps == 2 for k in res.graphs[0].plan.kernels)


def test_finalists_are_checked_poisoned_but_timed_unpoisoned(device):
    from autofuse.capture.trace import trace_aten
    from autofuse.compiler import compile_graph
    from autofuse.options import CompileOptions
    from autofuse.search.finalists import verify
    args = seed_args(device)
    gm = trace_aten(seed_fn, args)
    opts = CompileOptions(use_db=False, strict=True)
    f = Finalist("default", compile_graph(gm, args, opts.with_(strategy="none")).plan)
    verify(f, gm, list(args), [seed_fn(*args)], opts)
    assert f.error is None and f.program is not None
    allocs = [s for s in f.program.steps if type(s).__name__ == "Alloc"]
    assert allocs and not any(s.poison for s in allocs)   # a fill per buffer per call would be timed too


def test_best_config_is_the_fastest_ties_to_the_default():
    from autofuse.codegen.config import LaunchConfig
    plain = LaunchConfig(XBLOCK=1, RBLOCK=2048, persistent=False)
    split = LaunchConfig(XBLOCK=1, RBLOCK=2048, persistent=False, split=4)
    # a split is one launch like any other (codegen/split.py): no host charge
    assert best_config({plain: 6.0, split: 4.0}, plain) == split
    assert best_config({plain: 4.0, split: 6.0}, split) == plain
    assert best_config({plain: 5.0, split: 5.0}, split) == split  # ties: the default
    assert best_config({plain: 5.0, split: 5.0}, plain) == plain


class FlatPredictor:
    """Predicts one time for every config: the ranking cannot see what the planted cost rewards."""

    def predict_us(self, records):
        return [10.0 for _ in records]


def hints_cost(warps: int):
    """A reduction kernel gains 4 us from cache hints and 2 more at `warps` warps; nothing else matters."""
    def cost(rec):
        cfg = rec["config"]
        if rec["kind"] != "reduction":
            return 10.0
        return 20.0 - 4 * bool(cfg.get("cache_hints")) - 2 * (cfg["num_warps"] == warps) * bool(cfg.get("cache_hints"))
    return cost


def default_warps(fn, args, node: str) -> int:
    """The warps of the default config of the kernel holding `node` on the inputs' device."""
    (plan,) = autofuse.explain(fn, args, use_db=False, autotune=False).plans
    (cfg,) = [k.config for k in plan.kernels if node in k.nodes]
    return cfg.num_warps


@pytest.mark.parametrize("refine", [0, 12])
def test_refine_descends_from_the_best_measured_config(tmp_path, device, monkeypatch, refine):
    """The best config is two moves from the default: cache hints on, then twice the default's warps
    (the default differs by device: 1 warp on the GPU, more in the interpreter)."""
    monkeypatch.setattr("autofuse.search.graph_tuner.load_predictor", lambda db, dev: FlatPredictor())
    warps = 2 * default_warps(seed_fn, seed_args(device), "mean")
    fb = FakeBenchmarker(hints_cost(warps))
    res = autofuse.tune(seed_fn, seed_args(device), benchmarker=fb,
                        settings=settings(tmp_path / "t.db", trials=2, top_k=1, refine=refine))
    per_group: dict[str, list] = {}
    for c in kernel_calls(fb):
        if c["kind"] == "reduction":
            per_group.setdefault(c["group"], []).append(c["config"])
    assert per_group and all(len(v) <= 2 + refine for v in per_group.values())
    (red,) = [k.config for k in res.graphs[0].plan.kernels if "mean" in k.nodes]
    if refine:   # the flag toggled, then num_warps doubled: two moves away from what was ranked
        assert red.cache_hints and red.num_warps == warps, red
    else:
        assert all(len(v) <= 2 for v in per_group.values())


def test_refine_crosses_a_tie_best_first(tmp_path, device, monkeypatch):
    """The optimum is two moves from the default across a level step (cache hints on: same time;
    then num_warps changed: faster), as the seed example's rows on the H200. A descent that stops when
    no neighbour is faster misses it; best-first expands the level runner-up and finds it."""
    monkeypatch.setattr("autofuse.search.graph_tuner.load_predictor", lambda db, dev: FlatPredictor())
    probe = FakeBenchmarker(lambda rec: 10.0)
    autofuse.tune(seed_fn, seed_args(device), benchmarker=probe, settings=settings(tmp_path / "d.db", trials=1, top_k=0))
    d = next(c["config"] for c in kernel_calls(probe) if c["kind"] == "reduction")
    assert not d.get("cache_hints")

    def plateau_cost(rec):
        c = rec["config"]
        if rec["kind"] != "reduction":
            return 10.0
        if any(c.get(k) != d.get(k) for k in ("XBLOCK", "RBLOCK", "persistent", "early_loads", "num_stages")):
            return 25.0
        if c["num_warps"] == d["num_warps"]:
            return 20.0                                  # the default, and the same with hints: level
        return 15.0 if c.get("cache_hints") else 25.0    # other warps: faster with hints only

    fb = FakeBenchmarker(plateau_cost)
    res = autofuse.tune(seed_fn, seed_args(device), benchmarker=fb,
                        settings=settings(tmp_path / "t.db", trials=1, top_k=0, refine=16))
    (red,) = [k.config for k in res.graphs[0].plan.kernels if "mean" in k.nodes]
    assert red.cache_hints and red.num_warps != d["num_warps"], red
    measured = [c["config"] for c in kernel_calls(fb) if c["kind"] == "reduction"]
    assert len(measured) <= 1 + 16 and len({json.dumps(c, sort_keys=True) for c in measured}) == len(measured)


@pytest.mark.parametrize("runner_ups", [0, 2])
def test_a_kernels_close_runner_up_is_timed_end_to_end_and_can_win(tmp_path, device, monkeypatch, runner_ups):
    """Two configs of the reduction 0.5% apart by their one kernel measurement each (A ahead), where
    the whole plan is faster with B (15 µs, A 18, the default 20 or more): with runner-ups on, the best
    plan is also timed with B and B wins; without, A does."""
    monkeypatch.setattr("autofuse.search.graph_tuner.load_predictor", lambda db, dev: FlatPredictor())
    probe = FakeBenchmarker(lambda rec: 10.0)
    autofuse.tune(seed_fn, seed_args(device), benchmarker=probe, settings=settings(tmp_path / "d.db", trials=1))
    measured = [c["config"] for c in kernel_calls(probe) if c["kind"] == "reduction"]
    default, a, b = measured[0], measured[1], measured[2]

    def kernel_cost(rec):
        if rec["kind"] != "reduction":
            return 10.0
        return {json.dumps(a): 10.0, json.dumps(b): 10.05}.get(json.dumps(rec["config"]), 12.0)

    def plan_cost(what):
        red = [k["config"] for k in what["kernels"] if k["kind"] == "reduction"]
        return 15.0 if red == [b] else 18.0 if red == [a] else 20.0 + len(what["kernels"])

    fb = FakeBenchmarker(kernel_cost, plan_cost)
    res = autofuse.tune(seed_fn, seed_args(device), benchmarker=fb,
                        settings=replace(settings(tmp_path / "t.db", trials=1), runner_ups=runner_ups))
    g = res.graphs[0]
    (red,) = [k.config.to_json() for k in g.plan.kernels if "mean" in k.nodes]
    assert default not in (a, b)
    assert red == (b if runner_ups else a), (red, a, b)
    assert ("runner-up" in g.why) == bool(runner_ups), g.why


def test_num_stages_is_not_searched():
    """num_stages pipelines loops only: a pointwise or persistent kernel compiles to the same code at
    every value, and a looped reduction's time did not change with it in 1452 measured pairs
    (plan/space.py CONFIG_RANGES): candidates carry num_stages 1, and a neighbour's move on it is
    back to 1 only (a plan may still name another value)."""
    from autofuse.capture.trace import trace_aten
    from autofuse.compiler import schedule
    from autofuse.schedule.heuristics import Heuristics
    from autofuse.search.candidates import candidate_configs, neighbour_configs
    from autofuse import CompileOptions

    def groups(fn, args):
        return schedule(trace_aten(fn, args), args, CompileOptions(strict=True, use_db=False)).groups

    rms = lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w  # noqa: E731
    red = next(g for g in groups(rms, [rand((64, 4096)), rand((4096,))]) if g.is_reduction)
    pw = next(g for g in groups(lambda x: torch.sigmoid(x) * 2, [rand((300, 700))]) if not g.is_reduction)
    h = Heuristics()
    for group, default in ((red, h.launch_config("reduction", red.numel, red.rnumel, False)),
                           (pw, h.launch_config("pointwise", pw.numel, 1, False))):
        configs = candidate_configs(group, default, interpret=False, limit=500)
        assert any(not c.persistent for c in configs) == group.is_reduction
        assert all(c.num_stages == 1 for c in configs)
        for c in configs[:20]:
            assert all(n.num_stages == 1 for n in neighbour_configs(c, group))
    looped = [c for c in candidate_configs(red, h.launch_config("reduction", red.numel, red.rnumel, False), False,
                                           limit=500) if not c.persistent]
    assert {c.RBLOCK for c in looped} >= {1024, 2048, 4096}   # one-step rows (RBLOCK = the row) among them
    staged = replace(looped[0], num_stages=3)
    moves = neighbour_configs(staged, red)
    assert replace(staged, num_stages=1) in moves and all(n.num_stages in (1, 3) for n in moves)


def test_one_step_rows_are_a_family_of_their_own_among_the_first_candidates():
    """Inductor max-autotune's rmsnorm form (XBLOCK 2, the whole row, 16 warps, looped, hints) is 3
    steps from our default; as a family of its own it is among the 48 candidates the model ranks."""
    from autofuse.capture.trace import trace_aten
    from autofuse.codegen.config import LaunchConfig
    from autofuse.compiler import schedule
    from autofuse.schedule.heuristics import Heuristics
    from autofuse.search.candidates import candidate_configs
    from autofuse import CompileOptions
    rms = lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w  # noqa: E731
    args = [rand((64, 4096)), rand((4096,))]
    placed = schedule(trace_aten(rms, args), args, CompileOptions(strict=True, use_db=False)).placed
    red = next(g for g, _ in placed if g.is_reduction)
    default = Heuristics().launch_config("reduction", 32768, 4096, False, legal={"cache_hints": True})
    configs = candidate_configs(red, default, interpret=False)
    assert LaunchConfig(XBLOCK=2, RBLOCK=4096, num_warps=16, num_stages=1, persistent=False, cache_hints=True) in configs


def test_measurements_record_the_gpu_loaders_numbers(tmp_path, device, monkeypatch):
    """Each measured kernel's stats carry what its launch reports of the compiled kernel (registers,
    local and shared bytes: FastLauncher.compiled_stats, which reads the GPU loader); none on the CPU."""
    from autofuse.runtime.program import KernelLaunch
    gpu = {"registers": 40.0, "local_bytes": 0.0, "shared_bytes": 1024.0}
    monkeypatch.setattr(KernelLaunch, "compiled_stats", lambda self: dict(gpu))
    fb = FakeBenchmarker(planted_cost)
    autofuse.tune(seed_fn, seed_args(device), settings=settings(tmp_path / "t.db", trials=2), benchmarker=fb)
    with TuningDB.open(tmp_path / "t.db") as db:
        ms = db.measurements()
    assert ms and all(m["stats"].get("gpu_compile") == gpu for m in ms)


class GroupCountingPredictor(RankingPredictor):
    """Counts, per kernel group, the calls whose records include that group."""

    def __init__(self):
        self.per_group: dict[str, int] = {}

    def predict_us(self, records):
        for g in {r.get("group") for r in records if r.get("group")}:
            self.per_group[g] = self.per_group.get(g, 0) + 1
        return super().predict_us(records)


def test_without_a_gpu_each_kernels_configs_are_ranked_once(tmp_path, monkeypatch):
    """Without a GPU the tuner ranks a kernel's candidates, then "times" its default and its pick, and the
    plan totals ask for them again. GroupContextPredictor ranks a group again only when a config joins
    it, so the default must be ranked with the rest: else each kernel pays two rankings of up to 160
    configs (0.5-1.5 s each with the pair ranker on layernorm's model-only search)."""
    inner = GroupCountingPredictor()
    monkeypatch.setattr("autofuse.search.graph_tuner.load_predictor", lambda db, dev: inner)
    res = autofuse.tune(seed_fn, seed_args("cpu"), settings=settings(tmp_path / "t.db", trials=4, top_k=2))
    assert res.measured is False and inner.per_group
    assert set(inner.per_group.values()) == {1}, inner.per_group


class LearnedLikePredictor(RankingPredictor):
    ranks_configs = True


@pytest.mark.parametrize("inner,setting,want", [
    (RankingPredictor(), None, DEFAULT_CANDIDATES), (LearnedLikePredictor(), None, RANKED_CANDIDATES),
    (LearnedLikePredictor(), 32, 32)])
def test_a_learned_ranking_considers_more_configs(tmp_path, monkeypatch, inner, setting, want):
    """The tuner considers RANKED_CANDIDATES configs per kernel where its predictor tells configs apart,
    DEFAULT_CANDIDATES where it cannot (byte counts tie them all); an explicit setting wins."""
    from autofuse.search import kernels
    from costmodel.predict import ByteCountPredictor, GroupContextPredictor, LazyPredictor, LearnedPredictor

    class Wrapper:  # a predictor wrapping another passes its ranks_configs through
        def __init__(self, inner):
            self.inner = inner

        @property
        def ranks_configs(self):
            return self.inner.ranks_configs

    s = KernelTuneSettings()
    assert kernels.candidate_limit(s, GroupContextPredictor(ByteCountPredictor())) == DEFAULT_CANDIDATES
    assert kernels.candidate_limit(s, GroupContextPredictor(Wrapper(LearnedPredictor(model=None)))) == RANKED_CANDIDATES
    monkeypatch.setattr("costmodel.predict.resolve_predictor", lambda db, dev: ByteCountPredictor())
    assert kernels.candidate_limit(s, GroupContextPredictor(LazyPredictor(None, "cpu"))) == DEFAULT_CANDIDATES
    seen = []
    real = kernels.candidate_configs
    monkeypatch.setattr(kernels, "candidate_configs", lambda *a, limit: seen.append(limit) or real(*a, limit=limit))
    monkeypatch.setattr("autofuse.search.graph_tuner.load_predictor", lambda db, dev: inner)
    st = settings(tmp_path / "t.db", trials=2, top_k=2)
    st = replace(st, kernel=replace(st.kernel, max_candidates=setting))
    autofuse.tune(seed_fn, seed_args("cpu"), settings=st, benchmarker=FakeBenchmarker(planted_cost))
    assert seen and set(seen) == {want}


def test_repeated_layers_are_tuned_once(tmp_path, device):
    """Identical kernels (a model's repeated layers) take the config chosen for the first one; the
    report says how many."""
    def layers(x, w):
        for _ in range(4):
            x = torch.relu(x * w + 1.0) - x.mean(-1, keepdim=True)
        return x

    args = (rand((24, 40), device=device), rand((40,), device=device))
    fb = FakeBenchmarker(planted_cost)
    res = autofuse.tune(layers, args, settings=settings(tmp_path / "r.db", trials=4), benchmarker=fb)
    g = res.graphs[0]
    assert g.reused_choices > 0 and f"{g.reused_choices} kernels tuned once for identical ones" in res.report()
    assert res.to_json()["graphs"][0]["reused_choices"] == g.reused_choices


def test_a_new_tune_keeps_the_earlier_study(tmp_path, device):
    """Without --resume a tune opens a new study (name#2) beside the earlier one; --resume continues
    the latest."""
    import optuna
    from autofuse.search.study import run_name
    db_path = tmp_path / "t.db"
    args = seed_args(device)
    first = autofuse.tune(seed_fn, args, settings=settings(db_path, trials=6), benchmarker=FakeBenchmarker(planted_cost))
    autofuse.tune(seed_fn, args, settings=settings(db_path, trials=5), benchmarker=FakeBenchmarker(planted_cost))
    g = first.graphs[0]
    base = study_name(g.graph_hash, g.device)
    storage = f"sqlite:///{db_path}"
    assert sorted(optuna.get_all_study_names(storage)) == sorted([base, base + "#2"])
    assert len(optuna.load_study(study_name=base, storage=storage).trials) >= 6
    autofuse.tune(seed_fn, args, settings=settings(db_path, trials=8, resume=True), benchmarker=FakeBenchmarker(planted_cost))
    assert len(optuna.get_all_study_names(storage)) == 2
    second = optuna.load_study(study_name=base + "#2", storage=storage)
    assert len([t for t in second.trials if t.state.name == "COMPLETE"]) == 8
    assert run_name("s", [], False) == run_name("s", [], True) == "s"
    assert run_name("s", ["s", "s#2", "s#x", "t"], True) == "s#2"
    assert run_name("s", ["s", "s#2"], False) == "s#3"


def test_the_report_says_how_fast_variants_were_measured_and_where_the_time_went(tmp_path, device):
    fb = FakeBenchmarker(planted_cost)
    res = autofuse.tune(seed_fn, seed_args(device), settings=settings(tmp_path / "t.db", trials=6), benchmarker=fb)
    g = res.graphs[0]
    assert g.new_measurements > 0 and g.search_s > 0
    spent = g.tuning_seconds
    assert set(spent) == {"kernels", "codegen", "compile_and_check", "timing", "store", "ranking"}
    parts = spent["codegen"] + spent["compile_and_check"] + spent["store"] + spent["ranking"]
    assert 0 < parts <= spent["kernels"] <= g.search_s
    line = next(ln for ln in res.report().splitlines() if "kernel variants measured in" in ln)
    assert f"{g.new_measurements} kernel variants" in line and "per s" in line and "compile and check" in line
    assert "cost-model ranking" in line and "other" in line
    assert res.to_json()["graphs"][0]["tuning_seconds"] == spent
