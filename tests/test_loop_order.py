"""Loops reordered to fuse: a pointwise node whose sizes put a reduction's r extent before its x
extent (softmax over a leading dim, centring columns) joins the reduction's kernel with its loops
reordered (schedule/loops.py `reorderings`), as Inductor reorders loops after fusion."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from autofuse.capture.trace import trace_aten
from autofuse.compiler import compile_graph
from autofuse.options import CompileOptions
from autofuse.schedule.loops import reorderings
from autofuse.search.candidates import _family, candidate_configs
from tests.helpers import assert_close, rand

CASES = {
    "softmax_first": (lambda x: torch.softmax(x, 0), (64, 9, 33)),
    "softmax_middle": (lambda x: torch.softmax(x, 1), (6, 50, 33)),
    "log_softmax_first": (lambda x: torch.log_softmax(x, 0), (70, 129)),
    "center_columns": (lambda x: x - x.mean(0), (300, 17)),
    "normalize_columns": (lambda x: torch.nn.functional.normalize(x, dim=0), (100, 37)),
    "softmax_first_transposed": (lambda x: torch.softmax(x.transpose(0, 1), 0), (33, 64)),
    # channels, height and width of one size: the reads of the row's max and sum name the r dim
    "softmax_channels_equal_sizes": (lambda x: torch.sigmoid(torch.softmax(x, 1) * 2.0), (3, 8, 8, 8)),
    "log_softmax_middle_equal_sizes": (lambda x: torch.log_softmax(x, 1) + 1.0, (5, 6, 6)),
}


def _kernels(fn, args, **kw):
    art = compile_graph(trace_aten(fn, args), args, CompileOptions(strict=True, use_db=False, poison=True, **kw))
    return art, [k for k in art.kernels if k.kind != "fallback"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_into_one_kernel_and_equal_to_eager(name):
    fn, shape = CASES[name]
    x = rand(shape)
    art, kernels = _kernels(fn, (x,))
    assert len(kernels) == 1, [k.name for k in kernels]
    assert_close(art.program([x])[0], fn(x))


@pytest.mark.parametrize("name", ["softmax_first", "center_columns"])
def test_every_config_family_of_the_fused_kernel(name):
    """Looped rows (the reordered node in a second r loop), online softmax, early loads, cache
    hints, other blocks: each family's first candidate computes eager's values."""
    fn, shape = CASES[name]
    x = rand(shape)
    art, _ = _kernels(fn, (x,))
    (gi, g), = [(i, g) for i, g in enumerate(art.groups) if g.is_reduction]
    seen, tried = set(), 0
    for cfg in candidate_configs(g, art.plan.kernels[gi].config, interpret=True, limit=400):
        if _family(cfg) in seen:
            continue
        seen.add(_family(cfg))
        kernels = tuple(replace(k, config=cfg) if i == gi else k for i, k in enumerate(art.plan.kernels))
        checked, _ = _kernels(fn, (x,), plan=replace(art.plan, kernels=kernels))
        assert_close(checked.program([x])[0], fn(x))
        tried += 1
    assert tried >= 3 and any(not c[0] for c in seen)   # looped configs among them


def test_a_reduction_the_gpu_would_split_keeps_its_consumer_apart():
    """Few columns of many rows: the GPU default splits the column mean, which a consumer inside
    its r loop would forbid, so the consumer stays a kernel of its own."""
    x = rand((1 << 16, 17))
    fn = lambda x: x - x.mean(0)  # noqa: E731
    _, kernels = _kernels(fn, (x,))
    assert len(kernels) == 2


def test_reorderings():
    assert reorderings((64, 9, 33), 9 * 33, 64) == [((1, 2, 0), 2)]
    assert reorderings((6, 50, 33), 6 * 33, 50) == [((0, 2, 1), 2)]
    assert reorderings((1, 64, 1, 7), 7, 64) == [((0, 2, 3, 1), 3)]   # size-1 dims stay in x
    assert reorderings((6, 50), 7, 50) == []                           # no way
    # two ways: sizes alone do not say which; a consumer's reads decide (`placement`)
    assert reorderings((8, 8, 5), 40, 8) == [((1, 2, 0), 2), ((0, 2, 1), 2)]