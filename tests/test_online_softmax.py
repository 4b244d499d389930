"""Online softmax (LaunchConfig.online): a looped kernel's sum(exp(v - max(v))) runs in the max's r
loop. Softmax, log_softmax and cross-entropy against eager on poisoned buffers — rows longer than
RBLOCK with a partial last block, partial x blocks, a transposed input, bf16 logits, -inf, +inf and
NaN entries, whole rows of -inf — one r loop fewer than without it, the default heuristics' choice,
the config's JSON, and the rule rejecting kernels without the pattern. Each correctness test runs
both update forms: per-element lanes (4 warps: one element per thread and r block) and chunks
(1 warp: each thread holds 4 contiguous elements, online.chunk_width)."""
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from autofuse import CompileOptions
from autofuse.capture.trace import compile_traced, trace_aten
from autofuse.codegen.config import LaunchConfig
from autofuse.compiler import compile_graph
from autofuse.plan.plan import FusionPlan, PlanError
from tests.helpers import assert_close, kernels_of, rand

LOOPED = dict(persistent=False, XBLOCK=2, RBLOCK=64)
FORMS = {"lanes": dict(num_warps=4), "chunks": dict(num_warps=1)}


@pytest.fixture(params=list(FORMS))
def form(request):
    return request.param


def online_plan(fn, args, online=True, **config):
    """The default plan with `config` on every reduction kernel, online where the kernel has the pattern."""
    art = compile_graph(trace_aten(fn, args), args, CompileOptions(strict=True, use_db=False))
    graph_kernels = []
    for kp, info in zip(art.plan.kernels, art.kernels):
        if info.kind == "reduction":
            kp = replace(kp, config=replace(kp.config, **config, online=online and "amax" in info.name))
        graph_kernels.append(kp)
    return replace(art.plan, kernels=tuple(graph_kernels))


def run(fn, args, online=True, form="lanes", strided=False, **config):
    plan = online_plan(fn, args, online, **{**LOOPED, **FORMS[form], **config})
    compiled = compile_traced(fn, args, CompileOptions(strict=True, use_db=False, poison=True, plan=plan))
    expected = fn(*args)
    actual = compiled(*args)
    for k in kernels_of(compiled):
        if k.config.online:  # the form asked for is the form generated (lanes over strided rows)
            assert ("tl.reshape(" in k.source) == (form == "chunks" and not strided), k.source
    assert_close(actual if isinstance(expected, (list, tuple)) else actual[0], expected)
    return compiled


def loops(compiled) -> int:
    return sum(k.source.count("for roffset") for k in kernels_of(compiled) if k.kind == "reduction")


def softmax(x):
    return torch.softmax(x, -1)


def log_softmax(x):
    return torch.log_softmax(x, -1)


def cross_entropy(logits, target):
    return F.cross_entropy(logits.float(), target)


@pytest.mark.parametrize("fn", [softmax, log_softmax], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", [(37, 1000), (5, 64), (3, 9), (9, 4099)])
def test_online_matches_eager_and_saves_a_loop(fn, shape, form):
    x = rand(shape) * 4
    online = run(fn, [x], form=form)
    plain = run(fn, [x], online=False)
    assert any(k.config.online for k in kernels_of(online))
    assert loops(online) == loops(plain) - 1


def test_cross_entropy_bf16_one_loop(form):
    logits = rand((37, 1000), torch.bfloat16) * 3
    target = torch.randint(0, 1000, (37,)).to(logits.device)
    compiled = run(cross_entropy, [logits, target], form=form)
    fused = [k for k in kernels_of(compiled) if k.config.online]
    assert len(fused) == 1 and fused[0].source.count("for roffset") == 1


def test_transposed_input_and_xblock_4(form):
    x = rand((1000, 37)).t()   # rows strided: no thread holds contiguous r elements, lanes either way
    run(softmax, [x], XBLOCK=4, RBLOCK=128, form=form, strided=True, num_warps=16 if form == "lanes" else 1)


def test_special_values(form):
    x = rand((10, 300)) * 10
    x[0, 5] = float("-inf")                  # one -inf: contributes 0
    x[1, :] = float("-inf")                  # a row of -inf: NaN, as eager
    x[2, 17] = float("nan")                  # NaN propagates
    x[3, 250] = float("inf")                 # +inf: NaN in the sum (inf - inf)
    x[4, :200] = float("-inf")               # leading -inf lanes, then finite values
    x[5, 1::2] = float("-inf")               # half the lanes never see a finite value
    x[6, 0] = 80.0                           # a large max first, then small values
    x[7, 299] = 80.0                         # a large max last: every lane rescales
    x[8, :] = float("nan")                   # only NaN
    x[9, ::3] = float("nan")                 # NaN and -inf, no finite value
    x[9, 1::3] = float("-inf")
    for fn in (softmax, log_softmax):
        run(fn, [x], form=form)
        run(fn, [x], XBLOCK=1, RBLOCK=32 if form == "lanes" else 128, form=form)


@pytest.mark.parametrize("fn", [softmax, log_softmax], ids=["softmax", "log_softmax"])
def test_large_magnitudes(fn, form):
    """Values near 5000: each chunk's reference R = m·log2(e) is rounded by about 2^-24·7200; the
    sums stay relative to that same R, so outputs keep eager's precision."""
    x = rand((7, 1000)) * 30 + 5000
    x[3] -= 10000
    run(fn, [x], form=form)


def test_default_heuristics_choose_online_for_looped_kernels():
    x = rand((3, 5000))  # rows longer than the interpreter's persistent limit (4096): looped
    compiled = compile_traced(softmax, [x], CompileOptions(strict=True, use_db=False))
    assert_close(compiled(x)[0], softmax(x))
    red = [k for k in kernels_of(compiled) if k.kind == "reduction"]
    assert red and all(not k.config.persistent and k.config.online for k in red)


@pytest.mark.parametrize("rnumel", [1025, 1536, 2050, 2768, 4096, 4099, 5672, 11008])
def test_online_steps_leave_few_lanes_masked(rnumel):
    """The GPU default's online step is halved (to 256 at least) until its padded steps mask at
    most `online_max_waste` of their lanes, else the least wasteful step is taken."""
    from autofuse.schedule.heuristics import Heuristics
    h = Heuristics()
    cfg = h.launch_config("reduction", 4096, rnumel, False, legal={"online": True}, passes=2)
    assert cfg.online and not cfg.persistent and 256 <= cfg.RBLOCK <= h.looped_rblock_max

    def waste(r):
        return -(-rnumel // r) * r / rnumel - 1
    steps = [2048, 1024, 512, 256]
    if any(waste(r) <= h.online_max_waste for r in steps):
        assert cfg.RBLOCK == max(r for r in steps if waste(r) <= h.online_max_waste)
    else:
        assert waste(cfg.RBLOCK) == min(waste(r) for r in steps)
    assert not h.launch_config("reduction", 4096, rnumel, False, legal={"online": False}).online


def test_short_online_steps_match_eager():
    x = rand((9, 2050)) * 4   # the GPU default's step for rows of 2050: 256
    run(softmax, [x], form="chunks", RBLOCK=256)
    run(log_softmax, [x], form="lanes", RBLOCK=256, XBLOCK=1, num_warps=8)


def test_rejected_without_the_pattern():
    x, y = rand((6, 300)), rand((6, 300))

    def other_max(x, y):  # exp(y - max(x)): not the max's own input
        return torch.exp(y - x.amax(-1, keepdim=True)).sum(-1)

    def logsumexp(x):  # the max passes through where(isinf(...)) first
        return torch.logsumexp(x, -1)

    for fn, args in ((other_max, [x, y]), (logsumexp, [x])):
        plan = online_plan(fn, args, True, **LOOPED)
        if not any(k.config.online for k in plan.kernels):
            plan = replace(plan, kernels=tuple(replace(k, config=replace(k.config, online=True))
                                               if k.config is not None and not k.config.persistent else k
                                               for k in plan.kernels))
        with pytest.raises(PlanError, match="online softmax is impossible"):
            compile_traced(fn, args, CompileOptions(strict=True, use_db=False, plan=plan))(*args)


def test_persistent_online_is_rejected():
    x = rand((6, 300))
    plan = online_plan(softmax, [x], True, persistent=True, XBLOCK=1, RBLOCK=512)
    with pytest.raises(PlanError, match="looped reductions"):
        compile_traced(softmax, [x], CompileOptions(strict=True, use_db=False, plan=plan))(x)


def test_config_json():
    cfg = LaunchConfig(XBLOCK=1, RBLOCK=2048, persistent=False, online=True)
    assert cfg.to_json()["online"] is True and "online" not in replace(cfg, online=False).to_json()
    assert "online" in str(cfg)
    x = rand((6, 300))
    plan = online_plan(softmax, [x], True, **LOOPED)
    again = FusionPlan.from_json(plan.to_json())
    assert again == plan and any(k.config.online for k in again.kernels)


def test_deep_prologue_is_traced_once_per_producer():
    """A softmax after a chain where each op reads the one before twice: the pattern check traces
    each producer once (its cost linear in the chain), finds the pair, and the result matches eager."""
    import time

    from autofuse.codegen.online import online_pairs
    from autofuse.compiler import schedule

    def chain_softmax(x):
        for _ in range(24):
            x = torch.tanh(x) + 0.5 * x   # two reads of the value before: 2**24 paths unfolded
        return torch.softmax(x, -1)

    x = rand((4, 300))
    sched = schedule(trace_aten(chain_softmax, [x]), [x], CompileOptions(strict=True, use_db=False))
    t = time.perf_counter()
    pairs = [online_pairs(g.placements()) for g in sched.groups if g.is_reduction]
    assert time.perf_counter() - t < 5.0
    assert any(pairs)
    run(chain_softmax, [x], form="lanes")
