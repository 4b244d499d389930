"""float8 (e4m3fn, e5m2) in generated kernels: conversions round and saturate as torch's do (nearest
even; e4m3fn saturates at 448, e5m2 overflows to infinity from 61440; NaN kept, signed zeros kept),
loads compute in float32, and a row-wise scaled quantization with its amax runs as one kernel.
Compared bit for bit with eager (values; NaN equal to NaN)."""
import pytest
import torch

from autofuse import CompileOptions
from autofuse.capture.trace import compile_traced
from tests.helpers import compile_and_compare, kernels_of, rand

FLOAT8 = [torch.float8_e4m3fn, torch.float8_e5m2]


def special_values(device):
    """Every boundary the formats have: saturation and overflow edges, ties at both ends of the
    subnormals, infinities, NaN, signed zeros; then random values over 40 binades."""
    edges = torch.tensor([0.0, -0.0, 232.0, 232.5, 239.9, 448.0, 460.0, 463.99, 464.0, 470.0, 500.0, 1e6, float("inf"), -float("inf"),
                          float("nan"), 1e-9, 2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -11, 2.0 ** -6, 57344.0, 60000.0,
                          61439.0, 61440.0, -61440.0, 1e-8, 2.0 ** -16, 2.0 ** -17, 3 * 2.0 ** -18, 2.0 ** -14])
    g = torch.Generator().manual_seed(0)
    spread = (torch.rand(3000, generator=g) * 40 - 20).exp2() * torch.randn(3000, generator=g).sign()
    return torch.cat([edges, torch.randn(2000, generator=g) * 30, spread]).to(device)


def same_values(actual, expected):
    torch.testing.assert_close(actual.float(), expected.float(), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("src", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("dst", FLOAT8)
def test_conversions_round_and_saturate_as_torch(device, src, dst):
    x = special_values(device).to(src)
    fn = lambda x: (x * 2).to(dst)  # noqa: E731
    compiled = compile_traced(fn, [x], CompileOptions(strict=True, use_db=False, poison=True))
    same_values(compiled(x)[0], fn(x))
    assert [k.kind for k in kernels_of(compiled)] == ["pointwise"]


@pytest.mark.parametrize("overflow", ["nan", "saturate"])
def test_e4m3_overflow_follows_the_torch_installed(device, overflow, monkeypatch):
    """torch's CUDA conversion up to 2.11 turns |x| > 464 (what rounds to 480, infinities too) to
    e4m3fn's NaN, its CPU one and later versions saturate at 448: kernels do what torch does on
    their device, read off its conversion once."""
    from autofuse.codegen import prelude as pre
    monkeypatch.setattr(pre, "e4m3_overflow", lambda device: '464.000030517578125, float("nan")' if overflow == "nan"
                        else 'float("nan"), float("nan")')
    pre.prelude.cache_clear()
    try:
        x = special_values(device)
        fn = lambda x: (x * 4).to(torch.float8_e4m3fn)  # noqa: E731
        compiled = compile_traced(fn, [x], CompileOptions(strict=True, use_db=False, poison=True))
        y = x * 4
        eager = y.to(torch.float8_e4m3fn).float()
        saturated = torch.where(eager.isnan() & ~y.isnan(), 448.0 * y.sign(), eager)
        expected = torch.where(y.abs() > 464, float("nan"), saturated) if overflow == "nan" else saturated
        same_values(compiled(x)[0], expected)
    finally:
        pre.prelude.cache_clear()


@pytest.mark.parametrize("dt", FLOAT8)
def test_loads_compute_in_float32(device, dt):
    """Infinities and NaN of the format read as themselves; a non-contiguous float8 input."""
    x = special_values(device)[:2400].reshape(60, 40).to(dt).t()
    compile_and_compare(lambda y: y.float() * 3 - 1, [x])


def test_rowwise_scaled_quantization_is_one_kernel(device):
    """The amax, the scale and the cast in one row kernel; the scale returned as well."""
    x = rand((33, 200), device=device) * 10

    def quantize(x):
        scale = 448.0 / x.abs().amax(-1, keepdim=True).clamp(min=1e-12)
        return (x * scale).to(torch.float8_e4m3fn), scale.reciprocal()
    compiled = compile_traced(quantize, [x], CompileOptions(strict=True, use_db=False, poison=True))
    q, inv = compiled(x)
    eq, einv = quantize(x)
    same_values(q, eq)
    torch.testing.assert_close(inv, einv)
    assert [k.kind for k in kernels_of(compiled)] == ["reduction"]


def test_dequantize_then_matmul(device):
    """float8 weights read, scaled back and multiplied: the dequantization fuses before the product."""
    w = (rand((48, 64), device=device) * 100).to(torch.float8_e5m2)
    x = rand((5, 64), device=device)
    compile_and_compare(lambda x, w, s: x @ (w.float() * s).t(), [x, w, rand((48, 1), device=device)],
                        atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dt", FLOAT8)
def test_a_conversion_read_back_in_the_same_kernel(device, dt):
    """`x.to(float8).float()` inside one kernel: the rounded value, NaN and infinities included."""
    x = special_values(device)
    fn = lambda x: (x * 2).to(dt).float() + 1  # noqa: E731
    compiled = compile_traced(fn, [x], CompileOptions(strict=True, use_db=False, poison=True))
    same_values(compiled(x)[0], fn(x))
    assert len(kernels_of(compiled)) == 1
