"""torch.compile(m, backend="autofuse", options={...}): a plain dict configures the compile."""
from __future__ import annotations

import pytest
import torch

import autofuse  # noqa: F401  (registers the backend)
from autofuse import CompileOptions

from .helpers import rand


def test_options_dict_through_torch_compile():
    torch._dynamo.reset()
    fn = torch.compile(lambda x: torch.relu(x) * 2.0 + x.sum(0), backend="autofuse",
                       options={"strategy": "none", "use_db": False, "strict": True,
                                "heuristics": {"conv_layout": "as_given"}})
    x = rand((5, 7))
    torch.testing.assert_close(fn(x), torch.relu(x) * 2.0 + x.sum(0))


def test_unknown_option_is_one_clear_error():
    with pytest.raises(ValueError, match="unknown autofuse option.*'stratgy'"):
        CompileOptions.from_dict({"stratgy": "none"})
    assert CompileOptions.from_dict({"strict": True}).strict


def test_torch_compile_modes(tmp_path, monkeypatch):
    """mode="max-autotune-no-cudagraphs" searches the graph the DB lacks and stores the winner;
    "reduce-overhead" replays CUDA graphs; an unknown mode is one clear error."""
    from tuning_db import TuningDB
    monkeypatch.setenv("AUTOFUSE_DB", str(tmp_path / "t.db"))
    assert CompileOptions.from_mode("reduce-overhead").cudagraphs
    assert CompileOptions.from_mode("max-autotune").on_miss == "tune"
    assert CompileOptions.from_mode("default") == CompileOptions()
    with pytest.raises(ValueError, match="unknown mode 'fastest'"):
        CompileOptions.from_mode("fastest")
    torch._dynamo.reset()

    def f(x):
        return torch.softmax(x * 2, -1) + 1

    fn = torch.compile(f, backend="autofuse", mode="max-autotune-no-cudagraphs")
    x = rand((5, 7))
    torch.testing.assert_close(fn(x), f(x))
    with TuningDB.open(tmp_path / "t.db") as db:
        graphs = db.list_graphs()
        assert len(graphs) == 1 and db.plans(graphs[0]["hash"])


def test_cuda_graphs_replay_inference_graphs_only(monkeypatch):
    """A training step's forward and backward graphs never replay as CUDA graphs (their outputs are
    kept by autograd); an inference graph does where it can."""
    from autofuse.capture.backend import CompiledGraph
    graphed: list[str] = []
    real = CompiledGraph._graphed
    monkeypatch.setattr(CompiledGraph, "_graphed", lambda self, prog, args: graphed.append(self.label) or real(self, prog, args))
    torch._dynamo.reset()
    w = rand((7, 3)).requires_grad_()   # on the suite's device, beside x
    fn = torch.compile(lambda x: (x @ w).tanh().sum(), backend="autofuse", mode="reduce-overhead")
    x = rand((5, 7))
    fn(x).backward()
    torch.testing.assert_close(w.grad, torch.autograd.grad((x @ w).tanh().sum(), w)[0])
    assert graphed == []
    with torch.no_grad():
        torch.testing.assert_close(fn(x), (x @ w).tanh().sum())
    assert graphed == ["inference"]
