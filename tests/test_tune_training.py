"""`autofuse tune --train`: a training step's forward and backward graphs are tuned and stored, and
a compile then runs the step from the DB (no search) with eager's loss and gradients."""
from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn

import autofuse
from autofuse.api import Recorder
from autofuse.measure.timing import FakeBenchmarker
from autofuse.capture.training import NothingToTrain, training_loss
from tests.helpers import rand


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(24, 40)
        self.norm = nn.LayerNorm(40)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.norm(self.lin(x))).sum(-1)


def _cost(rec: dict) -> float:
    cfg = rec.get("config") or {}
    return 10.0 + cfg.get("num_warps", 4) + (rec.get("numel", 1) % 7)


def test_tuned_training_step_runs_from_the_db(tmp_path, device):
    torch.manual_seed(0)
    model = Block().to(device)
    x = rand((13, 24), device=device)
    db = str(tmp_path / "t.db")
    model.eval()
    before = torch.ones_like(model.lin.weight)
    model.lin.weight.grad = before
    res = autofuse.tune(model, (x,), db=db, trials=2, progress=False, compare_torch_compile=False,
                        benchmarker=FakeBenchmarker(_cost), train=True)
    # the captured step ran in training mode; the model's mode and gradients are as they were
    assert not model.training and model.lin.weight.grad is before and model.lin.bias.grad is None
    model.train()
    model.lin.weight.grad = None
    labels = sorted(g.label.split()[0] for g in res.graphs)
    assert labels == ["backward", "forward"], labels
    assert all(g.plan is not None for g in res.graphs)

    twin = copy.deepcopy(model)
    rec = Recorder()
    torch._dynamo.reset()
    f = autofuse.compile(twin, db=db, on_miss="error", strict=True, recorder=rec)
    f(x).float().sum().backward()
    model(x).float().sum().backward()
    assert {o.label for o in rec.outcomes} == {"forward", "backward"}
    assert all(getattr(art, "source", "") == "tuning DB" for _, _, art in rec.graphs)
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5)


def test_training_loss_takes_the_models_loss_or_sums_its_outputs():
    w = torch.randn(3, requires_grad=True)
    out = SimpleNamespace(loss=(w * 2).sum(), logits=w * 3)
    assert training_loss(out) is out.loss
    total = training_loss(((w * 2), {"b": w.sum(), "i": torch.tensor(3)}))
    torch.testing.assert_close(total, (w * 2).sum() + w.sum())
    with pytest.raises(NothingToTrain, match="nothing to train"):
        training_loss((torch.randn(3), 4))


def test_cli_refuses_a_model_with_nothing_to_train(tmp_path, capsys):
    from autofuse.cli import main
    path = tmp_path / "m.py"
    path.write_text("import torch\n"
                    "def model(x):\n    return x * 2\n"
                    "def example_inputs():\n    return (torch.randn(4, 3),)\n")
    assert main(["tune", str(path), "--train", "--db", str(tmp_path / "t.db"), "--no-progress"]) != 0
    err = capsys.readouterr().err
    assert "nothing to train" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


class WithDropout(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(24, 40)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.dropout(torch.relu(self.lin(x)), 0.3, training=self.training).sum(-1)


def test_a_graph_that_samples_is_verified_with_the_same_draws(tmp_path, device):
    """Dropout's mask comes from torch's generator: the reference and every candidate run from one
    snapshot of it (measure/rng.py), so correct plans verify."""
    model = WithDropout().to(device)
    x = rand((13, 24), device=device)
    res = autofuse.tune(model, (x,), db=str(tmp_path / "t.db"), trials=2, progress=False, compare_torch_compile=False,
                        benchmarker=FakeBenchmarker(_cost), train=True)
    assert "no plan could be verified" not in res.report(), res.report()
    assert len(res.graphs) == 2 and all(g.plan is not None for g in res.graphs)
    # the dropout is drawn in the tuned kernels, and a later compile finds both plans under the same keys
    rec = Recorder()
    torch._dynamo.reset()
    f = autofuse.compile(copy.deepcopy(model), db=str(tmp_path / "t.db"), on_miss="error", strict=True, recorder=rec)
    torch.manual_seed(5)
    y = f(x)
    y.float().sum().backward()
    torch.manual_seed(5)
    assert torch.equal(f(x), y)
    assert all(getattr(art, "source", "") == "tuning DB" for _, _, art in rec.graphs) and len(rec.graphs) == 2
    assert "philox_rand" in [o for _, _, art in rec.graphs for k in art.kernels for o in k.aten_ops]
