"""flex attention's forward as one generated kernel: its score_mod and mask_mod inside an online
softmax over key blocks (codegen/flex_attention.py), compared with eager's flex attention on
poisoned buffers; lengths that are not multiples of the tiles, grouped heads, a transposed query,
captured tensors indexed by head and by position, the logsumexp it returns. What the kernel does
not take (head dims that are not powers of two of at least 16) runs as ATen's op, still correct."""
import warnings

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import autofuse
from autofuse.api import Recorder
from tests.helpers import assert_close, rand

TOL = {torch.float32: dict(atol=2e-5, rtol=1e-4), torch.bfloat16: dict(atol=3e-2, rtol=3e-2)}


def fused(kernels):
    """For each flex attention step of the program: does it run the generated kernel?"""
    steps = [k for k in kernels if "flex_attention" in k.aten_ops]
    return [k.fn_name == "triton_flex_attention_fwd" for k in steps]


def check(fn, args, dtype):
    """fn compiled through Dynamo (as users compile it; the captured tensors a score_mod indexes
    need Dynamo's capture), strict, on poisoned buffers, compared with eager; its kernels."""
    rec = Recorder()
    compiled = autofuse.compile(fn, strict=True, use_db=False, poison=True, recorder=rec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")    # eager flex attention warns that it is not fused
        expected = fn(*args)
        actual = compiled(*args)
    assert_close(actual, expected, **TOL[dtype])
    return [k for _, _, artifacts in rec.graphs for k in artifacts.kernels]


def qkv(device, dtype, heads=(3, 3), m=45, n=37, d=16, dv=32):
    return (rand((2, heads[0], m, d), dtype, device), rand((2, heads[1], n, d), dtype, device),
            rand((2, heads[1], n, dv), dtype, device))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_score_function_with_a_captured_tensor_per_head(device, dtype):
    """ALiBi: a slope per head times the distance, causal by -inf; lengths not multiples of the tiles."""
    q, k, v = qkv(device, dtype)
    slopes = rand((3,), device=device)

    def alibi(s, b, h, qi, ki):
        return torch.where(qi >= ki, s + slopes[h] * (ki - qi), float("-inf"))

    def fn(q, k, v):
        return flex_attention(q, k, v, score_mod=alibi) * 2
    assert fused(check(fn, [q, k, v], dtype)) == [True]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bias_table_by_position_and_soft_capping(device, dtype):
    q, k, v = qkv(device, dtype)
    bias = rand((45, 37), device=device)
    table = lambda s, b, h, qi, ki: s + bias[qi, ki - 36]  # noqa: E731   (negative columns count from the end)
    capped = lambda s, b, h, qi, ki: torch.tanh(s / 20) * 20  # noqa: E731

    def fn(q, k, v):
        return flex_attention(q, k, v, score_mod=table) + flex_attention(q, k, v, score_mod=capped)
    assert fused(check(fn, [q, k, v], dtype)) == [True, True]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_block_mask_with_a_sliding_window(device, dtype):
    q, k, v = qkv(device, dtype, m=40, n=40)
    mask = create_block_mask(lambda b, h, qi, ki: (qi >= ki) & (qi - ki < 9), None, None, 40, 40, device=device)
    assert fused(check(lambda q, k, v: flex_attention(q, k, v, block_mask=mask), [q, k, v], dtype)) == [True]


def test_grouped_heads_and_a_transposed_query(device):
    q, k, v = qkv(device, torch.float32, heads=(4, 2))
    qt = q.transpose(1, 2).contiguous().transpose(1, 2)   # [B, M, H, D] memory, [B, H, M, D] view
    fn = lambda q, k, v: flex_attention(q, k, v, enable_gqa=True) + 1  # noqa: E731
    assert fused(check(fn, [qt, k, v], torch.float32)) == [True]


def test_logsumexp_returned(device):
    q, k, v = qkv(device, torch.float32)
    half = lambda s, b, h, qi, ki: s * 0.5  # noqa: E731

    def fn(q, k, v):
        out, lse = flex_attention(q, k, v, score_mod=half, return_lse=True)
        return out, lse * 2
    assert fused(check(fn, [q, k, v], torch.float32)) == [True]


def test_fully_masked_rows_give_zeros(device):
    """Rows whose every key is masked out: output 0 and logsumexp -inf, as eager's."""
    q, k, v = qkv(device, torch.float32, m=40, n=40)
    mask = create_block_mask(lambda b, h, qi, ki: qi >= 8, None, None, 40, 40, device=device)

    def fn(q, k, v):
        out, lse = flex_attention(q, k, v, block_mask=mask, return_lse=True)
        return out, lse
    assert fused(check(fn, [q, k, v], torch.float32)) == [True]


def test_head_dim_the_kernel_does_not_take_runs_as_aten(device):
    q, k, v = qkv(device, torch.float32, d=8, dv=8)
    compiled = check(lambda q, k, v: flex_attention(q, k, v) - 1, [q, k, v], torch.float32)
    assert fused(compiled) == [False]


def test_training_step(device):
    """The forward runs the kernel, the backward ATen's op on the logsumexp the kernel returned."""
    if device == "cpu":
        pytest.skip("eager flex attention has no backward on the CPU")
    q, k, v = (t.requires_grad_() for t in qkv(device, torch.float32))
    slopes = rand((3,), device=device)
    alibi = lambda s, b, h, qi, ki: s + slopes[h] * (ki - qi)  # noqa: E731

    def fn(q, k, v):
        return flex_attention(q, k, v, score_mod=alibi).sum()
    fn(q, k, v).backward()
    expected = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    compiled = autofuse.compile(fn, strict=True, use_db=False)
    compiled(q, k, v).backward()
    for got, want in zip((q.grad, k.grad, v.grad), expected):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-3)


def test_explain_names_the_generated_kernel(device):
    q, k, v = qkv(device, torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = autofuse.explain(lambda q, k, v: flex_attention(q, k, v) * 3, [q, k, v], use_db=False)
    assert "runs generated kernel triton_flex_attention_fwd" in str(report)


def test_mask_by_floor_division_and_remainder(device):
    """A block-diagonal mask (documents of 8 tokens) and a strided one: the prelude's floor division
    and remainder, as eager's for negative operands too."""
    q, k, v = qkv(device, torch.float32, m=40, n=40)
    docs = create_block_mask(lambda b, h, qi, ki: ((qi - 20) // 8 == (ki - 20) // 8) | ((qi - ki) % 5 == 0),
                             None, None, 40, 40, device=device)
    assert fused(check(lambda q, k, v: flex_attention(q, k, v, block_mask=docs), [q, k, v], torch.float32)) == [True]


def sparse(kernels):
    """For each generated flex attention kernel: does it visit only the block mask's listed blocks?"""
    return ["KV_IDX" in k.source for k in kernels if k.fn_name == "triton_flex_attention_fwd"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_causal_block_mask_visits_only_listed_blocks(device, dtype):
    """Blocks smaller than the sequences: partial blocks (the diagonal) with mask_mod, full blocks
    without, blocks above the diagonal skipped; lengths not multiples of the blocks."""
    q, k, v = qkv(device, dtype, m=70, n=70)
    mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, 70, 70, device=device, BLOCK_SIZE=16)
    kernels = check(lambda q, k, v: flex_attention(q, k, v, block_mask=mask), [q, k, v], dtype)
    assert fused(kernels) == [True] and sparse(kernels) == [True]


def test_block_mask_per_head_with_unequal_blocks_and_grouped_heads(device):
    """A window that differs per head, query blocks of 32 and key blocks of 16, a key length that is
    a multiple of the key tile (unmasked key loads), grouped heads, a score_mod on top."""
    q, k, v = qkv(device, torch.float32, heads=(4, 2), m=50, n=64)
    window = lambda b, h, qi, ki: (ki <= qi + 4) & (qi - ki < 8 + 8 * h)  # noqa: E731
    mask = create_block_mask(window, 2, 4, 50, 64, device=device, BLOCK_SIZE=(32, 16))
    half = lambda s, b, h, qi, ki: s * 0.5 + h  # noqa: E731

    def fn(q, k, v):
        return flex_attention(q, k, v, score_mod=half, block_mask=mask, enable_gqa=True)
    kernels = check(fn, [q, k, v], torch.float32)
    assert fused(kernels) == [True] and sparse(kernels) == [True]


def test_block_mask_without_full_blocks_and_query_blocks_with_no_keys(device):
    """A block mask built from its partial blocks alone (mask_mod applied to every listed block),
    and a query block that lists no key block: its rows give 0 and logsumexp -inf, as eager's."""
    from torch.nn.attention.flex_attention import BlockMask
    q, k, v = qkv(device, torch.float32, m=48, n=48)
    late = lambda b, h, qi, ki: (qi >= 20) & (ki <= qi)  # noqa: E731
    dense = create_block_mask(late, None, None, 48, 48, device=device, BLOCK_SIZE=16)
    counts = dense.kv_num_blocks + dense.full_kv_num_blocks
    indices = torch.sort(torch.where(torch.arange(3, device=device)[None, None, None, :] < counts[..., None],
                                     torch.arange(3, device=device, dtype=torch.int32), 99), dim=-1).values
    mask = BlockMask.from_kv_blocks(counts.int(), indices.int().clamp(max=2).contiguous(), BLOCK_SIZE=16,
                                    mask_mod=late, seq_lengths=(48, 48))

    def fn(q, k, v):
        return flex_attention(q, k, v, block_mask=mask, return_lse=True)
    kernels = check(fn, [q, k, v], torch.float32)
    assert fused(kernels) == [True] and sparse(kernels) == [True]


def test_tile_sweep_replaces_the_kernels_key_load_and_clamps_tiles_to_a_block_mask():
    """benchmarks/flex_tiles.py rewrites the key load it finds in the kernel's step (a changed
    load would leave its transposed rows measuring the row-major kernel) and fixes tiles no larger
    than a block mask's blocks."""
    from autofuse.codegen import flex_attention as kernel_text
    from autofuse.runtime.flex_attention import Launch, Sparsity
    from benchmarks.flex_tiles import KEYS_ROW, KEYS_TRANSPOSED, fixed_pick
    assert kernel_text.STEP.count(KEYS_ROW) == 1
    assert "tl.trans(" in kernel_text.STEP.replace(KEYS_ROW, KEYS_TRANSPOSED)
    pick = fixed_pick((128, 64, 8, 3))
    assert pick(64, torch.bfloat16, False) == Launch(128, 64, 8, 3)
    assert pick(64, torch.bfloat16, False, Sparsity(32, 16, False, (1, 1, 4, 8))) == Launch(32, 16, 8, 3)
