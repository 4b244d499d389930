"""cache_hints (LaunchConfig.cache_hints): L2 eviction hints on a reduction kernel's loads — evict_last
on loads every program reads (a weight) and on a looped reduction's reads that a later pass repeats,
evict_first on a buffer's last pass, none on a persistent row; masked and gathered loads carry none.
Outputs match eager on poisoned buffers (non-power-of-two rows, partial blocks, a transposed input);
plans that ask for it where no load gets a hint are rejected with a reason; the search offers it.
In a pointwise kernel it makes the stores streaming (`.cs`)."""
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
from autofuse.schedule.heuristics import Heuristics
from tests.helpers import assert_close, kernels_of, rand, reduction_candidates


def rmsnorm(x, w):
    return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w


def layernorm(x, w, b):
    return F.layer_norm(x, x.shape[-1:], w, b)


def check(fn, args, **config):
    art = compile_graph(trace_aten(fn, args), args, CompileOptions(strict=True, use_db=False))
    kernels = tuple(replace(kp, config=replace(kp.config, cache_hints=True, **config)) if info.kind == "reduction"
                    else kp for kp, info in zip(art.plan.kernels, art.kernels))
    plan = replace(art.plan, kernels=kernels)
    compiled = compile_traced(fn, args, CompileOptions(strict=True, use_db=False, poison=True, plan=plan))
    expected = fn(*args)
    actual = compiled(*args)
    assert_close(actual if isinstance(expected, (list, tuple)) else actual[0], expected)
    (k,) = [k for k in kernels_of(compiled) if k.kind == "reduction"]
    return k.source.split(f"def {k.fn_name}(")[1]


def policies(src):
    """in_ptr name -> the eviction policies of its loads, in source order ('' for none)."""
    out = {}
    for m in re.finditer(r"tl\.load\((in_ptr\d+) [^\n]*?(?:eviction_policy='(\w+)')?\)(?:\.to\([^)]*\))?\n", src):
        out.setdefault(m.group(1), []).append(m.group(2) or "")
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_persistent_rmsnorm_hints_only_the_weight(dtype):
    x, w = rand((37, 300), dtype), rand((300,), dtype)
    p = policies(check(rmsnorm, [x, w], XBLOCK=4, RBLOCK=512, persistent=True))
    assert p == {"in_ptr0": [""], "in_ptr1": ["evict_last"]}


def test_looped_layernorm_keeps_the_row_for_its_second_pass():
    x = rand((20, 1500), noncontig=True)   # a transposed input: its loads stride along x
    w, b = rand((1500,)), rand((1500,))
    p = policies(check(layernorm, [x, w, b], XBLOCK=2, RBLOCK=256, persistent=False))
    # rows past the persistent threshold take the variance in one pass: the row's shift (once per
    # row, before the loop), the statistics' pass, then the last pass
    assert p["in_ptr0"] == ["", "evict_last", "evict_first"]
    assert p["in_ptr1"] == ["evict_last"] and p["in_ptr2"] == ["evict_last"]


def test_looped_single_pass_streams_and_split():
    x = rand((6, 1000))
    p = policies(check(lambda x: x.sum(-1), [x], XBLOCK=2, RBLOCK=128, persistent=False))
    assert p == {"in_ptr0": ["evict_first"]}
    y = rand((1000, 5))   # a column sum in split form: partial programs stream, no pass repeats
    p = policies(check(lambda y: y.sum(0), [y], XBLOCK=8, RBLOCK=16, persistent=False, split=4))
    assert p == {"in_ptr0": ["evict_first"]}


def test_masked_and_indirect_loads_carry_no_hint():
    def fn(x, y, idx):
        s = x.sum(-1, keepdim=True)
        return x / s + F.pad(y, (0, 3)) + torch.gather(y, 1, idx)[:, :1]
    x, y = rand((9, 40), low=1, high=2), rand((9, 37))
    idx = torch.randint(0, 37, (9, 40), device=x.device)
    src = check(fn, [x, y, idx], XBLOCK=2, RBLOCK=16, persistent=False)
    for line in src.splitlines():
        if "tl.load(" in line and ("& tmp" in line or "broadcast_to((tmp" in line):
            assert "eviction_policy" not in line, line   # the padded (masked) load and the gather
    assert "eviction_policy='evict_first'" in src   # x's last pass and the gather's index


def test_rejected_where_no_load_gets_a_hint():
    x = rand((8, 64))
    with pytest.raises(PlanError, match="cache_hints is impossible: no load in the reduction's block"):
        check(lambda x: x.sum(-1), [x], XBLOCK=2, RBLOCK=64, persistent=True)


def test_config_json_and_the_search_offers_it():
    cfg = LaunchConfig(XBLOCK=1, RBLOCK=4096, num_warps=8, cache_hints=True)
    kp = KernelPlan(("a",), cfg)
    assert KernelPlan.from_json(kp.to_json()) == kp and "cache_hints" in str(cfg)
    assert "cache_hints" not in replace(cfg, cache_hints=False).to_json()
    configs = reduction_candidates(rmsnorm, [rand((64, 4096)), rand((4096,))])
    assert any(c.cache_hints and c.persistent for c in configs)
    assert any(c.cache_hints and not c.persistent for c in configs)
    row_sum = reduction_candidates(lambda x: x.sum(-1), [rand((64, 4096))])
    assert not any(c.cache_hints and c.persistent for c in row_sum)   # its row is read once, by one program
    assert any(c.cache_hints and not c.persistent for c in row_sum)


def test_looped_row_defaults_on_the_gpu_carry_hints():
    h = Heuristics()
    hints, online_hints = {"cache_hints": True}, {"online": True, "cache_hints": True}
    looped = h.launch_config("reduction", 32768, 4096, False, legal=hints)
    assert not looped.persistent and looped.cache_hints       # one row, 2048, 8 warps
    assert not h.launch_config("reduction", 32768, 4096, False, legal={}).cache_hints   # not legal there
    assert not h.launch_config("reduction", 32768, 4096, True, legal=hints).cache_hints     # the interpreter
    assert not h.launch_config("reduction", 32768, 512, False, legal=hints).cache_hints    # persistent
    online = h.launch_config("reduction", 8192, 32000, False, legal=online_hints)
    assert online.online and not online.cache_hints   # measured slower with them (docs/defaults.md)
    assert replace(h, online_cache_hints=True).launch_config("reduction", 8192, 32000, False,
                                                             legal=online_hints).cache_hints
    assert not h.launch_config("reduction", 4096, 16384, False, outer=True, legal=hints).cache_hints
    assert not replace(h, looped_cache_hints=False).launch_config("reduction", 32768, 4096, False,
                                                                  legal=hints).cache_hints


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_one_step_looped_row_reads_twice_and_is_offered(dtype):
    """RBLOCK = the whole (non-power-of-two, masked) row, looped: one loop step per pass, the second
    read of the row from L2 (Inductor's max-autotune rmsnorm form). Correct, hinted, in the search."""
    x, w = rand((37, 300), dtype), rand((300,), dtype)
    src = check(rmsnorm, [x, w], XBLOCK=2, RBLOCK=512, persistent=False)
    assert "range(0, 300, RBLOCK)" in src
    assert policies(src)["in_ptr0"] == ["evict_last", "evict_first"]
    configs = reduction_candidates(rmsnorm, [rand((64, 4096)), rand((4096,))])
    assert any(not c.persistent and c.RBLOCK == 4096 and c.cache_hints for c in configs)


def swiglu(a, b):
    return (F.silu(a.float()) * b.float()).to(a.dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pointwise_stores_stream_and_match_eager(dtype):
    a, b = rand((37, 301), dtype), rand((37, 301), dtype, noncontig=True)
    gm = trace_aten(swiglu, [a, b])
    art = compile_graph(gm, [a, b], CompileOptions(strict=True, use_db=False))
    plan = replace(art.plan, kernels=tuple(replace(kp, config=replace(kp.config, cache_hints=True))
                                           for kp in art.plan.kernels))
    compiled = compile_traced(swiglu, [a, b], CompileOptions(strict=True, use_db=False, poison=True, plan=plan))
    assert_close(compiled(a, b)[0], swiglu(a, b))
    (k,) = kernels_of(compiled)
    body = k.source.split(f"def {k.fn_name}(")[1]
    stores = re.findall(r"tl\.store\([^\n]*\)\n", body)
    assert stores and all("cache_modifier='.cs'" in st for st in stores)
    assert "eviction_policy" not in body


def test_the_search_offers_streaming_stores_on_pointwise_kernels():
    from autofuse.compiler import schedule
    from autofuse.search.candidates import candidate_configs, neighbour_configs
    args = [rand((64, 1000)), rand((64, 1000))]
    (group,) = schedule(trace_aten(swiglu, args), args, CompileOptions(strict=True, use_db=False)).groups
    default = Heuristics().launch_config("pointwise", group.numel, 1, False)
    configs = candidate_configs(group, default, interpret=False, limit=500)
    assert not default.cache_hints and any(c.cache_hints for c in configs)
    assert {replace(c, cache_hints=False) for c in configs if c.cache_hints} <= set(configs)
    assert replace(default, cache_hints=True) in neighbour_configs(default, group)
