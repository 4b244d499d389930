"""fast_tanh (LaunchConfig.fast_tanh): legal only for kernels that use tanh and whose every buffer is
16-bit; the kernel then calls the hardware approximation; outputs stay within bf16/f16 tolerance of
eager (on the GPU; the interpreter runs the accurate tanh in its place)."""
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


def bias_gelu(x, b):
    return F.gelu(x + b, approximate="tanh")


def fast_plan(fn, args):
    art = compile_graph(trace_aten(fn, args), args, CompileOptions(strict=True, use_db=False))
    return replace(art.plan, kernels=tuple(replace(k, config=replace(k.config, fast_tanh=True)) for k in art.plan.kernels))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fast_tanh_16_bit(dtype):
    x, b = rand((37, 300), dtype, low=-6, high=6), rand((300,), dtype)
    plan = fast_plan(bias_gelu, [x, b])
    compiled = compile_traced(bias_gelu, [x, b], CompileOptions(strict=True, use_db=False, poison=True, plan=plan))
    assert_close(compiled(x, b)[0], bias_gelu(x, b))
    (k,) = kernels_of(compiled)
    assert k.config.fast_tanh and "_tanh_approx(" in k.source.split("def triton_")[1]


def test_fast_tanh_rejected_for_f32_and_without_tanh():
    x, b = rand((8, 30)), rand((30,))
    with pytest.raises(PlanError, match="fast_tanh is impossible: .* not a 16-bit"):
        compile_traced(bias_gelu, [x, b], CompileOptions(strict=True, use_db=False,
                                                         plan=fast_plan(bias_gelu, [x, b])))(x, b)
    h = rand((8, 30), torch.bfloat16)
    relu = lambda t: torch.relu(t) * 2  # noqa: E731
    with pytest.raises(PlanError, match="has no tanh"):
        compile_traced(relu, [h], CompileOptions(strict=True, use_db=False, plan=fast_plan(relu, [h])))(h)


def test_fast_tanh_json():
    cfg = LaunchConfig(XBLOCK=1024, fast_tanh=True)
    assert cfg.to_json()["fast_tanh"] is True and "fast_tanh" not in LaunchConfig(XBLOCK=1024).to_json()
    x, b = rand((8, 30), torch.bfloat16), rand((30,), torch.bfloat16)
    plan = fast_plan(bias_gelu, [x, b])
    assert FusionPlan.from_json(plan.to_json()) == plan


def test_legal_options_tell_f32_and_bf16_groups_apart():
    """The search reuses a kernel's tuned config only among groups allowing the same options: the
    same source can come from groups where fast_tanh is legal and from groups where it is not."""
    from autofuse.compiler import schedule
    from autofuse.search.candidates import legal_options

    def options_of(dtype):
        x, b = rand((8, 30), dtype), rand((30,), dtype)
        opts = CompileOptions(strict=True, use_db=False)
        (group,) = schedule(trace_aten(bias_gelu, [x, b]), [x, b], opts).groups
        return legal_options(group)

    bf16, f32 = options_of(torch.bfloat16), options_of(torch.float32)
    assert ("fast_tanh", True) in bf16 and not any(name == "fast_tanh" for name, _ in f32)
    assert not any(name in ("split", "online") for name, _ in bf16 | f32)   # a pointwise kernel
    assert bf16 - f32 == {("fast_tanh", False), ("fast_tanh", True)}


def test_division_by_a_constant_power_of_two_or_zero_multiplies_by_its_exact_inverse(device):
    """Triton's f32 `/` is approximate on the GPU (within 2 ulp). Division by 2^k or by 0 is
    multiplication by 2^-k or by inf, which is IEEE division; other constants keep the division."""
    x = rand((19, 1), device=device)
    fn = lambda x: (x.var(-1, correction=1, keepdim=True), x / 4, x / 3, -x / -0.0)  # noqa: E731
    compiled = compile_traced(fn, [x], CompileOptions(strict=True, use_db=False, poison=True))
    for got, want in zip(compiled(x), fn(x)):
        assert_close(got, want)
    body = [line for k in kernels_of(compiled) for line in k.source.splitlines() if line.strip().startswith("tmp")]
    assert any('* float("-inf")' in line for line in body) and any("* 0.25" in line for line in body)
    assert sum(" / " in line for line in body) == 1   # x / 3
