"""Model blocks and training-code patterns as current models and training scripts write them:
quantization (int8 per-channel and per-token quantization, fake quantization for QAT, int8 and
int4 weight dequantization, fp8-style scaling to ±448, int32 accumulator dequantization), the
blocks of vision and language models (squeeze-excitation, a ConvNeXt block with layer scale and
drop path, patch embedding, a shifted-window Swin attention half, a transformer MLP with dropout,
BLOOM's ALiBi bias, grouped-query attention with repeat_kv, a static KV-cache update, a Mixtral
router, sampling's logits processors, BERT embeddings, LLaMA's and Gemma's RMS norms, a ViT
attention's qkv split with per-head norms, a fused gate-up MLP, a diffusion UNet residual block
with its time embedding, a ViT's class token and position embedding, a Conformer convolution
module), and the losses, convolutions, resizes, reductions and data movement around them (focal,
Dice, label-smoothed and causal-LM cross entropy, CLIP's contrastive loss, weight standardization,
1-D GLU and depthwise-separable convolutions, mixup, label assignment masks, mean pooling of
sentence embeddings, an EMA update).

Note: each program is the code as the model's library or a training script writes it (timm,
transformers, diffusers, torchaudio, torchvision, torchao), with its weights drawn at random; only
deterministic outputs are returned (top-k values, never indices; dropout and drop path in eval).
Quantized outputs are integers and compared exactly: a compiler must divide as eager does.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .base import In, Program, Sizes, fn_program
from .layers import NCHW, TNCHW
from .pointwise import ROWS, TROWS
from .singles import sized

F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16
U8, I32 = torch.uint8, torch.int32
WIDE = {F32: (1e-3, 1e-3), BF16: (5e-2, 5e-2), F16: (1e-2, 1e-2)}   # sums in another order
GEMM = {F32: (1e-2, 1e-2), BF16: (5e-2, 5e-2), F16: (1e-2, 1e-2)}   # GEMMs and convolutions (TF32 on GPU)
# a weight matrix (LLaMA-7B's MLP, 180 MB of f32) and its CPU twin
WEIGHT, TWEIGHT = {"r": 11008, "c": 4096}, {"r": 13, "c": 29}


# ---- quantization --------------------------------------------------------------------------------

class PerChannelQuant(nn.Module):
    """Static symmetric int8 quantization of an NCHW activation with one calibrated scale per channel,
    and the dequantized tensor."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.register_buffer("scale", torch.rand(c) * 0.02 + 0.005)

    def forward(self, x):
        scale = self.scale.view(1, -1, 1, 1)
        q = torch.clamp(torch.round(x / scale), -128, 127).to(torch.int8)
        return q, q.to(x.dtype) * scale


def _per_token_int8(x):
    """Dynamic per-token int8 quantization (SmoothQuant's activations): a scale per row from its amax."""
    xf = x.float()
    scale = xf.abs().amax(dim=-1, keepdim=True).clamp(min=1e-5) / 127.0
    q = torch.round(xf / scale).clamp(-128, 127).to(torch.int8)
    return q, scale


def _fake_quant_per_channel(w):
    """QAT's fake quantization of a weight, one scale per output channel."""
    scale = w.abs().amax(dim=1).clamp(min=1e-8) / 127.0
    zero_point = torch.zeros(w.shape[0], dtype=torch.int32, device=w.device)
    return torch.fake_quantize_per_channel_affine(w, scale, zero_point, 0, -128, 127)


def _fake_quant_int4_ste(w):
    """Symmetric int4 fake quantization per row with the straight-through estimator's detach."""
    scale = w.abs().amax(dim=-1, keepdim=True).clamp(min=1e-5) / 7.0
    wq = torch.clamp(torch.round(w / scale), -8, 7) * scale
    return w + (wq - w).detach()


class Int8WeightLinear(nn.Module):
    """Weight-only int8 linear: the int8 weight dequantized with its per-channel scale, then a GEMM."""

    def __init__(self, k: int, n: int) -> None:
        super().__init__()
        self.register_buffer("weight", torch.randint(-127, 128, (n, k), dtype=torch.int8))
        self.register_buffer("weight_scale", (torch.rand(n) * 0.5 + 0.75) * 3.0 / (127.0 * math.sqrt(k)))
        self.bias = nn.Parameter(torch.randn(n) * 0.1)

    def forward(self, x):
        w = self.weight.to(x.dtype) * self.weight_scale[:, None]
        return x @ w.t() + self.bias


def _fp8_tensorwise(x):
    """torchao's float8 scaling, tensor-wise: amax -> scale to E4M3's ±448, clamp, cast (bf16 here)."""
    amax = x.abs().amax()
    scale = 448.0 / torch.clamp(amax, min=1e-12)
    y = torch.clamp(x * scale, -448.0, 448.0).to(torch.bfloat16)
    return y, scale.reciprocal()


def _fp8_e4m3_tensorwise(x):
    """The same scaling cast to float8_e4m3fn itself, as torchao's float8 training does before its
    scaled GEMM."""
    amax = x.abs().amax()
    scale = 448.0 / torch.clamp(amax.float(), min=1e-12)
    return (x.float() * scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn), scale.reciprocal()


def _fp8_e4m3_rowwise(x):
    """Row-wise scales, cast to float8_e4m3fn (the activation side of a row-wise scaled GEMM)."""
    amax = x.abs().amax(dim=-1, keepdim=True).float()
    scale = 448.0 / torch.clamp(amax, min=1e-12)
    return (x.float() * scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn), scale.reciprocal()


def _fp8_e5m2_dequant(q, scale):
    """A float8_e5m2 tensor (a gradient's format) scaled back per row to bf16."""
    return (q.float() * scale).to(torch.bfloat16)


def _fp8_rowwise(x):
    """The row-wise variant: a scale per row, computed in f32 from bf16 activations."""
    amax = x.abs().amax(dim=-1, keepdim=True).float()
    scale = 448.0 / torch.clamp(amax, min=1e-12)
    y = (x.float() * scale).clamp(-448.0, 448.0).to(torch.bfloat16)
    return y, 1.0 / scale


def _int4_unpack(s: Sizes):
    group = s["g"]

    def f(packed, scales):   # two 4-bit weights per byte, a scale per group of `group` weights
        low = packed & 0x0F
        high = (packed >> 4) & 0x0F
        q = torch.stack((low, high), dim=-1).reshape(packed.shape[0], -1)
        n, k = q.shape
        w = (q.to(scales.dtype) - 8).view(n, k // group, group) * scales[:, :, None]
        return w.view(n, k)
    return f


def _int32_dequant(acc, x_scale, w_scale, bias):
    """W8A8's epilogue: an int32 GEMM accumulator scaled per token and per channel, plus the bias."""
    return (acc.to(torch.float32) * x_scale * w_scale + bias).to(torch.bfloat16)


def quant() -> list[Program]:
    rows = (In(("r", "c")),)
    return [
        Program("quant_int8_per_channel_nchw_f32", "quant", lambda s: PerChannelQuant(s["c"]),
                (In(("n", "c", "h", "w")),), NCHW, TNCHW),
        fn_program("quant_int8_per_token_dynamic_bf16", "quant", _per_token_int8, rows, ROWS, TROWS, BF16),
        fn_program("fake_quant_per_channel_affine_f32", "quant", _fake_quant_per_channel, rows, WEIGHT, TWEIGHT),
        fn_program("fake_quant_int4_ste_bf16", "quant", _fake_quant_int4_ste, rows, WEIGHT, TWEIGHT, BF16),
        Program("int8_weight_dequant_linear_f32", "quant", lambda s: Int8WeightLinear(s["k"], s["n"]),
                (In(("t", "k")),), {"t": 16384, "k": 4096, "n": 4096}, {"t": 13, "k": 29, "n": 11},
                tolerances=GEMM),
        fn_program("fp8_scale_clamp_tensorwise_f32", "quant", _fp8_tensorwise, rows, ROWS, TROWS),
        # the transposed operand, quantized row-wise for the backward's GEMM
        fn_program("fp8_scale_clamp_rowwise_transposed_bf16", "quant", _fp8_rowwise,
                   (In(("r", "c"), noncontig=True),), ROWS, TROWS, BF16),
        fn_program("fp8_e4m3_cast_tensorwise_bf16", "quant", _fp8_e4m3_tensorwise, rows, ROWS, TROWS, BF16),
        fn_program("fp8_e4m3_cast_rowwise_bf16", "quant", _fp8_e4m3_rowwise, rows, ROWS, TROWS, BF16),
        fn_program("fp8_e5m2_dequant_rowwise_bf16", "quant", _fp8_e5m2_dequant,
                   (In(("r", "c"), dtype=torch.float8_e5m2), In(("r", 1), "positive", dtype=F32)), ROWS, TROWS, BF16),
        sized("int4_unpack_group_dequant_bf16", "quant", _int4_unpack,
              (In(("n", "kh"), "int", dtype=U8, high=256), In(("n", "ng"), "positive")),
              {"n": 16384, "kh": 4096, "g": 128, "ng": 64}, {"n": 7, "kh": 27, "g": 6, "ng": 9}, BF16),
        fn_program("int32_acc_dequant_rowcol_bf16", "quant", _int32_dequant,
                   (In(("t", "n"), "int", dtype=I32, high=65536), In(("t", 1), "positive", dtype=F32),
                    In(("n",), "positive", dtype=F32), In(("n",))),
                   {"t": 16384, "n": 4096}, {"t": 13, "n": 37}, BF16),
    ]


# ---- blocks of vision models ---------------------------------------------------------------------

def drop_path(x, drop_prob: float = 0.0, training: bool = False, scale_by_keep: bool = True):
    """Stochastic depth per sample (timm's drop_path)."""
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor.div_(keep_prob)
    return x * random_tensor


class DropPath(nn.Module):
    def __init__(self, drop_prob: float = 0.0) -> None:
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training)


class Mlp(nn.Module):
    """timm's Mlp: fc1, activation, dropout, fc2, dropout."""

    def __init__(self, d: int, hidden: int, act: type[nn.Module] = nn.GELU, drop: float = 0.1, **act_kw) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.act = act(**act_kw)
        self.drop1 = nn.Dropout(drop)
        self.fc2 = nn.Linear(hidden, d)
        self.drop2 = nn.Dropout(drop)

    def forward(self, x):
        x = self.fc1(x)
        x = self.act(x)
        x = self.drop1(x)
        x = self.fc2(x)
        x = self.drop2(x)
        return x


class SqueezeExcite(nn.Module):
    """timm's SEModule: global average pool, 1x1 conv, ReLU, 1x1 conv, sigmoid gate."""

    def __init__(self, c: int, rd: int) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(c, rd, kernel_size=1, bias=True)
        self.act = nn.ReLU(inplace=True)
        self.fc2 = nn.Conv2d(rd, c, kernel_size=1, bias=True)
        self.gate = nn.Sigmoid()

    def forward(self, x):
        x_se = x.mean((2, 3), keepdim=True)
        x_se = self.fc1(x_se)
        x_se = self.act(x_se)
        x_se = self.fc2(x_se)
        return x * self.gate(x_se)


class ConvNeXtBlock(nn.Module):
    """timm's ConvNeXtBlock (linear MLP): depthwise 7x7, LayerNorm over channels in NHWC, MLP,
    layer scale, drop path, residual."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv_dw = nn.Conv2d(c, c, kernel_size=7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c, eps=1e-6)
        self.mlp = Mlp(c, 4 * c, drop=0.0)
        self.gamma = nn.Parameter(torch.rand(c) * 0.5 + 0.1)   # trained layer scale, not the 1e-6 init
        self.drop_path = DropPath(0.1)

    def forward(self, x):
        shortcut = x
        x = self.conv_dw(x)
        x = x.permute(0, 2, 3, 1)
        x = self.norm(x)
        x = self.mlp(x)
        x = x.permute(0, 3, 1, 2)
        x = x.mul(self.gamma.reshape(1, -1, 1, 1))
        x = self.drop_path(x) + shortcut
        return x


class PatchEmbed(nn.Module):
    """ViT's patch embedding: a strided convolution, flatten(2).transpose(1, 2), LayerNorm."""

    def __init__(self, c: int, p: int, e: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(c, e, kernel_size=p, stride=p)
        self.norm = nn.LayerNorm(e)

    def forward(self, x):
        x = self.proj(x)
        x = x.flatten(2).transpose(1, 2)
        return self.norm(x)


def window_partition(x, window_size: int):
    B, H, W, C = x.shape
    x = x.view(B, H // window_size, window_size, W // window_size, window_size, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size, window_size, C)


def window_reverse(windows, window_size: int, H: int, W: int):
    C = windows.shape[-1]
    x = windows.view(-1, H // window_size, W // window_size, window_size, window_size, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, H, W, C)


class WindowAttention(nn.Module):
    """Swin's window attention with its relative position bias table."""

    def __init__(self, dim: int, num_heads: int, window_size: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        ws = window_size
        self.relative_position_bias_table = nn.Parameter(torch.randn((2 * ws - 1) ** 2, num_heads) * 0.02)
        coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()
        rel[:, :, 0] += ws - 1
        rel[:, :, 1] += ws - 1
        rel[:, :, 0] *= 2 * ws - 1
        self.register_buffer("relative_position_index", rel.sum(-1), persistent=False)
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x, mask=None):
        B_, N, C = x.shape
        qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        bias = self.relative_position_bias_table[self.relative_position_index.view(-1)].view(N, N, -1)
        attn = attn + bias.permute(2, 0, 1).contiguous().unsqueeze(0)
        if mask is not None:
            num_win = mask.shape[0]
            attn = attn.view(-1, num_win, self.num_heads, N, N) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.num_heads, N, N)
        attn = self.softmax(attn)
        x = (attn @ v).transpose(1, 2).reshape(B_, N, -1)
        return self.proj(x)


class SwinAttentionHalf(nn.Module):
    """The first half of a shifted-window Swin block (timm): norm, cyclic shift, window partition,
    window attention with the shift mask, window reverse, shift back, drop path, residual."""

    def __init__(self, dim: int, heads: int, hw: int, ws: int) -> None:
        super().__init__()
        self.ws, self.shift = ws, ws // 2
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, heads, ws)
        self.drop_path1 = DropPath(0.1)
        img_mask = torch.zeros((1, hw, hw, 1))
        cnt = 0
        for h in (slice(0, -ws), slice(-ws, -self.shift), slice(-self.shift, None)):
            for w in (slice(0, -ws), slice(-ws, -self.shift), slice(-self.shift, None)):
                img_mask[:, h, w, :] = cnt
                cnt += 1
        mask_windows = window_partition(img_mask, ws).view(-1, ws * ws)
        attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
        attn_mask = attn_mask.masked_fill(attn_mask != 0, float(-100.0)).masked_fill(attn_mask == 0, float(0.0))
        self.register_buffer("attn_mask", attn_mask, persistent=False)

    def _attn(self, x):
        B, H, W, C = x.shape
        shifted_x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        x_windows = window_partition(shifted_x, self.ws).view(-1, self.ws * self.ws, C)
        attn_windows = self.attn(x_windows, mask=self.attn_mask).view(-1, self.ws, self.ws, C)
        shifted_x = window_reverse(attn_windows, self.ws, H, W)
        return torch.roll(shifted_x, shifts=(self.shift, self.shift), dims=(1, 2))

    def forward(self, x):
        return x + self.drop_path1(self._attn(self.norm1(x)))


class UNetResBlock(nn.Module):
    """diffusers' ResnetBlock2D: GroupNorm, SiLU, conv, the time embedding's projection added per
    channel, GroupNorm, SiLU, dropout, conv, residual."""

    def __init__(self, c: int, groups: int, temb: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, c, eps=1e-6)
        self.conv1 = nn.Conv2d(c, c, kernel_size=3, stride=1, padding=1)
        self.time_emb_proj = nn.Linear(temb, c)
        self.norm2 = nn.GroupNorm(groups, c, eps=1e-6)
        self.dropout = nn.Dropout(0.1)
        self.conv2 = nn.Conv2d(c, c, kernel_size=3, stride=1, padding=1)
        self.nonlinearity = nn.SiLU()
        self.output_scale_factor = 1.0

    def forward(self, input_tensor, temb):
        hidden_states = input_tensor
        hidden_states = self.norm1(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.conv1(hidden_states)
        temb = self.nonlinearity(temb)
        temb = self.time_emb_proj(temb)[:, :, None, None]
        hidden_states = hidden_states + temb
        hidden_states = self.norm2(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.conv2(hidden_states)
        return (input_tensor + hidden_states) / self.output_scale_factor


class ViTPosEmbed(nn.Module):
    """timm's VisionTransformer._pos_embed: a class token concatenated before the patches, the
    learned position embedding added, dropout."""

    def __init__(self, n: int, d: int) -> None:
        super().__init__()
        self.cls_token = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
        self.pos_drop = nn.Dropout(0.1)

    def forward(self, x):
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        x = x + self.pos_embed
        return self.pos_drop(x)


def vision() -> list[Program]:
    x4 = (In(("n", "c", "h", "w")),)
    return [
        Program("squeeze_excite_conv_f32", "block", lambda s: SqueezeExcite(s["c"], s["rd"]), x4,
                {**NCHW, "rd": 16}, {**TNCHW, "c": 6, "rd": 2}, tolerances=WIDE),
        Program("convnext_block_layerscale_f32", "block", lambda s: ConvNeXtBlock(s["c"]), x4,
                {"n": 64, "c": 96, "h": 56, "w": 56}, {"n": 2, "c": 5, "h": 7, "w": 9}, tolerances=GEMM),
        Program("patch_embed_layernorm_bf16", "block", lambda s: PatchEmbed(s["c"], s["p"], s["e"]), x4,
                {"n": 128, "c": 3, "h": 224, "w": 224, "p": 16, "e": 768},
                {"n": 2, "c": 3, "h": 12, "w": 8, "p": 4, "e": 13}, BF16, tolerances=GEMM),
        Program("swin_shifted_window_attn_f32", "block",
                lambda s: SwinAttentionHalf(s["c"], s["heads"], s["h"], s["ws"]), (In(("n", "h", "h", "c")),),
                {"n": 32, "h": 56, "c": 128, "heads": 4, "ws": 7}, {"n": 2, "h": 6, "c": 10, "heads": 2, "ws": 3},
                tolerances=GEMM),
        Program("unet_resblock_temb_f16", "block", lambda s: UNetResBlock(s["c"], s["g"], s["t"]),
                (In(("n", "c", "h", "w")), In(("n", "t"))),
                {"n": 16, "c": 128, "h": 96, "w": 96, "g": 32, "t": 512},
                {"n": 2, "c": 6, "h": 7, "w": 9, "g": 3, "t": 11}, F16, tolerances=GEMM),
        Program("vit_cls_token_pos_embed_f32", "block", lambda s: ViTPosEmbed(s["l"], s["d"]),
                (In(("b", "l", "d")),), {"b": 256, "l": 196, "d": 768}, {"b": 2, "l": 9, "d": 13}),
    ]


# ---- blocks of language models -------------------------------------------------------------------

def build_alibi_tensor(attention_mask, num_heads: int, dtype):
    """BLOOM's ALiBi bias, one slope per head times the position counted over the attention mask."""
    batch_size, seq_length = attention_mask.shape
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), device=attention_mask.device,
                        dtype=torch.float32)
    powers = torch.arange(1, 1 + closest_power_of_2, device=attention_mask.device, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))),
                                  device=attention_mask.device, dtype=torch.float32)
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, device=attention_mask.device,
                                    dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]
    alibi = slopes[..., None] * arange_tensor
    return alibi.reshape(batch_size * num_heads, 1, seq_length).to(dtype)


class AlibiScores(nn.Module):
    """BLOOM's attention probabilities: the ALiBi bias added by baddbmm, causal and padding masks,
    softmax in f32 cast back."""

    def __init__(self, heads: int, d: int) -> None:
        super().__init__()
        self.num_heads = heads
        self.inv_norm_factor = 1.0 / math.sqrt(d)

    def forward(self, query_layer, key_layer, attention_mask):
        batch_size, q_length = attention_mask.shape[0], query_layer.shape[1]
        alibi = build_alibi_tensor(attention_mask, self.num_heads, query_layer.dtype)
        scores = alibi.baddbmm(batch1=query_layer, batch2=key_layer, beta=1.0, alpha=self.inv_norm_factor)
        scores = scores.view(batch_size, self.num_heads, q_length, -1)
        causal = torch.triu(torch.ones(q_length, q_length, dtype=torch.bool, device=scores.device), diagonal=1)
        padding = attention_mask[:, None, None, :] == 0
        scores = scores.masked_fill(causal | padding, torch.finfo(scores.dtype).min)
        return F.softmax(scores, dim=-1, dtype=torch.float32).to(query_layer.dtype)


def repeat_kv(hidden_states, n_rep: int):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def _gqa_attention(query, key, value):
    """transformers' eager_attention_forward with a causal mask: both the output and the weights."""
    n_rep = query.shape[1] // key.shape[1]
    key_states, value_states = repeat_kv(key, n_rep), repeat_kv(value, n_rep)
    s = query.shape[2]
    causal_mask = torch.full((s, s), torch.finfo(query.dtype).min, device=query.device, dtype=query.dtype).triu(1)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * query.shape[-1] ** -0.5
    attn_weights = attn_weights + causal_mask
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_output = torch.matmul(attn_weights, value_states)
    attn_output = attn_output.transpose(1, 2).contiguous()
    return attn_output, attn_weights


def _kv_cache_update(s: Sizes):
    start, t = s["start"], s["t"]

    def f(cache_k, cache_v, key_states, value_states):   # a static cache written at the new positions
        cache_position = torch.arange(start, start + t, device=key_states.device)
        k_out, v_out = cache_k.clone(), cache_v.clone()
        k_out.index_copy_(2, cache_position, key_states)
        v_out[:, :, start:start + t] = value_states
        return k_out[:, :, :start + t], v_out[:, :, :start + t]
    return f


class MoERouter(nn.Module):
    """Mixtral's router: gate, softmax over experts in f32, top-k weights renormalized."""

    def __init__(self, d: int, experts: int, top_k: int) -> None:
        super().__init__()
        self.gate = nn.Linear(d, experts, bias=False)
        self.top_k = top_k

    def forward(self, hidden_states):
        router_logits = self.gate(hidden_states)
        probs = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, _ = torch.topk(probs, self.top_k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        return routing_weights.to(hidden_states.dtype), probs


def _repetition_temperature_log_softmax(input_ids, scores, penalty=1.2, temperature=0.7):
    """Sampling's logits processors: repetition penalty (gather, where, scatter), temperature."""
    score = torch.gather(scores, 1, input_ids)
    score = torch.where(score < 0, score * penalty, score / penalty)
    scores_processed = scores.scatter(1, input_ids, score)
    scores_processed = scores_processed / temperature
    return torch.log_softmax(scores_processed, dim=-1)


def _top_k_softmax(scores, top_k=50, temperature=0.8):
    """Temperature, then TopKLogitsWarper's filter by the k-th largest value, then the probabilities."""
    scores = scores / temperature
    indices_to_remove = scores < torch.topk(scores, top_k)[0][..., -1, None]
    scores = scores.masked_fill(indices_to_remove, -float("inf"))
    return F.softmax(scores, dim=-1)


class BertEmbeddings(nn.Module):
    """transformers' BertEmbeddings: word, token type and position embeddings summed, LayerNorm, dropout."""

    def __init__(self, vocab: int, hidden: int, max_pos: int, type_vocab: int = 2) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden, padding_idx=0)
        self.position_embeddings = nn.Embedding(max_pos, hidden)
        self.token_type_embeddings = nn.Embedding(type_vocab, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(0.1)
        self.register_buffer("position_ids", torch.arange(max_pos).expand((1, -1)), persistent=False)

    def forward(self, input_ids, token_type_ids):
        seq_length = input_ids.shape[1]
        position_ids = self.position_ids[:, :seq_length]
        inputs_embeds = self.word_embeddings(input_ids)
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + token_type_embeddings
        embeddings += self.position_embeddings(position_ids)
        embeddings = self.LayerNorm(embeddings)
        return self.dropout(embeddings)


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.rand(hidden_size) + 0.5)
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class ResidualRMSNorm(nn.Module):
    """A LLaMA decoder layer's residual add before post_attention_layernorm: the normed and the sum."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.post_attention_layernorm = LlamaRMSNorm(d)

    def forward(self, residual, hidden_states):
        hidden_states = residual + hidden_states
        return self.post_attention_layernorm(hidden_states), hidden_states


class GemmaRMSNorm(nn.Module):
    """Gemma's RMS norm: everything in f32, the weight as an offset from one, cast back at the end."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.rand(dim) - 0.5)

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


class QKNormAttentionProj(nn.Module):
    """timm's Attention up to the attention itself: qkv projection, reshape and permute into heads,
    unbind, per-head LayerNorms of q and k, q scaled."""

    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.q_norm = nn.LayerNorm(self.head_dim)
        self.k_norm = nn.LayerNorm(self.head_dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)
        return q * self.scale, k, v


class GateUpMLP(nn.Module):
    """Phi-3's MLP: one fused gate-up projection chunked in two, SiLU gate, down projection."""

    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.gate_up_proj = nn.Linear(d, 2 * hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d, bias=False)
        self.activation_fn = nn.SiLU()

    def forward(self, hidden_states):
        up_states = self.gate_up_proj(hidden_states)
        gate, up_states = up_states.chunk(2, dim=-1)
        up_states = up_states * self.activation_fn(gate)
        return self.down_proj(up_states)


def language() -> list[Program]:
    bsd, tbsd = {"b": 8, "s": 2048, "d": 4096}, {"b": 2, "s": 7, "d": 29}    # 134 MB of bf16
    vocab, tvocab = {"b": 128, "v": 128256, "l": 1024}, {"b": 3, "v": 97, "l": 11}
    return [
        Program("mlp_bias_gelu_dropout_bf16", "block", lambda s: Mlp(s["d"], 4 * s["d"], approximate="tanh"),
                (In(("b", "s", "d")),), {"b": 16, "s": 2048, "d": 1024}, {"b": 2, "s": 7, "d": 13}, BF16,
                tolerances=GEMM),
        # in float32: in bf16, slope x position (up to ~500) rounds to steps of 2-4, so a last-bit
        # difference in the slopes' pow moves whole softmax rows, eager's result included
        Program("alibi_bloom_scores_softmax_f32", "block", lambda s: AlibiScores(s["h"], s["d"]),
                (In(("bh", "s", "d")), In(("bh", "d", "s")), In(("b", "s"), "int", high=2)),
                {"b": 8, "h": 16, "bh": 128, "s": 1024, "d": 64}, {"b": 2, "h": 3, "bh": 6, "s": 7, "d": 8},
                F32, tolerances=GEMM),
        fn_program("gqa_repeat_kv_attention_bf16", "block", _gqa_attention,
                   (In(("b", "hq", "s", "d")), In(("b", "hkv", "s", "d")), In(("b", "hkv", "s", "d"))),
                   {"b": 4, "hq": 32, "hkv": 8, "s": 1024, "d": 128}, {"b": 2, "hq": 6, "hkv": 2, "s": 7, "d": 8},
                   BF16, tolerances=GEMM),
        sized("kv_cache_index_copy_bf16", "block", _kv_cache_update,
              (In(("b", "h", "m", "d")), In(("b", "h", "m", "d")), In(("b", "h", "t", "d")), In(("b", "h", "t", "d"))),
              {"b": 8, "h": 8, "m": 4096, "d": 128, "start": 2048, "t": 16},
              {"b": 2, "h": 3, "m": 11, "d": 5, "start": 4, "t": 3}, BF16),
        Program("moe_router_topk_renorm_bf16", "block", lambda s: MoERouter(s["d"], s["e"], 2), (In(("t", "d")),),
                {"t": 16384, "d": 4096, "e": 8}, {"t": 13, "d": 29, "e": 5}, BF16, tolerances=GEMM),
        fn_program("logits_repetition_penalty_log_softmax_f32", "block", _repetition_temperature_log_softmax,
                   (In(("b", "l"), "int", high="v"), In(("b", "v"))), vocab, tvocab, tolerances=WIDE),
        fn_program("logits_top_k_filter_softmax_f32", "block", _top_k_softmax, (In(("b", "v")),), vocab, tvocab,
                   tolerances=WIDE),
        Program("bert_embeddings_layernorm_f32", "block", lambda s: BertEmbeddings(s["v"], s["d"], s["p"]),
                (In(("b", "s"), "int", high="v"), In(("b", "s"), "int", high=2)),
                {"b": 64, "s": 512, "v": 30522, "d": 768, "p": 512}, {"b": 2, "s": 7, "v": 53, "d": 13, "p": 11},
                tolerances=WIDE),
        Program("llama_residual_rmsnorm_bf16", "block", lambda s: ResidualRMSNorm(s["d"]),
                (In(("b", "s", "d")), In(("b", "s", "d"))), bsd, tbsd, BF16, tolerances=WIDE),
        Program("gemma_rmsnorm_f16", "block", lambda s: GemmaRMSNorm(s["d"]), (In(("b", "s", "d")),),
                bsd, tbsd, F16, tolerances=WIDE),
        Program("vit_qkv_split_qk_norm_bf16", "block", lambda s: QKNormAttentionProj(s["d"], s["h"]),
                (In(("b", "l", "d")),), {"b": 128, "l": 197, "d": 768, "h": 12}, {"b": 2, "l": 7, "d": 12, "h": 2},
                BF16, tolerances=GEMM),
        Program("gate_up_silu_mlp_bf16", "block", lambda s: GateUpMLP(s["d"], s["f"]), (In(("t", "d")),),
                {"t": 16384, "d": 2048, "f": 5632}, {"t": 13, "d": 29, "f": 37}, BF16, tolerances=GEMM),
    ]


# ---- audio and speech ----------------------------------------------------------------------------

class ConformerConvModule(nn.Module):
    """torchaudio's Conformer ConvolutionModule: LayerNorm, pointwise conv, GLU, depthwise conv,
    BatchNorm, SiLU, pointwise conv, dropout, in [B, T, D] with the transposes around."""

    def __init__(self, d: int, k: int) -> None:
        super().__init__()
        self.layer_norm = nn.LayerNorm(d)
        bn = nn.BatchNorm1d(d)
        with torch.no_grad():
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)
        self.sequential = nn.Sequential(
            nn.Conv1d(d, 2 * d, 1, stride=1, padding=0, bias=True),
            nn.GLU(dim=1),
            nn.Conv1d(d, d, k, stride=1, padding=(k - 1) // 2, groups=d, bias=True),
            bn,
            nn.SiLU(),
            nn.Conv1d(d, d, kernel_size=1, stride=1, padding=0, bias=True),
            nn.Dropout(0.1),
        )

    def forward(self, input):
        x = self.layer_norm(input)
        x = x.transpose(1, 2)
        x = self.sequential(x)
        return x.transpose(1, 2)


class ConvGLUResidual(nn.Module):
    """A ConvS2S encoder layer: conv1d to twice the channels, GLU over channels, residual scaled by sqrt(0.5)."""

    def __init__(self, c: int, k: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(c, 2 * c, k, padding=k // 2)

    def forward(self, x):
        residual = x
        x = F.glu(self.conv(x), dim=1)
        return (x + residual) * math.sqrt(0.5)


class SeparableConv1d(nn.Module):
    """QuartzNet's time-channel separable convolution: depthwise conv1d, pointwise conv1d, BatchNorm, ReLU."""

    def __init__(self, c: int, k: int) -> None:
        super().__init__()
        self.depthwise = nn.Conv1d(c, c, k, padding=k // 2, groups=c, bias=False)
        self.pointwise = nn.Conv1d(c, c, 1, bias=False)
        self.bn = nn.BatchNorm1d(c)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.act(self.bn(self.pointwise(self.depthwise(x))))


def audio() -> list[Program]:
    ncl, tncl = {"n": 32, "c": 256, "l": 2000, "k": 33}, {"n": 2, "c": 6, "l": 13, "k": 5}   # 65 MB of f32
    return [
        Program("conformer_conv_module_f32", "block", lambda s: ConformerConvModule(s["d"], s["k"]),
                (In(("b", "t", "d")),), {"b": 32, "t": 1500, "d": 256, "k": 31}, {"b": 2, "t": 11, "d": 6, "k": 5},
                tolerances=GEMM),
        Program("conv1d_glu_residual_f32", "conv_epilogue", lambda s: ConvGLUResidual(s["c"], 3),
                (In(("n", "c", "l")),), ncl, tncl, tolerances=GEMM),
        Program("conv1d_separable_bn_relu_f32", "conv_epilogue", lambda s: SeparableConv1d(s["c"], s["k"]),
                (In(("n", "c", "l")),), ncl, tncl, tolerances=GEMM),
    ]


# ---- losses --------------------------------------------------------------------------------------

def _sigmoid_focal_loss(inputs, targets, alpha: float = 0.25, gamma: float = 2.0):
    """torchvision.ops.sigmoid_focal_loss with reduction="mean" (targets stored as a bool mask)."""
    targets = targets.to(inputs.dtype)
    p = torch.sigmoid(inputs)
    ce_loss = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce_loss * ((1 - p_t) ** gamma)
    alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
    loss = alpha_t * loss
    return loss.mean()


def _dice_loss(logits, masks, smooth: float = 1.0):
    """Soft Dice loss of sigmoid probabilities against binary masks, per image and channel, then mean."""
    probs = torch.sigmoid(logits)
    masks = masks.float()
    dims = (2, 3)
    intersection = torch.sum(probs * masks, dims)
    cardinality = torch.sum(probs + masks, dims)
    dice = (2.0 * intersection + smooth) / (cardinality + smooth)
    return (1.0 - dice).mean()


def _clip_loss(image_features, text_features, logit_scale: float = 1 / 0.07):
    """CLIP's symmetric InfoNCE: normalized features, scaled similarities, cross entropy both ways."""
    image_features = F.normalize(image_features, dim=-1)
    text_features = F.normalize(text_features, dim=-1)
    logits_per_image = logit_scale * image_features @ text_features.T
    logits_per_text = logits_per_image.T
    labels = torch.arange(logits_per_image.shape[0], device=logits_per_image.device)
    return (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_text, labels)) / 2


def _causal_lm_loss(logits, input_ids, attention_mask):
    """A causal LM's loss: logits upcast, shifted by one, padding labelled -100 and ignored."""
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    logits = logits.float()
    shift_logits = logits[..., :-1, :].contiguous()
    shift_labels = labels[..., 1:].contiguous()
    return F.cross_entropy(shift_logits.view(-1, shift_logits.shape[-1]), shift_labels.view(-1), ignore_index=-100)


def losses() -> list[Program]:
    seg, tseg = {"n": 32, "c": 21, "h": 224, "w": 224}, {"n": 2, "c": 3, "h": 9, "w": 11}   # 135 MB of f32
    return [
        fn_program("loss_sigmoid_focal_mean_f32", "loss", _sigmoid_focal_loss,
                   (In(("r", "c")), In(("r", "c"), "bool")), ROWS, TROWS, tolerances=WIDE),
        fn_program("loss_dice_nchw_f32", "loss", _dice_loss,
                   (In(("n", "c", "h", "w")), In(("n", "c", "h", "w"), "bool")), seg, tseg, tolerances=WIDE),
        fn_program("loss_cross_entropy_label_smoothing_f32", "loss",
                   lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
                   (In(("r", "v")), In(("r",), "int", high="v")), {"r": 32768, "v": 1000}, {"r": 19, "v": 37},
                   tolerances=WIDE),
        fn_program("loss_clip_infonce_f32", "loss", _clip_loss, (In(("n", "d")), In(("n", "d"))),
                   {"n": 16384, "d": 768}, {"n": 13, "d": 29}, tolerances=GEMM),
        fn_program("loss_causal_lm_shift_ignore_bf16", "loss", _causal_lm_loss,
                   (In(("b", "s", "v")), In(("b", "s"), "int", high="v"), In(("b", "s"), "int", high=2)),
                   {"b": 4, "s": 2048, "v": 32000}, {"b": 2, "s": 7, "v": 37}, BF16, tolerances=WIDE),
    ]


# ---- convolutions, resizes, reductions, data movement around the blocks ---------------------------

class StdConv2d(nn.Conv2d):
    """timm's StdConv2d (BiT): the weight standardized per output channel with F.batch_norm, then a conv."""

    def __init__(self, cin: int, cout: int, k: int, padding: int, eps: float = 1e-6) -> None:
        super().__init__(cin, cout, k, padding=padding, bias=False)
        self.eps = eps

    def forward(self, x):
        weight = F.batch_norm(self.weight.reshape(1, self.out_channels, -1), None, None,
                              training=True, momentum=0.0, eps=self.eps).reshape_as(self.weight)
        return F.conv2d(x, weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


def _mean_pool_normalize(token_embeddings, attention_mask):
    """sentence-transformers' mean pooling over unmasked tokens, then L2-normalized embeddings."""
    input_mask_expanded = attention_mask.unsqueeze(-1).expand(token_embeddings.size()).float()
    summed = torch.sum(token_embeddings * input_mask_expanded, 1)
    counts = torch.clamp(input_mask_expanded.sum(1), min=1e-9)
    return F.normalize(summed / counts, p=2, dim=1)


def _matcher_labels(match_quality_matrix, high: float = 0.7, low: float = 0.3):
    """torchvision's Matcher as where chains over IoUs [ground truths, anchors]: each anchor's best IoU
    labelled 1 (foreground), 0 (background) or -1 (between the thresholds: ignored), every ground
    truth's best anchors set back to foreground (low-quality matches), and the sampling weights."""
    matched_vals = match_quality_matrix.amax(dim=0)
    labels = torch.where(matched_vals >= high, 1, torch.where(matched_vals < low, 0, -1))
    highest_quality_foreach_gt = match_quality_matrix.amax(dim=1, keepdim=True)
    low_quality = (match_quality_matrix == highest_quality_foreach_gt).any(dim=0)
    labels = torch.where(low_quality, 1, labels)
    weights = torch.where(labels >= 0, 1.0, 0.0)
    return labels, weights


def _mixup(s: Sizes):
    classes, lam, smoothing = s["k"], 0.7, 0.1

    def f(x, target):   # timm's mixup of a batch with its flip, and of its smoothed one-hot targets
        off_value = smoothing / classes
        on_value = 1.0 - smoothing + off_value
        y1 = torch.full((target.shape[0], classes), off_value, device=x.device).scatter_(1, target[:, None], on_value)
        y2 = torch.full((target.shape[0], classes), off_value, device=x.device).scatter_(
            1, target.flip(0)[:, None], on_value)
        return lam * x + (1.0 - lam) * x.flip(0), y1 * lam + y2 * (1.0 - lam)
    return f


def others() -> list[Program]:
    x4 = (In(("n", "c", "h", "w")),)
    rows2 = (In(("r", "c")), In(("r", "c")))
    ncdhw, tncdhw = {"n": 4, "c": 32, "d": 16, "h": 64, "w": 64}, {"n": 2, "c": 3, "d": 3, "h": 5, "w": 7}
    return [
        Program("conv2d_weight_standardized_f32", "conv_epilogue", lambda s: StdConv2d(s["c"], s["c"], 3, 1), x4,
                NCHW, TNCHW, tolerances=GEMM),
        fn_program("cosine_similarity_rows_f16", "reduction", lambda a, b: F.cosine_similarity(a, b, dim=1),
                   rows2, {"r": 16384, "c": 2048}, TROWS, F16),
        fn_program("pairwise_distance_noncontig_f32", "reduction", lambda a, b: F.pairwise_distance(a, b, p=2.0),
                   (In(("r", "c")), In(("r", "c"), noncontig=True)), {"r": 16384, "c": 2048}, TROWS,
                   tolerances=WIDE),
        fn_program("var_mean_batch_channels_noncontig_f32", "reduction",
                   lambda x: torch.var_mean(x, dim=(0, 2, 3), unbiased=False),
                   (In(("n", "c", "h", "w"), noncontig=True),), NCHW, TNCHW, tolerances=WIDE),
        fn_program("upsample_nearest3d_x2_f32", "pooling",
                   lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), (In(("n", "c", "d", "h", "w")),),
                   ncdhw, tncdhw),
        sized("resize_bicubic_clamp_f32", "pooling",
              lambda s: lambda x: F.interpolate(x, size=(s["oh"], s["ow"]), mode="bicubic",
                                                align_corners=False).clamp(0.0, 1.0),
              (In(("n", "c", "h", "w"), "uniform"),), {"n": 128, "c": 3, "h": 160, "w": 160, "oh": 224, "ow": 224},
              {"n": 2, "c": 3, "h": 13, "w": 11, "oh": 17, "ow": 19}, tolerances=WIDE),
        fn_program("pixel_unshuffle_x2_f32", "data_movement", lambda x: F.pixel_unshuffle(x, 2), x4,
                   NCHW, {"n": 2, "c": 3, "h": 10, "w": 14}),
        fn_program("log_nan_to_num_clamp_f32", "activation",
                   lambda x: torch.nan_to_num(torch.log(x), nan=0.0, posinf=1e4, neginf=-1e4).clamp(min=-10.0),
                   (In(("r", "c")),), ROWS, TROWS),
        fn_program("where_chain_matcher_labels_f32", "data_movement", _matcher_labels, (In(("g", "a"), "uniform"),),
                   {"g": 100, "a": 262144}, {"g": 7, "a": 61}),
        fn_program("mean_pool_normalize_embeddings_f16", "norm", _mean_pool_normalize,
                   (In(("b", "s", "d")), In(("b", "s"), "int", high=2)), {"b": 512, "s": 128, "d": 768},
                   {"b": 3, "s": 7, "d": 13}, F16, tolerances=WIDE),
        sized("mixup_flip_smoothed_targets_f32", "data_movement", _mixup,
              (In(("n", "c", "h", "w")), In(("n",), "int", high="k")), {**NCHW, "k": 1000}, {**TNCHW, "k": 17}),
        fn_program("optim_ema_lerp_bf16", "optimizer", lambda ema, p: ema.lerp(p.float(), 1.0 - 0.9998),
                   (In(("p",), dtype=F32), In(("p",))), {"p": 32 * 1024 * 1024}, {"p": 1000}, BF16),
    ]


def programs() -> list[Program]:
    return quant() + vision() + language() + audio() + losses() + others()


__all__ = ["programs"]
