"""Real models end to end: eager, torch.compile (default, max-autotune-no-cudagraphs), autofuse's
default plan and autofuse tuned (with --db), side by side in one run.

    python3 -m benchmarks.models --out DIR [--models llama,gpt2,bert,vit,resnet50,qwen2,t5,convnext,...]
        [--modes forward,train,optimizer,generate,decode] [--variants eager,inductor,inductor_max_autotune,autofuse_default,autofuse_tuned]
        [--db PATH | --tune-budget S] [--time-budget S] [--calls N] [--strict]
    python3 -m benchmarks.models --device cpu --tiny --out DIR --models bert --variants eager,autofuse_default

Models are built from configs with random weights (no downloads): a LLaMA-style decoder (8 layers,
hidden 2048, GQA 16/4 heads, RMSNorm, RoPE, SwiGLU; batch 4 x 512 tokens), GPT-2 (12 layers, n_embd
1024; 4 x 512), BERT-base (16 x 512), ViT-base/16 (32 images of 224²) and torchvision's ResNet-50
(32 images of 224²); beside them, models the compiler is not tuned on: a Qwen2-style decoder (8
layers, hidden 1536, GQA 12/2 heads, biased QKV, a 151 936-token vocabulary; 4 x 512), T5-base
(encoder-decoder, relative position buckets; 16 x 512 in, 16 x 128 out), a Mixtral-style mixture of
experts (8 layers, 8 experts, 2 per token), a Gemma-2-style decoder (soft-capped logits,
sliding-window layers) and torchvision's
ConvNeXt-T, MobileNet v3 large, EfficientNet-B0 and Swin-T (32 images of 224²); any other
torchvision classifier as `torchvision:<builder>` (`torchvision:inception_v3`, 32 images of 224²),
and any transformers model class as `transformers:<class>` (`transformers:DebertaV2Model`: its
config's defaults, at most 6 layers; `benchmarks/any_transformers.py`). "forward": bf16 inference, no grad. "train": one training step in f32 (forward
with the loss inside the compiled model, backward, an eager AdamW step) for the LLaMA-style decoder,
GPT-2 (its token embedding tied to the LM head), BERT (with its masked-LM head), ViT (with its
classification head) and ResNet-50.
"optimizer": one AdamW step (multi-tensor on CUDA) over the f32 model's parameters, with fixed
gradients, `opt.step` compiled; its error is that of the parameters' change against eager's.
"generate": greedy `generate` in bf16 with a static cache (the prompt, then 32 tokens), the model's
forward compiled (transformers' own compile of it turned off); its error is the share of generated
tokens that differ from the f32 model's. "decode": the same with transformers' default cache, which
grows by a token per step, and the forward compiled as torch.compile compiles by default (`dynamic`
unset: Dynamo makes the cache length symbolic once it has changed).
Dropout is off unless --dropout P turns every dropout module of a training step on (GPT-2's).
--attention IMPL runs transformers models with that attention implementation (`eager`: the scores
computed by matrix products and a softmax, as newer transformers releases run Gemma-2).

Per model, mode and variant: GPU time per call (the profiler's sum of GPU kernel times), wall time
per call (back-to-back calls, one synchronize at the end), host time per call (time to enqueue calls
while the GPU sleeps, so the host never waits on it; both the median of 5 rounds, each round taking
every variant of the model in rotating order, so drift in the host's speed hits all alike; with
--host-profile N also the N functions with the most own host time), compile time (the first call; every cache
directory fresh at the start of the run, unless --warm-cache), kernels per call (profiler: GPU
kernels launched, library kernels included), autofuse's kernels and graphs left to eager (its
report; compiled non-strict, as users run it, unless --strict), and the relative error of the main
output (logits, hidden states, or loss and gradients) against an f32 eager reference with TF32 off,
next to torch.compile's. A variant that fails is recorded and the run goes on. Variants run in
priority order: max-autotune comes after every other variant of every model, so a run cut short by
--time-budget drops it first. Writes DIR/results.json (after every variant), results.md, results.png.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import json
import os
import platform
import shutil
import sys
import statistics
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from .any_transformers import DROPOUTS, PREFIX as TRANSFORMERS, build_any, is_any, trainable
from .run import gpu_profile

MODELS = ("llama", "gpt2", "bert", "vit", "resnet50", "qwen2", "t5", "convnext", "mobilenet_v3", "efficientnet", "swin",
          "phi", "bloom", "opt", "gpt_neox", "whisper_encoder", "clip_vision", "densenet121", "regnet", "mobilenet_v2",
          "shufflenet", "mixtral", "gemma2")
VISION = ("resnet50", "convnext", "mobilenet_v3", "efficientnet", "swin", "densenet121", "regnet", "mobilenet_v2",
          "shufflenet")   # torchvision classifiers
TORCHVISION = "torchvision:"   # any other torchvision classifier by its builder: torchvision:inception_v3
TRAINABLE = ("llama", "gpt2", "bert", "vit", "resnet50")
GENERATIVE = ("llama", "qwen2", "gpt2", "phi", "bloom", "opt", "gpt_neox", "mixtral", "gemma2")   # causal LMs: the generate mode
NEW_TOKENS = 32          # tokens a generate call decodes after its prompt (tiny: 4)
MODES = ("forward", "train", "optimizer", "generate", "decode")
GENERATION = ("generate", "decode")   # the modes that run `generate`
VARIANTS = ("eager", "inductor", "autofuse_rules", "autofuse_default", "autofuse_tuned", "inductor_max_autotune")
SLEEP_CYCLES_PER_S = 2.0e9   # about the H200's clock: a sleep of s seconds spins s * this many cycles
MAX_QUEUED_KERNELS = 600     # below the GPU's launch queue depth: enqueueing never blocks


def transformers_module() -> Any:
    """transformers, importable where a torchvision built for another torch breaks its import."""
    try:
        import torchvision  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken torchvision: hide it from transformers
        for k in [k for k in sys.modules if k.startswith("torchvision")]:
            del sys.modules[k]
        sys.modules["torchvision"] = None  # type: ignore[assignment]
    import transformers
    return transformers


# ---- models -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Built:
    model: nn.Module
    inputs: dict[str, Any]      # keyword inputs of one call


def _tokens(batch: int, seq: int, vocab: int, device: str, gen: torch.Generator) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq), generator=gen, device=device)


# decoders with rotary positions, RMS norms and grouped-query attention: (config, model, full size)
DECODERS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM",
              dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=8, num_attention_heads=16,
                   num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM",
              dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=8, num_attention_heads=12,
                   num_key_value_heads=2, vocab_size=151936, max_position_embeddings=4096)),
}
# more causal language models, each with its own mix: (config, model, full size, tiny size)
LANGUAGE_MODELS = {
    "phi": ("PhiConfig", "PhiForCausalLM",   # partial rotary, parallel attention and MLP, layer norms
            dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=8, num_attention_heads=32,
                 vocab_size=51200, max_position_embeddings=2048),
            dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 vocab_size=500, max_position_embeddings=64)),
    "bloom": ("BloomConfig", "BloomForCausalLM",   # ALiBi biases, a 250k vocabulary
              dict(hidden_size=1024, n_layer=12, n_head=16, vocab_size=250880),
              dict(hidden_size=64, n_layer=2, n_head=4, vocab_size=500)),
    "opt": ("OPTConfig", "OPTForCausalLM",   # learned positions, ReLU MLP
            dict(hidden_size=1024, ffn_dim=4096, num_hidden_layers=12, num_attention_heads=16, vocab_size=50272,
                 max_position_embeddings=2048, word_embed_proj_dim=1024),
            dict(hidden_size=64, ffn_dim=128, num_hidden_layers=2, num_attention_heads=4, vocab_size=500,
                 max_position_embeddings=64, word_embed_proj_dim=64)),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM",   # rotary over a quarter of each head, parallel residual
                 dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=12, num_attention_heads=16,
                      vocab_size=50432, rotary_pct=0.25, max_position_embeddings=2048),
                 dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      vocab_size=500, rotary_pct=0.25, max_position_embeddings=64)),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",   # a mixture of 8 experts, 2 routed per token
                dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                     num_key_value_heads=4, num_local_experts=8, num_experts_per_tok=2, vocab_size=32000,
                     max_position_embeddings=2048),
                dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, vocab_size=500,
                     max_position_embeddings=64)),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM",   # logit soft-capping, sliding-window layers, GeGLU
               dict(hidden_size=1536, intermediate_size=6144, num_hidden_layers=8, num_attention_heads=8,
                    num_key_value_heads=4, head_dim=192, vocab_size=256000, sliding_window=256,
                    max_position_embeddings=2048),
               dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, vocab_size=500, sliding_window=8,
                    max_position_embeddings=64)),
}
TINY_DECODER = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=500, max_position_embeddings=64)


def build(name: str, tiny: bool, train: bool, device: str) -> Built:
    """The model (f32, random weights, on device) and its inputs; in train mode the loss is computed
    inside the model (labels / targets among the inputs)."""
    gen = torch.Generator(device=device).manual_seed(0)
    torch.manual_seed(0)
    if name in VISION or name.startswith(TORCHVISION):
        return _vision(name, tiny, train, device, gen)
    tf = transformers_module()
    if is_any(name):
        model, inputs = build_any(name, tiny, train, device, gen, tf)
        return Built(model.to(device), inputs)
    if name in DECODERS:
        cfg_cls, model_cls, full = DECODERS[name]
        cfg = getattr(tf, cfg_cls)(**(TINY_DECODER if tiny else full))
        cfg.use_cache = False
        model = getattr(tf, model_cls)(cfg)
        ids = _tokens(2, 16, 500, device, gen) if tiny else _tokens(4, 512, cfg.vocab_size, device, gen)
        inputs = {"input_ids": ids, **({"labels": ids} if train else {})}
    elif name in LANGUAGE_MODELS:
        cfg_cls, model_cls, full, small = LANGUAGE_MODELS[name]
        cfg = getattr(tf, cfg_cls)(**(small if tiny else full))
        cfg.use_cache = False
        for attr in DROPOUTS:
            if isinstance(getattr(cfg, attr, None), float):
                setattr(cfg, attr, 0.0)
        model = getattr(tf, model_cls)(cfg)
        ids = _tokens(2, 16, 500, device, gen) if tiny else _tokens(4, 512, cfg.vocab_size, device, gen)
        inputs = {"input_ids": ids, **({"labels": ids} if train else {})}
    elif name == "whisper_encoder":
        cfg = tf.WhisperConfig(d_model=64, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128,
                               decoder_layers=1, decoder_attention_heads=4, decoder_ffn_dim=128, num_mel_bins=16,
                               max_source_positions=8) if tiny else \
            tf.WhisperConfig(d_model=768, encoder_layers=12, encoder_attention_heads=12, encoder_ffn_dim=3072,
                             num_mel_bins=80, max_source_positions=1500)
        cfg.dropout = cfg.attention_dropout = cfg.activation_dropout = 0.0
        from transformers.models.whisper.modeling_whisper import WhisperEncoder
        model = WhisperEncoder(cfg)
        shape = (2, 16, 16) if tiny else (8, 80, 3000)
        inputs = {"input_features": torch.randn(shape, generator=gen, device=device)}
    elif name == "clip_vision":
        cfg = tf.CLIPVisionConfig(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=128) if tiny else tf.CLIPVisionConfig()
        model = tf.CLIPVisionModel(cfg)
        shape = (2, 3, 32, 32) if tiny else (32, 3, 224, 224)
        inputs = {"pixel_values": torch.randn(shape, generator=gen, device=device)}
    elif name == "gpt2":
        cfg = tf.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=500, n_positions=64, bos_token_id=0,
                             eos_token_id=0) if tiny else \
            tf.GPT2Config(n_embd=1024, n_layer=12, n_head=16, vocab_size=50257, n_positions=1024)
        cfg.use_cache, cfg.resid_pdrop, cfg.embd_pdrop, cfg.attn_pdrop = False, 0.0, 0.0, 0.0
        model = tf.GPT2LMHeadModel(cfg)
        ids = _tokens(2, 16, 500, device, gen) if tiny else _tokens(4, 512, 50257, device, gen)
        inputs = {"input_ids": ids, **({"labels": ids} if train else {})}
    elif name == "bert":
        cfg = tf.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                            vocab_size=500, max_position_embeddings=64) if tiny else tf.BertConfig()
        cfg.hidden_dropout_prob = cfg.attention_probs_dropout_prob = 0.0
        ids = _tokens(2, 16, 500, device, gen) if tiny else _tokens(16, 512, cfg.vocab_size, device, gen)
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        if train:   # the encoder with its masked-LM head, every position a target
            model = tf.BertForMaskedLM(cfg)
            inputs["labels"] = ids
        else:
            model = tf.BertModel(cfg, add_pooling_layer=False)
    elif name == "t5":
        cfg = tf.T5Config(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, vocab_size=500) if tiny else \
            tf.T5Config(d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_heads=12, vocab_size=32128)
        cfg.dropout_rate, cfg.use_cache = 0.0, False
        model = tf.T5ForConditionalGeneration(cfg)
        batch, src, tgt = (2, 16, 8) if tiny else (16, 512, 128)
        inputs = {"input_ids": _tokens(batch, src, cfg.vocab_size, device, gen),
                  "decoder_input_ids": _tokens(batch, tgt, cfg.vocab_size, device, gen)}
    elif name == "vit":
        cfg = tf.ViTConfig(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=128) if tiny else tf.ViTConfig()
        cfg.hidden_dropout_prob = cfg.attention_probs_dropout_prob = 0.0
        shape = (2, 3, 32, 32) if tiny else (32, 3, 224, 224)
        inputs = {"pixel_values": torch.randn(shape, generator=gen, device=device)}
        if train:   # the encoder with its classification head (ImageNet's 1000 classes)
            cfg.num_labels = 10 if tiny else 1000
            model = tf.ViTForImageClassification(cfg)
            inputs["labels"] = torch.randint(0, cfg.num_labels, (shape[0],), generator=gen, device=device)
        else:
            model = tf.ViTModel(cfg, add_pooling_layer=False)
    else:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
    return Built(model.to(device), inputs)


class WithLoss(nn.Module):
    """An image classifier with its cross-entropy loss, so the loss is part of the compiled graph."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        logits = self.net(pixel_values)
        return logits if labels is None else F.cross_entropy(logits, labels)


def _vision(name: str, tiny: bool, train: bool, device: str, gen: torch.Generator) -> Built:
    """A torchvision classifier (its full architecture; tiny: 10 classes, two 32x32 images, and
    ResNet with one bottleneck per stage) on 32 images of 224x224."""
    import torchvision
    from torchvision.models.resnet import Bottleneck, ResNet
    classes = 10 if tiny else 1000
    if name == "resnet50" and tiny:
        net = ResNet(Bottleneck, [1, 1, 1, 1], num_classes=classes)
    elif name.startswith(TORCHVISION):
        builder = name[len(TORCHVISION):]
        kw = {"aux_logits": False, "init_weights": True} if builder in ("inception_v3", "googlenet") else {}
        net = torchvision.models.get_model(builder, weights=None, num_classes=classes, **kw)
    else:
        builder = {"resnet50": "resnet50", "convnext": "convnext_tiny", "mobilenet_v3": "mobilenet_v3_large",
                   "efficientnet": "efficientnet_b0", "swin": "swin_t", "densenet121": "densenet121",
                   "regnet": "regnet_y_1_6gf", "mobilenet_v2": "mobilenet_v2", "shufflenet": "shufflenet_v2_x1_0"}[name]
        net = getattr(torchvision.models, builder)(weights=None, num_classes=classes)
    side = 32 if name in VISION else 80   # the smallest many others accept (Inception's 75)
    shape = (2, 3, side, side) if tiny else (32, 3, 224, 224)
    inputs: dict[str, Any] = {"pixel_values": torch.randn(shape, generator=gen, device=device)}
    if train:
        inputs["labels"] = torch.randint(0, classes, (shape[0],), generator=gen, device=device)
    return Built(WithLoss(net).to(device), inputs)


def main_output(out: Any) -> torch.Tensor:
    """The tensor a model call is judged by: the loss, logits, last hidden state, or the tensor."""
    if isinstance(out, torch.Tensor):
        return out
    for key in ("loss", "logits", "last_hidden_state"):
        v = getattr(out, key, None)
        if isinstance(v, torch.Tensor):
            return v
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    raise TypeError(f"no output tensor in a {type(out).__name__}")


def rel_error(a: torch.Tensor, ref: torch.Tensor) -> float:
    a, ref = a.detach().double(), ref.detach().double()
    return float((a - ref).norm() / ref.norm().clamp_min(1e-30))


@contextlib.contextmanager
def no_tf32():
    m, c = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = m, c


# ---- one model in one mode: its calls and its reference -----------------------------------------

class Job:
    """A model in one mode (forward, train, optimizer, generate): its f32 reference and a fresh call
    per variant."""

    def __init__(self, name: str, mode: str, tiny: bool, device: str, dropout: float = 0.0,
                 attention: str | None = None) -> None:
        self.name, self.mode, self.device = name, mode, device
        built = build(name, tiny, mode == "train", device)
        if attention and hasattr(getattr(built.model, "config", None), "_attn_implementation"):
            # transformers looks the attention function up from the config at each call
            built.model.config._attn_implementation = attention
        if dropout and mode == "train":
            # every dropout module drawing again; the reference and each variant then draw other masks
            for m in built.model.modules():
                if isinstance(m, nn.Dropout):
                    m.p = dropout
        if mode == "optimizer":
            self._init_optimizer(built.model)
            return
        if mode in GENERATION:
            self._init_generate(built, tiny, static=mode == "generate")
            return
        self.base, self.inputs = built.model, built.inputs
        with no_tf32():
            if mode == "forward":
                self.base.eval()
                with torch.no_grad():
                    self.ref = [main_output(self.base(**self.inputs)).float()]
                self.model = copy.deepcopy(self.base).to(torch.bfloat16)
                self.call_inputs = {k: v.to(torch.bfloat16) if v.is_floating_point() else v
                                    for k, v in self.inputs.items()}
            else:
                self.base.train()
                ref = copy.deepcopy(self.base)
                loss = main_output(ref(**self.inputs))
                loss.backward()
                self.ref = [loss.detach()] + [p.grad.detach() for p in ref.parameters() if p.grad is not None]
                del ref

    def _init_optimizer(self, model: nn.Module) -> None:
        """The optimizer mode: fixed random gradients on the model's f32 parameters, and as reference
        the change of every parameter in one eager AdamW step."""
        gen = torch.Generator().manual_seed(1)
        self.base = model
        for p in model.parameters():
            p.grad = (torch.randn(p.shape, generator=gen) * 1e-2).to(self.device)
        ref = copy.deepcopy(model)
        for p, q in zip(ref.parameters(), model.parameters()):
            p.grad = q.grad.clone()
        with torch.no_grad():
            before = [p.detach().clone() for p in ref.parameters()]
            torch.optim.AdamW(ref.parameters(), lr=1e-3, foreach=self.device == "cuda").step()
            self.ref = [p.detach() - b for p, b in zip(ref.parameters(), before)]
        del ref

    def _init_generate(self, built: Built, tiny: bool, static: bool) -> None:
        """The generate and decode modes: the prompt, greedy settings (a static cache, or the default
        growing one) and the f32 model's tokens."""
        self.base, self.inputs = built.model.eval(), built.inputs
        self.prompt = built.inputs["input_ids"]
        new = 4 if tiny else NEW_TOKENS
        self.generate_kwargs = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0,
                                    use_cache=True)   # the configs turn caches off
        if static:
            self.generate_kwargs["cache_implementation"] = "static"
        self.base.generation_config.disable_compile = True   # each variant compiles the forward itself
        with no_tf32(), torch.no_grad():
            self.ref = [self.base.generate(self.prompt, **self.generate_kwargs)[:, self.prompt.shape[1]:]]
        self.model = copy.deepcopy(self.base).to(torch.bfloat16)

    def _generate_call(self, compile_fn: Callable[[Any], Callable[..., Any]]
                       ) -> tuple[Callable[[], Any], Callable[[], list]]:
        """One greedy generation through a compiled forward, as transformers' docs compile it."""
        model = copy.deepcopy(self.model)
        model.forward = compile_fn(model.forward)

        def call() -> Any:
            with torch.no_grad():
                return model.generate(self.prompt, **self.generate_kwargs)

        return call, lambda: [call()[:, self.prompt.shape[1]:]]

    def _optimizer_call(self, compile_fn: Callable[[nn.Module], Callable[..., Any]]
                        ) -> tuple[Callable[[], Any], Callable[[], list]]:
        """One AdamW step (multi-tensor on CUDA, torch.optim's default there) over the model's
        parameters, `opt.step` compiled as torch.compile users compile it."""
        model = copy.deepcopy(self.base)
        for p, q in zip(model.parameters(), self.base.parameters()):
            p.grad = q.grad.clone()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=self.device == "cuda")
        before = [p.detach().clone() for p in model.parameters()]
        fn = compile_fn(opt.step)
        first: list = []

        def step() -> Any:
            with torch.no_grad():
                fn()
                if not first:
                    first.extend(p.detach() - b for p, b in zip(model.parameters(), before))

        def outputs() -> list:
            if not first:
                step()
            return first

        return step, outputs

    def variant_call(self, compile_fn: Callable[[nn.Module], Callable[..., Any]]) -> tuple[Callable[[], Any], Callable[[], list]]:
        """(call, outputs): call runs one forward (no grad), one training step or one optimizer step;
        outputs gives the tensors compared with the reference (in training, the first step's loss
        and gradients; for the optimizer, the first step's change of each parameter)."""
        if self.mode == "optimizer":
            return self._optimizer_call(compile_fn)
        if self.mode in GENERATION:
            return self._generate_call(compile_fn)
        if self.mode == "forward":
            fn = compile_fn(self.model)

            def call() -> Any:
                with torch.no_grad():
                    return fn(**self.call_inputs)

            return call, lambda: [main_output(call()).float()]
        model = copy.deepcopy(self.base)
        fn = compile_fn(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=self.device == "cuda")
        first: list = []   # the first step's loss and gradients: those of the starting weights

        def step() -> Any:
            loss = main_output(fn(**self.inputs))
            loss.backward()
            if not first:
                first.extend([loss.detach().clone()] + [p.grad.detach().clone() for p in model.parameters()
                                                        if p.grad is not None])
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss

        def outputs() -> list:
            if not first:
                step()
            return first

        return step, outputs

    def tune(self, db: str, budget: float, trials: int) -> dict[str, Any]:
        """Tune this model's graphs (inference, or a training step's forward and backward) into db."""
        import autofuse
        if self.mode in ("optimizer", *GENERATION):
            raise RuntimeError(f"the {self.mode} mode has no tuned variant")
        if self.mode == "forward":
            model, kwargs, train = self.model, self.call_inputs, False
        else:
            model, kwargs, train = copy.deepcopy(self.base), self.inputs, True
        t0 = time.perf_counter()
        res = autofuse.tune(model, (), example_kwargs=kwargs, train=train, db=db, time_budget=budget, trials=trials,
                            progress=False, compare_torch_compile=False)
        return {"tune_s": time.perf_counter() - t0, "tune_graphs": len(res.graphs),
                "tune_errors": res.errors[:3], "tune_interrupted": res.interrupted}

    def error(self, outs: list) -> dict[str, float]:
        if self.mode == "optimizer":
            num = sum(float((a.double() - b.double()).pow(2).sum()) for a, b in zip(outs, self.ref))
            den = sum(float(b.double().pow(2).sum()) for b in self.ref)
            return {"error": (num / max(den, 1e-300)) ** 0.5}
        if self.mode in GENERATION:
            return {"error": float((outs[0] != self.ref[0]).float().mean())}
        if self.mode == "forward":
            return {"error": rel_error(outs[0], self.ref[0])}
        if len(outs) != len(self.ref):
            raise RuntimeError(f"{len(outs) - 1} gradients, the reference has {len(self.ref) - 1}")
        num = sum(float((a.double() - b.double()).pow(2).sum()) for a, b in zip(outs[1:], self.ref[1:]))
        den = sum(float(b.double().pow(2).sum()) for b in self.ref[1:])
        return {"error": rel_error(outs[0], self.ref[0]), "grad_error": (num / max(den, 1e-300)) ** 0.5}


# ---- variants and measurements ------------------------------------------------------------------

class AutofuseLog:
    """The autofuse report of a compile: kernels, and graphs that fell back to eager (with why)."""

    def __init__(self) -> None:
        from autofuse.api import Recorder
        self.recorder = Recorder()
        self.eager: list[str] = []

    def summary(self) -> dict[str, Any]:
        kernels = [k for _, _, art in self.recorder.graphs for k in art.kernels]
        from_db = sum(1 for _, _, art in self.recorder.graphs if getattr(art, "source", "") == "tuning DB")
        parts: dict[str, float] = {}   # where autofuse's compile time went, summed over graphs (seconds)
        for _, _, art in self.recorder.graphs:
            for k, v in getattr(art, "seconds", {}).items():
                parts[k] = parts.get(k, 0.0) + v
        return {"autofuse_graphs": len(self.recorder.graphs) + len(self.eager), "graphs_eager": len(self.eager),
                "graphs_from_db": from_db, "autofuse_compile_parts_s": parts,
                "eager_reasons": self.eager[:3], "autofuse_kernels": len(kernels),
                "autofuse_fallback_kernels": sum(1 for k in kernels if k.kind == "fallback")}


def compiler(variant: str, opts: argparse.Namespace, log: AutofuseLog | None,
             dynamic: bool | None = False) -> Callable[[nn.Module], Callable[..., Any]]:
    """The variant's compile function; `dynamic` is autofuse's (torch.compile's stays its default)."""
    import autofuse
    if variant == "eager":
        return lambda m: m
    if variant == "inductor":
        return lambda m: torch.compile(m)
    if variant == "inductor_max_autotune":
        return lambda m: torch.compile(m, mode="max-autotune-no-cudagraphs")
    kw: dict[str, Any] = {"strict": opts.strict, "recorder": log.recorder if log else None, "dynamic": dynamic}
    if variant == "autofuse_default":
        return lambda m: autofuse.compile(m, use_db=False, **kw)
    if variant == "autofuse_rules":   # the default plan without compile-time autotuning: size rules only
        return lambda m: autofuse.compile(m, use_db=False, autotune=False, **kw)
    if variant == "autofuse_tuned":
        if not opts.db:
            raise RuntimeError("autofuse_tuned needs --db PATH (a tuning DB with plans for these models)")
        return lambda m: autofuse.compile(m, db=opts.db, **kw)
    raise ValueError(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def compile_variant(job: Job, variant: str, opts: argparse.Namespace) -> tuple[Callable[[], Any] | None, dict[str, Any]]:
    """Compile one variant (its first call), check its error, and profile its GPU time: (call, entry).
    Nothing is reset between variants, so the variants of a model stay compiled side by side and
    their wall and host times can be taken in interleaved rounds (`interleaved`)."""
    log = AutofuseLog() if variant.startswith("autofuse") else None
    entry: dict[str, Any] = {}
    if variant == "autofuse_tuned" and opts.tune_budget:
        entry.update(job.tune(opts.db, opts.tune_budget, opts.tune_trials))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call, outputs = job.variant_call(compiler(variant, opts, log, dynamic=None if job.mode == "decode" else False))
        t0 = time.perf_counter()
        call()
        sync(job.device)
        entry["compile_s"] = time.perf_counter() - t0
        entry.update(job.error(outputs()))
    if log is not None:
        log.eager = [str(w.message)[:300] for w in caught if "could not compile" in str(w.message)]
        entry.update(log.summary())
    if job.device == "cuda":
        try:   # a failing profile leaves the other measurements
            entry.update(gpu_profile(call, opts.profile_calls, opts.gpu_ops))
        except Exception as e:  # noqa: BLE001
            entry["gpu_error"] = _error(e)
        entry["peak_mb"] = peak_mb(call)
    return call, entry


def peak_mb(call: Callable[[], Any]) -> float:
    """MiB a call allocates at its peak above what is resident before it (the other variants'
    weights and caches included, so the variants of a model compare): what decides the largest
    batch that fits. A training step's peak is where its saved activations meet its gradients."""
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    call()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2 ** 20


def interleaved(calls: dict[str, Callable[[], Any]], entries: dict[str, dict[str, Any]], calls_per_round: int,
                record: set[str] | None = None) -> None:
    """Wall and host times of every variant of one model, in ROUNDS rounds whose variant order rotates:
    the host's speed drifts (up to 2x between runs), and every variant sees the same drift. Only the
    variants in `record` (default: all) get their medians written."""
    from autofuse.measure.timing import rotated
    names = list(calls)
    walls: dict[str, list[float]] = {n: [] for n in names}
    hosts: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for n in list(names):   # warm: the first calls after a compile may still allocate
        try:
            for _ in range(3):
                calls[n]()
        except Exception as exc:  # noqa: BLE001 - one variant failing leaves the others
            entries[n]["wall_error"] = _error(exc)
            names.remove(n)
    torch.cuda.synchronize()
    for r in range(ROUNDS):
        for n in rotated(names, r):
            e = entries[n]
            try:
                walls[n].append(wall_round(calls[n], calls_per_round))
                hosts[n].append(host_round(calls[n], statistics.median(walls[n]), e.get("kernels_per_call", 0)))
            except Exception as exc:  # noqa: BLE001 - one variant failing leaves the others
                e["wall_error"] = _error(exc)
    medians = {n: {"wall_ms": statistics.median(walls[n]), "host_ms": statistics.median(h["ms"] for h in hosts[n])}
               for n in names if walls[n] and hosts[n]}
    for n in medians:
        if record is not None and n not in record:
            continue
        e = entries[n]
        e.update(medians[n])
        e["host_calls"] = hosts[n][0]["calls"]
        e["host_exact"] = all(h["exact"] for h in hosts[n])
        e["host_blocked"] = any(h["blocked"] for h in hosts[n])
        if record is not None:   # the others' times in these rounds: the basis of this variant's ratios
            e["beside"] = {m: t for m, t in medians.items() if m not in record}


ROUNDS = 5  # wall and host times are the median of this many rounds: the host's speed drifts


def wall_round(call: Callable[[], Any], calls: int) -> float:
    """Milliseconds per call of `calls` back-to-back calls, one synchronize at the end."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e3


def host_round(call: Callable[[], Any], wall: float, kernels: float) -> dict[str, Any]:
    """Host milliseconds per call: calls enqueued while a GPU sleep holds the stream, so the host
    never waits for the GPU (as many calls as keep the launch queue from filling). `exact` is False
    when the sleep ended before the last call was enqueued (then this is an upper bound); `blocked`
    when enqueueing took as long as the sleep: a call waits on the GPU (a sync)."""
    n = max(1, min(10, int(MAX_QUEUED_KERNELS // max(kernels, 1))))
    sleep_s = 0.1 + 3 * n * wall * 1e-3
    torch.cuda.synchronize()
    torch.cuda._sleep(int(SLEEP_CYCLES_PER_S * sleep_s))
    t0 = time.perf_counter()
    for _ in range(n):
        call()
    t1 = time.perf_counter()
    exact = not torch.cuda.current_stream().query()
    torch.cuda.synchronize()
    return {"ms": (t1 - t0) / n * 1e3, "calls": n, "exact": exact, "blocked": t1 - t0 > 0.8 * sleep_s}


def host_profile(call: Callable[[], Any], kernels: float, top: int) -> list[str]:
    """The `top` functions by own host time over calls enqueued behind a GPU sleep (cProfile: its
    overhead inflates Python frames, so read shares, not absolute times)."""
    import cProfile
    import pstats
    n = max(1, min(10, int(MAX_QUEUED_KERNELS // max(kernels, 1))))
    torch.cuda.synchronize()
    torch.cuda._sleep(int(SLEEP_CYCLES_PER_S * 1.0))
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        call()
    prof.disable()
    torch.cuda.synchronize()
    stats = pstats.Stats(prof)
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]   # (file, line, fn) -> (cc, nc, tt, ct, callers)
    return [f"{tt / n * 1e3:8.3f} ms own {ct / n * 1e3:8.3f} ms cum {nc // n:6d} calls  {Path(f).name}:{line} {fn}"
            for (f, line, fn), (cc, nc, tt, ct, _) in rows]


# ---- the run ------------------------------------------------------------------------------------

def _error(e: BaseException) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first[:300]}"


def plan(opts: argparse.Namespace) -> list[tuple[str, str, str]]:
    """(model, mode, variant) in priority order: max-autotune after everything else."""
    jobs = [(m, mode) for m in opts.models for mode in opts.modes
            if (mode != "train" or m in TRAINABLE or m.startswith(TORCHVISION) or trainable(m))
            and (mode not in GENERATION or m in GENERATIVE)]
    first = [(m, mode, v) for m, mode in jobs for v in opts.variants if v != "inductor_max_autotune"]
    last = [(m, mode, v) for m, mode in jobs for v in opts.variants if v == "inductor_max_autotune"]
    return first + last


def expected_seconds(row: dict[str, Any], variant: str) -> float:
    """A guess at a variant's seconds from torch.compile default's on the same model and mode, so that a variant
    which cannot finish within the budget is not started. max-autotune-no-cudagraphs compiled the bf16 forwards of
    GPT-2, BERT, ViT and ResNet-50 in 7-22x torch.compile default's time on an H200."""
    ind = row["variants"].get("inductor", {})
    base = ind.get("compile_s", 0.0) + ind.get("wall_ms", 0.0) * 1e-3 * 40
    return 13 * base if variant == "inductor_max_autotune" else base


def annotate(results: dict[str, Any]) -> None:
    """Ratios to torch.compile default: wall time, host time, compile time, and error. A variant timed in
    rounds of its own (max-autotune) takes its wall and host ratios from torch.compile default's times in
    those rounds, since the host's speed drifts between rounds."""
    for r in results["runs"]:
        ind = r["variants"].get("inductor", {})
        for e in r["variants"].values():
            for key in ("wall_ms", "host_ms", "gpu_ms", "compile_s", "error", "peak_mb"):
                base = e.get("beside", {}).get("inductor", {}).get(key) or ind.get(key)
                if key in e and base:
                    e[f"{key}_vs_inductor"] = e[key] / base


def markdown(results: dict[str, Any]) -> str:
    lines = [f"Device: {results['device']}; torch {results['torch']}, triton {results['triton']}, "
             f"transformers {results.get('transformers', '?')}; {results['date']}.",
             f"Command: `{results['command']}`.", "",
             "forward: bf16 inference, no grad. train: one f32 step (forward with the loss, backward, eager AdamW). "
             "optimizer: a compiled multi-tensor AdamW step over the f32 parameters (error: of the parameters' change). "
             "error: relative L2 error of the main output (train: the loss; grad: all gradients) against f32 eager "
             "with TF32 off. ×ind: ratio to torch.compile default (time: lower is better). peak: MiB a call allocates "
             "at its peak above what was resident before it. Kernels: GPU operations "
             "per call in the profiler (library kernels, copies and fills included); autofuse's own count and its "
             "graphs left to eager come from its report.", "",
             "| model | mode | variant | wall ms (×ind) | GPU ms | host ms (×ind) | compile s (×ind) | kernels/call | "
             "autofuse kernels | graphs eager | error (×ind) | grad error | peak MiB (×ind) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def f(e: dict, key: str, fmt: str, ratio: bool = False) -> str:
        if key not in e:
            return "—"
        s = format(e[key], fmt)
        return s + (f" ({e[key + '_vs_inductor']:.2f})" if ratio and f"{key}_vs_inductor" in e else "")
    for r in results["runs"]:
        for v, e in r["variants"].items():
            head = f"| {r['model']} | {r['mode']} | {v} | "
            if "error_text" in e:
                lines.append(head + f"✗ {e['error_text'][:150].replace('|', '/')} |" + " |" * 11)
                continue
            host = f(e, "host_ms", ".3f", True) + (" (waits on the GPU)" if e.get("host_blocked") else
                                                   "" if e.get("host_exact", True) else " (upper bound)")
            eager = f"{e['graphs_eager']}/{e['autofuse_graphs']}" if "graphs_eager" in e else "—"
            if e.get("graphs_from_db"):
                eager += f" ({e['graphs_from_db']} from the DB)"
            lines.append(head + " | ".join([f(e, "wall_ms", ".2f", True), f(e, "gpu_ms", ".2f"), host,
                                            f(e, "compile_s", ".1f", True)
                                            + (f" + tune {e['tune_s']:.0f}" if "tune_s" in e else ""),
                                            f(e, "kernels_per_call", ".0f"),
                                            f(e, "autofuse_kernels", "d"), eager, f(e, "error", ".2e", True),
                                            f(e, "grad_error", ".2e"), f(e, "peak_mb", ".0f", True)]) + " |")
    if results.get("not_run"):
        lines += ["", "Not run (time budget): " + ", ".join(results["not_run"])]
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: Path) -> str | None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no plot"
    runs = [r for r in results["runs"] if any("wall_ms_vs_inductor" in e for e in r["variants"].values())]
    if not runs:
        return "nothing timed: no plot"
    names = [v for v in VARIANTS if any(v in r["variants"] for r in runs)]
    fig, ax = plt.subplots(figsize=(max(8, 1.2 * len(runs)), 5))
    w = 0.8 / len(names)
    for i, n in enumerate(names):
        vals = [r["variants"].get(n, {}).get("wall_ms_vs_inductor", 0) for r in runs]
        ax.bar([c + i * w for c in range(len(runs))], vals, w, label=n)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks([c + 0.4 - w / 2 for c in range(len(runs))])
    ax.set_xticklabels([f"{r['model']} {r['mode']}" for r in runs], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("wall time per call ÷ torch.compile default (lower is better)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return None


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--modes", default="forward,train")
    p.add_argument("--variants", default=None, help=f"comma-separated, from {','.join(VARIANTS)} "
                   "(default: all; autofuse_tuned only with --db)")
    p.add_argument("--db", default=None, help="tuning DB with plans for these models (the autofuse_tuned variant)")
    p.add_argument("--tune-budget", type=float, default=0.0, metavar="S",
                   help="tune each model for S seconds (into --db, else a fresh DB) before its autofuse_tuned variant")
    p.add_argument("--tune-trials", type=int, default=40, help="fusion-plan trials per graph when tuning")
    p.add_argument("--time-budget", type=float, default=400.0,
                   help="seconds; no variant starts that would end after it (a guess from torch.compile's compile time)")
    p.add_argument("--calls", type=int, default=20, help="back-to-back calls for the wall time")
    p.add_argument("--profile-calls", type=int, default=5)
    p.add_argument("--host-profile", type=int, default=0, metavar="N",
                   help="also record the N functions with the most own host time per call (cProfile)")
    p.add_argument("--gpu-ops", type=int, default=0, metavar="N",
                   help="also record the N GPU operations with the most time per call (profiler)")
    p.add_argument("--strict", action="store_true", help="autofuse compiles strict (a graph it cannot compile fails the variant)")
    p.add_argument("--warm-cache", action="store_true", help="keep Inductor's, Triton's and autofuse's cache directories")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--tiny", action="store_true", help="tiny configs (CPU smoke test)")
    p.add_argument("--dropout", type=float, default=0.0, metavar="P",
                   help="train mode: every nn.Dropout of the model at probability P (default: dropout off). Each "
                   "variant then draws its own masks, so the error column measures the draws, not the compiler")
    p.add_argument("--attention", default=None, metavar="IMPL",
                   help="transformers models: the attention implementation (eager, sdpa, ...) instead of the one "
                   "this transformers picks for the model (eager is what newer releases pick for Gemma-2)")
    opts = p.parse_args(argv)
    opts.models = [m for m in opts.models.split(",") if m]
    opts.modes = [m for m in opts.modes.split(",") if m]
    if opts.tune_budget and not opts.db:
        opts.db = str(Path(tempfile.mkdtemp(prefix="autofuse-bench-db-")) / "tuning.db")
    if opts.variants is None:
        opts.variants = [v for v in VARIANTS if v != "autofuse_tuned" or opts.db]
    else:
        opts.variants = [v for v in opts.variants.split(",") if v]
    models = {m for m in opts.models if not (m.startswith(TORCHVISION) and len(m) > len(TORCHVISION)) and not is_any(m)}
    for bad, allowed in ((models - set(MODELS), (*MODELS, f"{TORCHVISION}<builder>", f"{TRANSFORMERS}<model class>")), (set(opts.modes) - set(MODES), MODES),
                         (set(opts.variants) - set(VARIANTS), VARIANTS)):
        if bad:
            p.error(f"unknown {sorted(bad)}; choose from {', '.join(allowed)}")
    return opts


@contextlib.contextmanager
def cold_caches() -> Iterator[str]:
    """Point Inductor's, Triton's and autofuse's on-disk caches at empty directories for the run
    (outside out, so the results folder stays small), then put the variables back and remove them:
    a benchmark leaves no cache behind."""
    names = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton", "AUTOFUSE_CACHE_DIR": "autofuse"}
    saved = {var: os.environ.get(var) for var in names}
    root = Path(tempfile.mkdtemp(prefix="autofuse-bench-cache-"))
    try:
        for var, sub in names.items():
            os.environ[var] = str(root / sub)
        yield "cold (empty folders, removed after the run)"
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    if opts.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: use --device cpu --tiny", file=sys.stderr)
        return 2
    if opts.warm_cache:
        return run(opts, argv, "warm (--warm-cache)")
    with cold_caches() as caches:
        return run(opts, argv, caches)


def run(opts: argparse.Namespace, argv: list[str] | None, caches: str) -> int:
    """The benchmark proper: every model, mode and variant of opts, results written under opts.out."""
    import triton
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        tf_version = transformers_module().__version__
    except Exception as e:  # noqa: BLE001 - the torchvision model still runs
        tf_version = f"not importable ({_error(e)})"
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if opts.device == "cuda" else "cpu (Triton interpreter, no timing)",
        "torch": torch.__version__, "triton": triton.__version__, "transformers": tf_version,
        "python": platform.python_version(), "tiny": opts.tiny, "caches": caches,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": "python3 -m benchmarks.models " + " ".join(argv if argv is not None else sys.argv[1:]),
        "runs": [], "not_run": []}
    limit = "recompile_limit" if hasattr(torch._dynamo.config, "recompile_limit") else "cache_size_limit"
    setattr(torch._dynamo.config, limit, 64)   # every variant of a model stays compiled side by side
    t0 = time.perf_counter()
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    jobs: dict[tuple[str, str], Job | str] = {}
    kept: dict[tuple[str, str], Callable[[], Any]] = {}   # torch.compile default, for max-autotune's rounds
    order = plan(opts)
    later = [(m, mode, v) for m, mode, v in order if v == "inductor_max_autotune"]
    groups: dict[tuple[str, str], list[str]] = {}
    for m, mode, v in order:
        groups.setdefault((m, mode), [])
        if v != "inductor_max_autotune":
            groups[(m, mode)].append(v)
    for key in groups:
        rows[key] = {"model": key[0], "mode": key[1], "variants": {}}
        results["runs"].append(rows[key])

    def save() -> None:
        annotate(results)
        (out / "results.json").write_text(json.dumps(results, indent=1))

    def run_variant(key: tuple[str, str], variant: str) -> Callable[[], Any] | None:
        """Compile one variant of a model (building the model once); None if skipped or failed."""
        tuning = opts.tune_budget if variant == "autofuse_tuned" else 0.0
        if time.perf_counter() - t0 + expected_seconds(rows[key], variant) + tuning > opts.time_budget:
            results["not_run"].append(f"{key[0]} {key[1]} {variant}")
            return None
        if key not in jobs:
            try:
                jobs[key] = Job(key[0], key[1], opts.tiny, opts.device, opts.dropout, opts.attention)
            except Exception as e:  # noqa: BLE001 - a model that cannot be built is recorded
                jobs[key] = _error(e)
        job, call = jobs[key], None
        try:
            if isinstance(job, str):
                raise RuntimeError(f"could not build the model: {job}")
            call, entry = compile_variant(job, variant, opts)
        except Exception as e:  # noqa: BLE001 - a failing variant is recorded, the run goes on
            entry = {"error_text": _error(e)}
        entry["elapsed_s"] = time.perf_counter() - t0
        rows[key]["variants"][variant] = entry
        print(f"[{entry['elapsed_s']:.0f}s] {key[0]} {key[1]} {variant}: "
              + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in entry.items()
                          if k not in ("eager_reasons", "elapsed_s")), flush=True)
        save()
        return call

    def time_side_by_side(key: tuple[str, str], calls: dict[str, Callable[[], Any]], record: set[str] | None = None) -> None:
        if opts.device != "cuda" or not calls:
            return
        entries = {v: rows[key]["variants"][v] for v in calls}
        interleaved(calls, entries, opts.calls, record)
        if opts.host_profile:
            for v in calls:
                if v != "eager" and (record is None or v in record):
                    try:
                        entries[v]["host_profile"] = host_profile(calls[v], entries[v].get("kernels_per_call", 0),
                                                                  opts.host_profile)
                    except Exception as e:  # noqa: BLE001
                        entries[v]["host_profile_error"] = _error(e)
        save()

    pending = {(m, mode) for m, mode, _ in later}
    for key, variants in groups.items():
        calls = {v: c for v in variants if (c := run_variant(key, v)) is not None}
        time_side_by_side(key, calls)
        if key in pending and "inductor" in calls:
            kept[key] = calls["inductor"]
        del calls
        if key not in pending:
            jobs.pop(key, None)   # the model and its compiled variants are freed
        if opts.device == "cuda":
            torch.cuda.empty_cache()
    for m, mode, v in later:
        key = (m, mode)
        call = run_variant(key, v)
        if call is not None:
            calls = {"inductor": kept[key], v: call} if key in kept else {v: call}
            time_side_by_side(key, calls, record={v})
        kept.pop(key, None)
        if opts.device == "cuda":
            torch.cuda.empty_cache()
    annotate(results)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    md = markdown(results)
    note = plot(results, out / "results.png")
    if note:
        md += f"\n({note}.)\n"
    (out / "results.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
