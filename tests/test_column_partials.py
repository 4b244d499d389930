"""Column sums beside row reductions over the same rows (a norm's weight and bias gradients): run as
partials inside the row kernel, then a sum of the partials (lower/column_partials.py,
codegen/columns.py). Training steps compared with eager (gradients of the input and of every
parameter) on rows that do and do not divide into the programs, 3-D inputs, bf16 and a transposed
input; the kernels checked: the column partials share the row kernel, no kernel reads the rows again."""
from __future__ import annotations

import pytest
import torch

import autofuse
from autofuse import CompileOptions
from autofuse.api import Recorder
from autofuse.capture.trace import compile_traced
from autofuse.lower.column_partials import _rows_per_program
from autofuse.schedule.heuristics import Heuristics
from tests.helpers import kernels_of, rand

SMALL = Heuristics(column_partial_min_rows=1)


class RMSNorm(torch.nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(d) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


def _layer_norm(d: int) -> torch.nn.Module:
    m = torch.nn.LayerNorm(d)
    with torch.no_grad():
        m.weight.copy_(torch.rand(d) + 0.5)
        m.bias.copy_(torch.randn(d))
    return m


def train_step(make, x, heuristics=SMALL, rtol=1e-4, atol=1e-5):
    """Forward and backward under eager and autofuse; gradients compared; the backward's kernels."""
    torch._dynamo.reset()
    ref, mod = make(), None
    mod = make()
    mod.load_state_dict(ref.state_dict())
    ref, mod = ref.to(x.device, x.dtype), mod.to(x.device, x.dtype)
    xr, xc = x.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
    g = torch.randn(x.shape, device=x.device).to(x.dtype)
    rec = Recorder()
    compiled = autofuse.compile(mod, strict=True, poison=True, use_db=False, heuristics=heuristics, recorder=rec)
    ref(xr).backward(g)
    compiled(xc).backward(g)
    torch.testing.assert_close(xc.grad, xr.grad, rtol=rtol, atol=atol)
    for p1, p2 in zip(ref.parameters(), mod.parameters()):
        torch.testing.assert_close(p2.grad, p1.grad, rtol=rtol, atol=atol * 10)
    (backward,) = [art for label, _, art in rec.graphs if label == "backward"]
    return backward.kernels


def _column_kernels(kernels) -> list:
    """Row kernels with column partials: their programs each walk a share of the rows (`explain`
    reports how many)."""
    out = [k for k in kernels if k.programs]
    assert all("xpid" in k.source and k.numel % k.programs == 0 for k in out)
    return out


@pytest.mark.parametrize("rows,cols", [(37, 129), (1001, 24), (64, 48)])
def test_layer_norm_gradients_with_column_partials(device, rows, cols):
    kernels = train_step(lambda: _layer_norm(cols), rand((rows, cols), device=device))
    # the weight's and bias's partials in the row kernel, then a small sum of each one's partials
    assert len(_column_kernels(kernels)) == 1, [k.name for k in kernels]
    assert len([k for k in kernels if k.kind == "reduction"]) == 3, [k.name for k in kernels]


def test_rms_norm_over_3d_input(device):
    """Rows are (batch, tokens): the weight's gradient sums over two dims."""
    kernels = train_step(lambda: RMSNorm(40), rand((3, 77, 40), device=device))
    assert len(_column_kernels(kernels)) == 1


def test_transposed_input(device):
    x = rand((48, 300), device=device).t()
    kernels = train_step(lambda: _layer_norm(48), x)
    assert all(k.kind != "fallback" for k in kernels)


def test_bf16_layer_norm(device):
    kernels = train_step(lambda: _layer_norm(72), rand((130, 72), device=device).to(torch.bfloat16),
                         rtol=5e-2, atol=5e-2)
    (k,) = _column_kernels(kernels)
    assert "tl.float32" in k.source   # partials accumulate in f32


def test_few_rows_keep_one_column_reduction(device):
    """Below `column_partial_min_rows` the column sums stay reductions of their own."""
    kernels = train_step(lambda: _layer_norm(32), rand((40, 32), device=device), heuristics=Heuristics())
    assert not _column_kernels(kernels)


def test_unfused_partials_are_still_exact(device):
    """Without fusion (strategy none) the partials and their sum are kernels of their own."""
    x, w = rand((60, 33), device=device), rand((60, 33), device=device)

    def f(x, w):
        return (x * w).sum(0), (x * w).sum(1)

    for strategy in ("none", "inductor"):
        options = CompileOptions(strict=True, poison=True, use_db=False, heuristics=SMALL, strategy=strategy)
        compiled = compile_traced(f, (x, w), options)
        for a, e in zip(compiled(x, w), f(x, w)):
            torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)
        n = len(_column_kernels(kernels_of(compiled)))
        assert n == (1 if strategy == "inductor" else 0)


def test_a_column_sum_without_a_row_partner_is_not_split(device):
    x = rand((70, 33), device=device)
    compiled = compile_traced(lambda x: x.sum(0), (x,), CompileOptions(strict=True, use_db=False, heuristics=SMALL))
    torch.testing.assert_close(compiled(x)[0], x.sum(0), rtol=1e-5, atol=1e-5)
    (k,) = kernels_of(compiled)
    assert not k.programs and "xpid" not in k.source


def test_rows_per_program():
    assert _rows_per_program(1000, 132) == 8      # 125 programs
    assert _rows_per_program(8192, 528) == 16     # 512 programs
    assert _rows_per_program(37, 528) == 1
    assert _rows_per_program(997, 132) is None    # prime: no divisor near 8


@pytest.mark.parametrize("name", ["deepseek_v3", "t5", "convnext"])
def test_model_training_steps_with_column_partials_at_any_row_count(name, device, monkeypatch):
    """Tiny transformers families' training steps (gradients, one AdamW step) with every column sum
    beside a row reduction made partials: their plans are re-checked in node order (a pointwise
    node between the partials and their row reduction once made a legal kernel look illegal)."""
    from dataclasses import replace

    import autofuse.lower.column_partials as column_partials
    import autofuse.lower.graph as graph
    from tests.test_model_families import _build, _loss
    from tests.test_models import _train_step_matches

    split = []

    def forced(g):
        h, n = g.heuristics, len(g.buffers)
        g.heuristics = replace(h, column_partial_min_rows=1)
        try:
            column_partials.split_column_sums(g)
        finally:
            g.heuristics = h
        split.append(len(g.buffers) > n)

    monkeypatch.setattr(graph, "split_column_sums", forced)
    model, inputs = _build(name)
    _train_step_matches(model, inputs, _loss, device, rtol=1e-4, atol=1e-5)
    assert any(split)


def test_column_sum_of_values_normalized_by_an_in_kernel_row_statistic(device):
    """One forward graph with both reductions: the column sum reads the row kernel's own statistic
    (computed in the kernel, read by the partials at their row), and f64."""
    x, g = rand((45, 21), torch.float64, device=device), rand((45, 21), torch.float64, device=device)

    def f(x, g):
        y = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)
        return y * 2, (y * g).sum(0)

    compiled = compile_traced(f, (x, g), CompileOptions(strict=True, poison=True, use_db=False, heuristics=SMALL))
    for a, e in zip(compiled(x, g), f(x, g)):
        torch.testing.assert_close(a, e)
    (k,) = _column_kernels(kernels_of(compiled))
    assert "tl.float64" in k.source
