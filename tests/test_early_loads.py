"""early_loads (LaunchConfig.early_loads): in a persistent reduction the loads of nodes after a
reduction are emitted before it; outputs match eager on poisoned buffers (non-power-of-two rows,
partial blocks, a transposed input); masked and indirect loads stay where they are; plans that ask
for it where it changes nothing are rejected with a reason; the search offers it."""
import re
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from autofuse import CompileOptions
from autofuse.capture.trace import compile_traced, trace_aten
from autofuse.codegen.config import LaunchConfig
from autofuse.compiler import compile_graph
from autofuse.plan.plan import KernelPlan, PlanError
from tests.helpers import assert_close, kernels_of, rand, reduction_candidates


def rmsnorm(x, w):
    return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w


def layernorm_residual(x, r, w, b):
    h = x + r
    return F.layer_norm(h, h.shape[-1:], w, b), h


def early_plan(fn, args, **config):
    art = compile_graph(trace_aten(fn, args), args, CompileOptions(strict=True, use_db=False))
    kernels = tuple(replace(kp, config=replace(kp.config, early_loads=True, **config)) if info.kind == "reduction"
                    else kp for kp, info in zip(art.plan.kernels, art.kernels))
    return replace(art.plan, kernels=kernels)


def check(fn, args, **config):
    plan = early_plan(fn, args, **config)
    compiled = compile_traced(fn, args, CompileOptions(strict=True, use_db=False, poison=True, plan=plan))
    expected = fn(*args)
    actual = compiled(*args)
    assert_close(actual if isinstance(expected, (list, tuple)) else actual[0], expected)
    return compiled


def body(kernel):
    return kernel.source.split(f"def {kernel.fn_name}(")[1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rmsnorm_weight_loaded_before_the_reduction(dtype):
    x, w = rand((37, 300), dtype), rand((300,), dtype)
    compiled = check(rmsnorm, [x, w], XBLOCK=4, RBLOCK=512, persistent=True)
    (k,) = [k for k in kernels_of(compiled) if k.kind == "reduction"]
    src = body(k)
    weight = src.index("tl.load(in_ptr1")
    assert weight < src.index("tl.reduce(") and src.count("tl.load(in_ptr1") == 1


def test_layernorm_residual_transposed_input():
    x = rand((50, 200), noncontig=True)
    r, w, b = rand((50, 200)), rand((200,)), rand((200,))
    compiled = check(layernorm_residual, [x, r, w, b], XBLOCK=2, RBLOCK=256, persistent=True)
    (k,) = [k for k in kernels_of(compiled) if k.kind == "reduction"]
    src = body(k)
    first_reduce = src.index("tl.reduce(")
    loads = [src.index(f"tl.load(in_ptr{i}") for i in range(4)]
    assert all(p < first_reduce for p in loads)  # x, r, and the weight and bias of the epilogue


def test_masked_and_indirect_loads_stay_after_the_reduction():
    # a padded tail (its load masked: hoisted unmasked it would read past the last row) and a gather
    # by an index from memory: neither is hoisted; the index itself (a direct load) is
    def fn(x, y, idx):
        s = x.sum(-1, keepdim=True)
        return x / s + F.pad(y, (0, 3)) + torch.gather(y, 1, idx)[:, :1]
    x, y = rand((9, 40), low=1, high=2), rand((9, 37))
    idx = torch.randint(0, 37, (9, 40), device=x.device)
    compiled = check(fn, [x, y, idx], XBLOCK=2, RBLOCK=64, persistent=True)
    (k,) = [k for k in kernels_of(compiled) if k.kind == "reduction"]
    src = body(k)
    before, after = src.split("tl.reduce(", 1)
    y_ptr = re.search(r"tl\.load\((in_ptr\d) \+ \(\(rindex \+ \(37 \* xindex\)\)\), xrmask & tmp", after).group(1)
    assert f"tl.load({y_ptr}" not in before and before.count("tl.load(") == 2  # x and the gather's index
    assert re.search(rf"tl\.load\({y_ptr} \+ \(tl\.broadcast_to\(\(tmp\d+ \+", after)  # the gather, after


def test_rejected_where_it_changes_nothing():
    x = rand((8, 64))
    with pytest.raises(PlanError, match="early_loads is impossible: no load waits for a reduction"):
        check(lambda x: x.sum(-1), [x], XBLOCK=2, RBLOCK=64, persistent=True)
    with pytest.raises(PlanError, match="early loads are for persistent reductions"):
        check(rmsnorm, [x, rand((64,))], XBLOCK=2, RBLOCK=16, persistent=False)


def test_config_json_and_the_search_offers_it():
    cfg = LaunchConfig(XBLOCK=1, RBLOCK=4096, num_warps=8, early_loads=True)
    kp = KernelPlan(("a",), cfg)
    assert KernelPlan.from_json(kp.to_json()) == kp and "early_loads" in str(cfg)
    assert "early_loads" not in replace(cfg, early_loads=False).to_json()
    configs = reduction_candidates(rmsnorm, [rand((64, 256)), rand((256,))])
    assert any(c.early_loads and c.persistent for c in configs)
    assert not any(c.early_loads and not c.persistent for c in configs)
    assert not any(c.early_loads for c in reduction_candidates(lambda x: x.sum(-1), [rand((64, 256))]))
