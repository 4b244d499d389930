"""Compiled torch.optim steps: the multi-tensor (foreach) and single-tensor forms of the common
optimizers, and gradient clipping, give eager's parameters and state, with every update generated."""
from __future__ import annotations

import pytest
import torch

from autofuse import CompileOptions
from autofuse.api import Recorder
from autofuse.capture.backend import make_backend
from tests.helpers import assert_close

OPTIMIZERS = {
    "adamw": lambda ps, fe: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.05, foreach=fe),
    "adam_amsgrad": lambda ps, fe: torch.optim.Adam(ps, lr=1e-2, amsgrad=True, foreach=fe),
    "sgd_nesterov": lambda ps, fe: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, nesterov=True, weight_decay=1e-3,
                                                   foreach=fe),
    "rmsprop_centered": lambda ps, fe: torch.optim.RMSprop(ps, lr=1e-2, momentum=0.5, centered=True, foreach=fe),
    "adagrad": lambda ps, fe: torch.optim.Adagrad(ps, lr=1e-2, foreach=fe),
    "nadam": lambda ps, fe: torch.optim.NAdam(ps, lr=1e-2, foreach=fe),
    "adamax": lambda ps, fe: torch.optim.Adamax(ps, lr=1e-2, foreach=fe),
    "radam": lambda ps, fe: torch.optim.RAdam(ps, lr=1e-2, foreach=fe),
    "rprop": lambda ps, fe: torch.optim.Rprop(ps, lr=1e-2, foreach=fe),
    "adamw_maximize_amsgrad": lambda ps, fe: torch.optim.AdamW(ps, lr=1e-2, maximize=True, amsgrad=True, foreach=fe),
}
SHAPES = [(37, 11), (53,), (3, 5, 7)]


def _params(device: str, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ps = [torch.randn(s, generator=g).to(device).requires_grad_() for s in SHAPES]
    for p in ps:
        p.grad = torch.randn(p.shape, generator=g).to(device)
    return ps


def _compiled(fn, recorder: Recorder):
    torch._dynamo.reset()
    return torch.compile(fn, backend=make_backend(CompileOptions(strict=True, poison=True, use_db=False,
                                                                 recorder=recorder)))


def _generated_only(recorder: Recorder) -> list:
    assert recorder.outcomes and all(o.compiled for o in recorder.outcomes), recorder.outcomes
    return [k.aten_ops for _, _, art in recorder.graphs for k in art.kernels if k.kind == "fallback"]


@pytest.mark.parametrize("foreach", [True, False], ids=["foreach", "single"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_compiled_step_matches_eager(device, name, foreach):
    ps, ref = _params(device, 0), _params(device, 0)
    opt, opt_ref = OPTIMIZERS[name](ps, foreach), OPTIMIZERS[name](ref, foreach)
    rec = Recorder()
    step = _compiled(opt.step, rec)
    for i in range(3):
        step()
        opt_ref.step()
        for p, q in zip(ps, ref):  # new gradients each step, the same for both
            p.grad = q.grad = torch.randn(p.shape, generator=torch.Generator().manual_seed(i)).to(device)
    for p, q in zip(ps, ref):
        assert_close(p.detach(), q.detach())
    for p, q in zip(ps, ref):
        for k, v in opt_ref.state[q].items():
            assert_close(opt.state[p][k], v)
    fallbacks = _generated_only(rec)
    assert not fallbacks, fallbacks


def test_foreach_gradient_clipping_is_generated(device):
    ps, ref = _params(device, 1), _params(device, 1)
    rec = Recorder()

    def clip(params):
        return torch.nn.utils.clip_grad_norm_(params, max_norm=0.5, foreach=True)

    norm = _compiled(clip, rec)(ps)
    norm_ref = clip(ref)
    assert_close(norm, norm_ref)
    for p, q in zip(ps, ref):
        assert_close(p.grad, q.grad)
    # the norms, the clip coefficient and the scaled gradients are generated; with 3 parameters the
    # norm of their norms is an unrolled sum, so the last norm's kernel also scales its gradient,
    # which it reads, and the scaled values are copied back into it by one ATen copy
    fallbacks = _generated_only(rec)
    assert set(fallbacks) <= {("copy_",)} and len(fallbacks) <= 1, fallbacks


def test_small_parameter_updates_share_launches(device):
    """Three parameters' AdamW updates are independent: one launch for the three updates and one for
    the three step counts (which the updates read, so they cannot share the first)."""
    ps = _params(device, 2)
    opt = torch.optim.AdamW(ps, lr=1e-2, foreach=True)
    rec = Recorder()
    _compiled(opt.step, rec)()
    (label, _, art), = rec.graphs
    launches = [line for line in art.program.source.splitlines() if line.strip().startswith("_k")]
    assert len(art.kernels) == 6 and len(launches) == 2, art.program.source
