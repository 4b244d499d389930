"""The user's surface: explain and tune leave the user's compiled functions alone, machine-readable
output of `db list/show` and of explain, and the tune progress line."""
from __future__ import annotations

import io
import json

import pytest
import torch

import autofuse
from autofuse.capture.fresh import compile_fresh, supports_isolation
from autofuse.measure.timing import FakeBenchmarker
from autofuse.search.graph_tuner import TuneSettings
from autofuse.search.settings import KernelTuneSettings
from tests.helpers import rand


def scaled_softmax(x):
    return torch.softmax(x * 0.5, -1)


def with_graph_break(x):
    y = torch.sin(x) * 2
    print("", end="")  # Dynamo splits the function here
    return y.cos() + 1


class CountingBackend:
    """A Dynamo backend that counts the graphs it compiles and runs them as they are."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> object:
        self.calls += 1
        return gm.forward


def user_function(x):
    return torch.tanh(x) + x


def fake_settings(db, **kw):
    return TuneSettings(db=str(db), progress=False, compare_torch_compile=False, finalists=2, runner_ups=0,
                        rounds=1, kernel=KernelTuneSettings(top_k=1, explore=0.0, refine=0), **kw)


@pytest.mark.parametrize("isolate", [True, False] if supports_isolation() else [False])
def test_compile_fresh_traces_each_time_and_keeps_other_caches(isolate):
    user = CountingBackend()
    compiled_user = torch.compile(with_graph_break, backend=user)
    x = rand((7, 5))
    torch.testing.assert_close(compiled_user(x), with_graph_break(x))
    assert user.calls == 2
    for _ in range(10):
        mine = CountingBackend()
        torch.testing.assert_close(compile_fresh(with_graph_break, mine, isolate=isolate)(x), with_graph_break(x))
        assert mine.calls == 2  # both sides of the graph break, every time
    compiled_user(x)
    assert user.calls == 2  # the user's compiled code is still cached


class ScaledSoftmax(torch.nn.Module):
    def forward(self, x):
        return scaled_softmax(x)


def test_explain_ten_times_in_a_row_sees_every_graph():
    x, model = rand((9, 33)), ScaledSoftmax()
    for _ in range(10):
        report = autofuse.explain(model, [x], strategy="inductor")
        assert report.graphs == 1 and report.kernels and not report.eager_graphs


def test_explain_sees_both_sides_of_a_graph_break_each_call():
    x = rand((13,))
    for _ in range(3):
        report = autofuse.explain(with_graph_break, [x], strategy="inductor")
        assert report.graphs == 2 and all(o.compiled for o in report.outcomes)


def test_explain_and_tune_keep_the_users_compiled_code(tmp_path):
    user = CountingBackend()
    f = torch.compile(user_function, backend=user)
    x = rand((6, 10))
    torch.testing.assert_close(f(x), user_function(x))
    assert user.calls == 1
    autofuse.explain(scaled_softmax, [rand((8, 32))], strategy="inductor")
    res = autofuse.tune(scaled_softmax, [rand((8, 32))], settings=fake_settings(tmp_path / "t.db", trials=2),
                        benchmarker=FakeBenchmarker(lambda rec: 10.0))
    assert res.graphs and not res.errors
    torch.testing.assert_close(f(x), user_function(x))
    assert user.calls == 1  # no recompile: its cache entry survived explain and tune


def _db_cli(argv: list[str]) -> int:
    import argparse

    from tuning_db.cli import register
    p = argparse.ArgumentParser(prog="autofuse")
    register(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    return args.func(args)


def test_db_list_and_show_json(tmp_path, capsys):
    from tests.test_tuning_db import G1, G2, populate
    from tuning_db import TuningDB
    url = f"sqlite:///{tmp_path / 't.db'}"
    assert _db_cli(["db", "--db", url, "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"db": url, "graphs": []}
    with TuningDB.open(url) as db:
        populate(db)
    assert _db_cli(["db", "--db", url, "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    by_hash = {g["hash"]: g for g in listed["graphs"]}
    assert set(by_hash) == {G1, G2} and listed["db"] == url
    assert by_hash[G1]["plans"] == 2 and by_hash[G1]["description"] == "layernorm bf16 4096x4096"
    assert by_hash[G2]["plans"] == 1 and by_hash[G2]["created"].endswith("+00:00")
    assert _db_cli(["db", "--db", url, "show", G1[:6], "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["hash"] == G1 and len(shown["plans"]) == 2
    picked = [p for p in shown["plans"] if p["picked"]]
    assert len(picked) == 1 and picked[0]["source"] == "tuned" and picked[0]["measured"]  # as the table's *
    predicted = next(p for p in shown["plans"] if p["source"] == "predicted")
    assert predicted["time_us"] == 3.0 and not predicted["measured"] and not predicted["picked"]
    assert all(p["plan"] == {"groups": [[0, 1]]} and p["baselines"] == {"inductor": 12.5, "none": 30.0}
               and p["created"].endswith("+00:00") for p in shown["plans"])


def test_explain_json_holds_kernel_and_wrapper_sources():
    x = rand((13, 7))
    report = autofuse.explain(with_graph_break, [x], strategy="inductor")
    data = json.loads(report.to_json())
    assert [o["compiled"] for o in data["graph_outcomes"]] == [True, True]
    assert all(isinstance(o["wrapper_source"], str) for o in data["graph_outcomes"])
    assert [o["wrapper_source"] for o in data["graph_outcomes"]] == report.wrapper_sources
    assert {k["graph"] for k in data["kernels"]} == {0, 1}
    for k, info in zip(data["kernels"], report.kernels):
        assert k["source"] == info.source
        if k["kind"] != "fallback":
            assert "@triton.jit" in k["source"] and f"def {k['fn_name']}" in k["source"]


def test_explain_json_reports_an_eager_graph_without_a_wrapper():
    from autofuse.api import GraphOutcome
    from autofuse.report import Report
    report = autofuse.explain(scaled_softmax, [rand((4, 9))], strategy="inductor")
    eager = Report(report.strategy, report.kernels, 2, report.rejected, report.plans, report.unfused_bytes,
                   report.artifacts, [GraphOutcome("forward", False, 0, "unsupported"), *report.outcomes])
    data = json.loads(eager.to_json())
    assert data["graph_outcomes"][0]["wrapper_source"] is None
    assert data["graph_outcomes"][1]["wrapper_source"] == report.wrapper_sources[0]
    assert all(k["graph"] == 1 for k in data["kernels"])


def test_explain_cli_json_with_source_stays_json(tmp_path, capsys):
    from autofuse.cli import main
    model = tmp_path / "m.py"
    model.write_text("import torch\n\n"
                     "def model(x):\n    return torch.softmax(x * 0.5, -1)\n\n"
                     "def example_inputs():\n    return (torch.randn(6, 17),)\n")
    assert main(["explain", str(model), "--strategy", "inductor", "--format", "json", "--source"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kernels"] and all("@triton.jit" in k["source"] for k in data["kernels"] if k["kind"] != "fallback")
    assert data["graph_outcomes"][0]["wrapper_source"] is not None


def test_verbose_logs_compiles_and_quiet_silences_warnings(tmp_path, capsys):
    import logging
    import warnings

    from autofuse.cli import main
    from autofuse.logs import TOPICS, logger
    model = tmp_path / "m.py"
    model.write_text("import torch\n\n"
                     "def model(x):\n    return torch.relu(x) * 2\n\n"
                     "def example_inputs():\n    return (torch.randn(5, 7),)\n")
    try:
        assert main(["explain", str(model), "--strategy", "inductor", "-v"]) == 0
        err = capsys.readouterr().err
        assert "[autofuse.compile] inference graph compiled: 1 kernels" in err
        assert logger("compile").level == logging.INFO and logger("fusion").level == logging.NOTSET
        assert main(["-vv", "db", "list", "--db", str(tmp_path / "t.db")]) == 0
        assert all(logger(t).level == logging.DEBUG for t in TOPICS)
    finally:
        for t in TOPICS:
            lg = logger(t)
            for h in [h for h in lg.handlers if getattr(h, "_autofuse", False)]:
                lg.removeHandler(h)
            lg.setLevel(logging.NOTSET)
    with warnings.catch_warnings():
        assert main(["explain", str(model), "--strategy", "inductor", "-q"]) == 0
        assert any(f[0] == "ignore" and f[1] is not None and f[1].pattern == "autofuse: " for f in warnings.filters)
        with pytest.warns(UserWarning):   # other packages' warnings still show
            warnings.warn("torch: not autofuse's")
    with pytest.raises(SystemExit):
        main(["-v", "explain", str(model), "-q"])


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_disabled_writes_nothing():
    from autofuse.search.progress import Progress
    for stream in (io.StringIO(), Terminal()):
        p = Progress("forward 1/1 graph abc", 10, None, stream=stream, enabled=False)
        p.update(3, 5.0, 7.0)
        p.close()
        assert stream.getvalue() == ""


def test_progress_plain_lines_when_not_a_tty(monkeypatch):
    from autofuse.search import progress
    clock = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    out = io.StringIO()
    p = progress.Progress("forward 1/1 graph abc", 4, deadline=160.0, stream=out)
    clock[0] = 110.0
    p.update(1, 9.5, 12.0)      # a new best: a line
    clock[0] = 111.0
    p.update(2, 9.5, 12.0)      # no news within 5 s: no line
    clock[0] = 120.0
    p.update(4, 8.25, 12.0)     # the last trial: a line
    p.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in out.getvalue() and "\x1b" not in out.getvalue()
    assert lines[0] == ("forward 1/1 graph abc: [#####...............] trial 1/4, best 9.5 us (default 12.0 us), "
                        "50 s left, elapsed 00:10, eta 00:30")
    assert lines[1].endswith("trial 4/4, best 8.2 us (default 12.0 us), 40 s left, elapsed 00:20, eta 00:00")


def test_progress_bar_on_a_terminal():
    from autofuse.search.progress import Progress
    out = Terminal()
    p = Progress("forward 1/1 graph abc", 5, deadline=None, stream=out)
    for done in range(1, 6):
        p.update(done, 10.0 - done, 12.0)
    p.close()
    text = out.getvalue()
    assert "\r" in text and text.endswith("\n")
    last = text.rstrip("\n").split("\r")[-1]
    assert last.startswith("forward 1/1 graph abc: 100%") and "5/5" in last and "best 5.0 us (default 12.0 us)" in last
    assert "<00:00" in last  # elapsed < remaining


def test_tune_stops_by_default_after_its_time_budget():
    """`autofuse tune` is bounded unless told otherwise; 0 lifts the bound, a bad value is refused."""
    from autofuse.cli import DEFAULT_TIME_BUDGET_S, _parser
    p = _parser()
    assert p.parse_args(["tune", "m.py"]).time_budget == DEFAULT_TIME_BUDGET_S
    assert p.parse_args(["tune", "m.py", "--time-budget", "0"]).time_budget is None
    assert p.parse_args(["tune", "m.py", "--time-budget", "90"]).time_budget == 90.0
    with pytest.raises(SystemExit):
        p.parse_args(["tune", "m.py", "--time-budget", "-3"])


def test_a_failure_is_reported_as_one_line():
    from autofuse.search.table import error_line
    assert error_line(TypeError("\nfirst\nsecond")) == "TypeError: first"
    assert error_line(RuntimeError()) == "RuntimeError: "
    assert error_line(ValueError("x" * 300), 10) == "ValueError: " + "x" * 10
