"""The structural graph hash: stable across processes, names and re-traces; sensitive to
anything that changes the program."""
import os
import subprocess
import sys
from pathlib import Path

import torch

from autofuse.plan.graph_hash import device_key, graph_hash
from autofuse.capture.trace import trace_aten

ROOT = Path(__file__).resolve().parents[1]


def f(x, bias):
    t = x * 1.1 + bias
    return torch.relu(t).sum(-1)


def f_renamed(inp, b):
    hidden = inp * 1.1 + b
    return torch.relu(hidden).sum(-1)


def h(fn, *args):
    return graph_hash(trace_aten(fn, args), args)


X, B = torch.randn(6, 5), torch.randn(5)


def test_stable_under_renaming_and_retracing():
    assert h(f, X, B) == h(f_renamed, X, B)
    assert h(f, X, B) == h(f, torch.randn(6, 5), torch.randn(5))  # values do not matter, structure does


def test_stable_across_processes():
    code = ("import torch; from tests.test_graph_hash import h, f; "
            "print(h(f, torch.randn(6, 5), torch.randn(5)))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), PYTHONHASHSEED="123")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == h(f, X, B)


def test_sensitive_to_every_program_change():
    base = h(f, X, B)
    assert h(f, torch.randn(7, 5), B) != base                                   # shape
    assert h(f, X.double(), B.double()) != base                                  # dtype
    assert h(f, torch.randn(5, 6).t(), B) != base                                # strides
    assert h(lambda x, b: torch.relu(x * 1.2 + b).sum(-1), X, B) != base         # constant
    assert h(lambda x, b: torch.sigmoid(x * 1.1 + b).sum(-1), X, B) != base      # op
    assert h(lambda x, b: torch.relu(x * 1.1 + b).sum(0), X, B) != base          # argument
    assert h(lambda x, b: (torch.relu(x * 1.1 + b).sum(-1), x), X, B) != base    # outputs


def test_device_key_names_the_interpreter_on_cpu():
    assert device_key([X]) == "cpu:triton-interpreter"


def test_sensitive_to_a_higher_order_ops_body():
    """torch.cond's branches are subgraphs the graph names by attribute: their ops are hashed."""
    def cond(branch):
        return lambda x: torch.cond(x.sum() > 0, branch, torch.cos, (x,)) * 2
    assert h(cond(torch.sin), X) == h(cond(torch.sin), torch.randn(6, 5))
    assert h(cond(torch.sin), X) != h(cond(torch.exp), X)
