"""AUTOFUSE_LOGS: named loggers for fusion decisions, plan-cache hits and misses, kernel sources and
the graphs compiled."""
from __future__ import annotations

import logging

import pytest
import torch

from autofuse.logs import TOPICS, configure_from_env, enable, logger

from .helpers import compile_and_compare, rand


def test_fusion_decisions_and_sources_are_logged(caplog):
    caplog.set_level(logging.DEBUG, logger="autofuse")

    def fn(x, y):
        a = torch.relu(x) + 1.0
        return a.sum(1), a * y

    compile_and_compare(fn, (rand((6, 37)), rand((6, 37))))
    fusion = [r.getMessage() for r in caplog.records if r.name == "autofuse.fusion"]
    assert any(m.startswith("fused: ") for m in fusion), fusion
    sources = [r.getMessage() for r in caplog.records if r.name == "autofuse.source"]
    assert sources and all(m.split(": ", 1)[1].endswith(".py") for m in sources), sources


def test_env_switch(capsys):
    configure_from_env("bogus")
    assert "unknown topic 'bogus'" in capsys.readouterr().err
    with pytest.raises(ValueError):
        enable(["nope"])
    configure_from_env("cache")
    lg = logger("cache")
    assert lg.level == logging.DEBUG and any(getattr(h, "_autofuse", False) for h in lg.handlers)
    configure_from_env("cache")  # configured twice, one handler
    assert sum(getattr(h, "_autofuse", False) for h in lg.handlers) == 1
    for h in [h for h in lg.handlers if getattr(h, "_autofuse", False)]:
        lg.removeHandler(h)
    lg.setLevel(logging.NOTSET)
    assert set(TOPICS) >= {"fusion", "cache", "source"}


def test_graphs_compiled_and_left_to_aten_are_logged(caplog):
    """The compile topic: each graph compiled with its kernel count, each graph left to ATen ops
    and why (here a signature past max_sizes)."""
    caplog.set_level(logging.INFO, logger="autofuse.compile")
    torch._dynamo.reset()

    def fn(x):
        return torch.relu(x) * 2

    f = torch.compile(fn, backend="autofuse", dynamic=True, options={"strict": True, "use_db": False, "max_sizes": 1})
    f(rand((5, 3)))
    with pytest.warns(UserWarning, match="max_sizes"):
        f(rand((7, 3)))
    said = [r.getMessage() for r in caplog.records if r.name == "autofuse.compile"]
    assert said[0] == "inference graph compiled: 1 kernels", said
    assert said[1].startswith("inference graph left to ATen ops for new sizes: met more than 1 input sizes"), said
