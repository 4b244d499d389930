"""How people call a compiled model beside the plain call: under autocast, with activation
checkpointing, under inference mode. Each compiles every graph (strict) and matches eager."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

import autofuse
from autofuse.api import Recorder
from tests.helpers import assert_close, rand


class Block(nn.Module):
    def __init__(self, d: int = 24):
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(3 * d, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self, checkpointed: bool = False):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.checkpointed = checkpointed

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.checkpointed else block(x)
        return x.sum(-1)


def twins(device: str, checkpointed: bool = False) -> tuple[Net, Net]:
    torch.manual_seed(0)
    a = Net(checkpointed).to(device)
    b = Net().to(device)
    b.load_state_dict(a.state_dict())
    return a, b


def compiled(model: nn.Module, rec: Recorder):
    torch._dynamo.reset()
    return autofuse.compile(model, strict=True, recorder=rec, use_db=False)


def assert_all_compiled(rec: Recorder, *labels: str) -> None:
    assert rec.outcomes and all(o.compiled for o in rec.outcomes), rec.outcomes
    assert sum(len(art.kernels) for _, _, art in rec.graphs) > 0
    assert set(labels) <= {o.label for o in rec.outcomes}, rec.outcomes


def assert_grads_close(a: nn.Module, b: nn.Module, **tol) -> None:
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert_close(p.grad, q.grad, **tol)


@pytest.mark.parametrize("train", [False, True], ids=["forward", "train"])
def test_under_autocast_the_compiled_model_follows_autocasts_dtypes(device, train):
    """Autocast's casts are in the captured graph: the linears in bf16, the residual stream and the
    sum in float32, as eager has them."""
    model, ref = twins(device)
    x, rec = rand((3, 7, 24), device=device), Recorder()
    fn = compiled(model, rec)
    with torch.autocast(device, dtype=torch.bfloat16), torch.set_grad_enabled(train):
        out, want = fn(x), ref(x)
    assert out.dtype == want.dtype
    dtypes = {getattr(n.meta.get("val"), "dtype", None) for _, gm, _ in rec.graphs for n in gm.graph.nodes}
    assert torch.bfloat16 in dtypes
    assert_close(out.float(), want.float(), atol=3e-2, rtol=3e-2)
    if train:
        out.float().square().mean().backward()
        want.float().square().mean().backward()
        assert_grads_close(model, ref, atol=5e-2, rtol=5e-2)
    assert_all_compiled(rec, "forward", "backward") if train else assert_all_compiled(rec)


def test_activation_checkpointing_gives_the_gradients_of_the_plain_model(device):
    """Checkpointed blocks recompute their forward in the backward graph; the gradients are those
    of the same model without checkpointing, run eagerly."""
    model, ref = twins(device, checkpointed=True)
    x, rec = rand((3, 7, 24), device=device), Recorder()
    compiled(model, rec)(x).square().mean().backward()
    ref(x).square().mean().backward()
    assert_grads_close(model, ref, atol=1e-4, rtol=1e-4)
    assert_all_compiled(rec, "forward", "backward")


def test_under_inference_mode_the_compiled_model_matches_eager(device):
    model, ref = twins(device)
    model.eval()
    x, rec = rand((3, 7, 24), device=device), Recorder()
    fn = compiled(model, rec)
    with torch.inference_mode():
        out = fn(x)
        assert_close(out, ref.eval()(x))
    assert not out.requires_grad
    assert_all_compiled(rec)
