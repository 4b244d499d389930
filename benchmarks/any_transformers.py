"""Any transformers model class, built from its config class's defaults, for the model benchmark:
`--models transformers:DebertaV2Model` (or `transformers:MambaForCausalLM`, ...).

Why: the named families of `benchmarks/models.py` are the ones the compiler was measured on; a user
brings others. The defaults of a config class are the family's reference model (its widths, heads,
vocabulary), so this runs the model a user of that family would run, with its depth capped
(`MAX_LAYERS`) so that three variants compile within a run's budget. Inputs follow the model's
`main_input_name`: token ids (4 x 512, an encoder-decoder's decoder 4 x 128), images (32 at the
config's size), raw audio (8 x 4 s at 16 kHz), mel features (8 x the encoder's frames) or a time
series's past values (64 windows of its context length; the probabilistic forecasters also get their
lags, time features, observed mask and the future's time features, and forecast PREDICTION steps
where the config sets none), a video model frames of images, and a text and an image tower (CLIP's
kind) both tokens and images. Tiny (CPU) configs shrink every width, depth and vocabulary field the
config has, with the fields that must agree kept agreeing (latent attention's head parts, multimodal
rotary's sections, Mamba-2's heads, windows and strides that fit every stage's map).
"""
from __future__ import annotations

import inspect
from typing import Any

import torch

PREFIX = "transformers:"
MAX_LAYERS = 6
DEPTHS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers", "decoder_layers",
          "num_decoder_layers")
DROPOUTS = ("attention_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop", "dropout",
            "activation_dropout", "attention_probs_dropout_prob", "hidden_dropout_prob", "dropout_rate",
            "classifier_dropout", "drop_path_rate", "layerdrop", "encoder_layerdrop", "decoder_layerdrop",
            "feat_proj_dropout", "final_dropout", "mask_time_prob")
TINY = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, vocab_size=500,
            n_embd=64, n_head=4, d_model=64, d_ff=128, d_kv=16, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=128, decoder_ffn_dim=128, ffn_dim=128, max_position_embeddings=64, image_size=32,
            patch_size=8, num_mel_bins=16, max_source_positions=8, head_dim=16, rotary_dim=8, projection_size=64)
# multi-head latent attention (DeepSeek-V2/V3 and their kind): its head parts and ranks, and routed
# experts small enough to build, with the first layer dense and the second a mixture of experts
TINY_MLA = dict(qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, kv_lora_rank=32, q_lora_rank=48,
                moe_intermediate_size=64, n_routed_experts=8, n_group=2, topk_group=1, num_experts_per_tok=2,
                first_k_dense_replace=1)
# state-space (Mamba-2) mixers: heads x head size = expand (2) x the tiny hidden size
TINY_SSM = dict(mamba_n_heads=8, mamba_d_head=16, mamba_num_heads=8, mamba_head_dim=16, n_mamba_heads=8,
                mamba_headdim=16, mamba_d_ssm=128, mamba_d_state=16, mamba_chunk_size=16)
TINY_DEPTH = 2
PREDICTION = 24          # steps a time-series model forecasts where its config leaves it unset
TOKENS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "sep_token_id", "cls_token_id")


def is_any(name: str) -> bool:
    return name.startswith(PREFIX) and len(name) > len(PREFIX)


def trainable(name: str) -> bool:
    """A class whose call takes labels and returns its loss."""
    return is_any(name) and name.endswith(("ForCausalLM", "ForMaskedLM"))


def build_any(name: str, tiny: bool, train: bool, device: str, gen: torch.Generator, tf: Any) -> tuple[Any, dict]:
    """(model in f32 on device, keyword inputs of one call). train: labels for a `*ForCausalLM` or
    `*ForMaskedLM` class (the loss inside the model); other classes have no loss to train."""
    cls_name = name[len(PREFIX):]
    cls = getattr(tf, cls_name, None)
    if cls is None or getattr(cls, "config_class", None) is None:
        raise ValueError(f"transformers has no model class {cls_name!r} (e.g. transformers:MistralModel)")
    cfg = cls.config_class()
    if "prediction_length" in cfg.to_dict() and cfg.prediction_length is None:   # time series: required,
        cfg = cls.config_class(prediction_length=PREDICTION)                     # and fields follow from it
    _shrink(cfg, tiny)
    if _two_towers(cls, cfg):
        for sub in ("text_config", "vision_config"):
            if getattr(cfg, sub, None) is not None:
                _shrink(getattr(cfg, sub), tiny)
    cfg.use_cache = False
    model = cls(cfg)
    _untie(model, gen)
    inputs = _inputs(model, cfg, tiny, device, gen)
    if train:
        if not trainable(name) or "input_ids" not in inputs:
            raise ValueError(f"{name}: train mode needs a *ForCausalLM or *ForMaskedLM class")
        inputs["labels"] = inputs["input_ids"]
    return model, inputs


def _shrink(cfg: Any, tiny: bool) -> None:
    """Cap cfg's depth, turn its dropouts off and, tiny, shrink every width, head and vocabulary field,
    keeping the fields that depend on each other agreeing."""
    fields = cfg.to_dict()
    for attr in DEPTHS:
        if isinstance(fields.get(attr), int) and fields[attr] > 0:
            setattr(cfg, attr, min(fields[attr], TINY_DEPTH if tiny else MAX_LAYERS))
    if tiny:
        for attr, v in TINY.items():
            if isinstance(fields.get(attr), int):
                setattr(cfg, attr, v)
        if isinstance(fields.get("window_size"), int) and isinstance(fields.get("depths"), list):
            # windowed attention in stages (Swin's kind): its relative-position table is sized by the
            # window, so every stage's map must hold one; 16 x 16 patches halve to 2 x 2 windows
            cfg.window_size = 2
            if isinstance(fields.get("image_size"), int) and isinstance(fields.get("patch_size"), int) \
                    and fields["patch_size"] > 1:
                cfg.image_size, cfg.patch_size = 64, 4
        if isinstance(fields.get("num_stages"), int) and isinstance(fields.get("depths"), list) and \
                isinstance(fields.get("patch_size"), int):   # ConvNeXt's stem and stride-2 stages: 8 x 8 to 1 x 1
            cfg.image_size, cfg.patch_size = 32, 4
        for attr, v in TINY_SSM.items():
            if isinstance(fields.get(attr), int):
                setattr(cfg, attr, v)
        if all(isinstance(fields.get(k), int) for k in ("state_size", "expand", "num_heads", "head_dim")):
            cfg.num_heads, cfg.state_size = TINY_SSM["mamba_n_heads"], TINY_SSM["mamba_d_state"]   # Mamba2's own names
        if "head_dim" in fields and fields["head_dim"] is None:   # some read it as set (HunYuan)
            cfg.head_dim = TINY["head_dim"]
        if "mrope_section" in getattr(cfg, "ignore_keys_at_rope_validation", ()) and \
                isinstance(getattr(cfg, "rope_parameters", None), dict):
            # multimodal rotary (Qwen2-VL's kind): its three sections split the rotary half of a head
            rotary = getattr(cfg, "partial_rotary_factor", None) or cfg.rope_parameters.get("partial_rotary_factor", 1.0)
            half = int(TINY["head_dim"] * rotary) // 2
            cfg.rope_parameters["mrope_section"] = [half - 2 * (3 * half // 8), 3 * half // 8, 3 * half // 8]
        if isinstance(fields.get("kv_lora_rank"), int):
            for attr, v in TINY_MLA.items():   # (DeepSeek-V2's default leaves the experts per token unset)
                if isinstance(fields.get(attr), int) or (attr == "num_experts_per_tok" and attr in fields):
                    setattr(cfg, attr, v)
            cfg.head_dim = cfg.qk_rope_head_dim            # the rotary part, as these configs define it
            if "num_key_value_heads" in fields:             # one latent: keys and values for every head
                cfg.num_key_value_heads = cfg.num_attention_heads
            if "qk_head_dim" in fields:
                cfg.qk_head_dim = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        for attr in TOKENS:   # special tokens inside the shrunk vocabulary
            if isinstance(fields.get(attr), int) and fields[attr] >= TINY["vocab_size"]:
                setattr(cfg, attr, 0)
    for attr in DROPOUTS:
        if isinstance(fields.get(attr), float):
            setattr(cfg, attr, 0.0)


def _untie(model: Any, gen: torch.Generator | None) -> None:
    """Weight matrices initialized to one value (zeros: AFMoE's router, gates that start closed) get
    small random values, as trained ones have. With a zero router every expert scores alike, and
    top-k then picks among ties in an order no compiler has to keep."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and p.is_floating_point() and bool((p == p.flatten()[0]).all()):
                p.add_(torch.randn(p.shape, generator=gen).to(p) * 0.02)


def _inputs(model: Any, cfg: Any, tiny: bool, device: str, gen: torch.Generator) -> dict[str, Any]:
    owner = type(model).__name__
    inputs = _main_input(getattr(model, "main_input_name", "input_ids"), owner, cfg, tiny, device, gen)
    takes = inspect.signature(model.forward).parameters
    if "input_ids" in inputs and _two_towers(type(model), cfg):
        inputs.update(_main_input("pixel_values", owner, cfg.vision_config, tiny, device, gen))
    if getattr(cfg, "is_encoder_decoder", False) and "decoder_input_ids" in takes and "decoder_input_ids" not in inputs:
        vocab = getattr(cfg, "vocab_size", None) or 32000
        batch = next(iter(inputs.values())).shape[0]
        inputs["decoder_input_ids"] = torch.randint(0, vocab, (batch, 8 if tiny else 128), generator=gen,
                                                    device=device)
    return inputs


def _two_towers(cls: Any, cfg: Any) -> bool:
    """A text and an image tower that each encode their input (CLIP's kind): the forward takes token
    ids and images, and the config has a vision part but no image token (a vision-language decoder
    reads images in place of such tokens, which text-only inputs do not hold)."""
    takes = inspect.signature(cls.forward).parameters
    return ("input_ids" in takes and "pixel_values" in takes and getattr(cfg, "vision_config", None) is not None
            and not any("image_token" in k for k in cfg.to_dict()))


def _main_input(key: str, owner: str, cfg: Any, tiny: bool, device: str, gen: torch.Generator) -> dict[str, Any]:
    """The input named key of model class owner, sized by cfg."""
    if key == "input_ids":
        if getattr(cfg, "vocab_size", None) is None and getattr(cfg, "text_config", None) is not None:
            cfg = cfg.text_config   # two towers: the text tower's vocabulary and positions
        positions = [getattr(cfg, a, None) for a in ("max_position_embeddings", "n_positions")]
        positions = min([p for p in positions if isinstance(p, int) and p > 0] or [4096])   # XLNet's: -1
        batch, seq = (2, 16) if tiny else (4, min(512, positions))
        vocab = getattr(cfg, "vocab_size", None) or 32000
        return {"input_ids": torch.randint(0, vocab, (batch, seq), generator=gen, device=device)}
    if key in ("pixel_values", "pixel_values_videos"):
        side = getattr(cfg, "image_size", 224)
        side = side[0] if isinstance(side, (list, tuple)) else side
        channels = getattr(cfg, "num_channels", 3)
        batch = 2 if tiny else 32
        frames = getattr(cfg, "num_frames", None) or getattr(cfg, "frames_per_clip", None)
        if key == "pixel_values_videos" or frames:   # a video: [batch, frames, channels, side, side]
            batch = 2 if tiny else 4
            shape: tuple[int, ...] = (batch, frames or 8, channels, side, side)
        else:
            shape = (batch, channels, side, side)
        return {key: torch.randn(shape, generator=gen, device=device)}
    if key == "input_values":
        shape = (2, 4000) if tiny else (8, 64000)
        return {"input_values": torch.randn(shape, generator=gen, device=device)}
    if key == "input_features":
        frames = 2 * getattr(cfg, "max_source_positions", 1500)
        batch = 2 if tiny else 8
        if getattr(cfg, "num_mel_bins", None) is None:   # Speech2Text: [batch, frames, features]
            shape = (batch, frames, cfg.input_feat_per_channel * getattr(cfg, "input_channels", 1))
        else:                                            # Whisper's kind: [batch, mel bins, frames]
            shape = (batch, cfg.num_mel_bins, frames)
        return {"input_features": torch.randn(shape, generator=gen, device=device)}
    if key == "past_values":
        return _series(cfg, 2 if tiny else 64, device, gen)
    raise ValueError(f"{owner}: no inputs known for its main input {key!r}")


def _series(cfg: Any, batch: int, device: str, gen: torch.Generator) -> dict[str, Any]:
    """A time-series model's inputs: a window of past values over its channels (PatchTST's kind), or
    past values with their lags, time features and observed mask and the future's time features
    (the probabilistic forecasters: TimeSeriesTransformer, Informer, Autoformer)."""
    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=gen, device=device)
    channels = getattr(cfg, "num_input_channels", None)
    if channels is not None:
        return {"past_values": randn(batch, cfg.context_length, channels)}
    past = cfg.context_length + max(cfg.lags_sequence)
    size = () if cfg.input_size == 1 else (cfg.input_size,)
    features = cfg.num_time_features
    return {"past_values": randn(batch, past, *size), "past_time_features": randn(batch, past, features),
            "past_observed_mask": torch.ones((batch, past, *size), device=device),
            "future_values": randn(batch, cfg.prediction_length, *size),
            "future_time_features": randn(batch, cfg.prediction_length, features)}
