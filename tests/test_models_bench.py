"""The model benchmark's CPU smoke run: a tiny model, eager and autofuse's default plan, compared with
an f32 reference; and its tables from a results record."""
import importlib.util
import json

import pytest
import torch

from benchmarks.models import annotate, markdown, plan, parse


def test_cold_caches_are_removed_and_the_variables_put_back(monkeypatch):
    """A benchmark run leaves no cache folder behind and gives the process its cache variables back."""
    import os
    from benchmarks.models import cold_caches
    monkeypatch.setenv("TRITON_CACHE_DIR", "/somewhere/triton")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    with cold_caches() as caches:
        root = os.path.dirname(os.environ["TRITON_CACHE_DIR"])
        assert os.path.isdir(root) and caches.startswith("cold")
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == os.path.join(root, "inductor")
        os.makedirs(os.environ["TRITON_CACHE_DIR"])   # the compilers fill them
    assert not os.path.exists(root)
    assert os.environ["TRITON_CACHE_DIR"] == "/somewhere/triton" and "TORCHINDUCTOR_CACHE_DIR" not in os.environ


def test_tiny_bert_forward_runs_and_matches_the_reference(tmp_path):
    if importlib.util.find_spec("transformers") is None:   # not imported here: models.py imports it with care
        pytest.skip("transformers is not installed")
    from benchmarks.models import main
    assert main(["--device", "cpu", "--tiny", "--out", str(tmp_path), "--models", "bert", "--modes", "forward",
                 "--variants", "eager,autofuse_default", "--strict"]) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    (run,) = res["runs"]
    assert run["model"] == "bert" and set(run["variants"]) == {"eager", "autofuse_default"}
    af = run["variants"]["autofuse_default"]
    assert "error_text" not in af, af
    assert af["graphs_eager"] == 0 and af["autofuse_kernels"] > 0
    assert {"lower_and_group", "program"} <= set(af["autofuse_compile_parts_s"])   # where the compile went
    # bf16 against the f32 reference: autofuse no further off than eager bf16 is (with slack)
    assert af["error"] < max(3 * run["variants"]["eager"]["error"], 2e-2)
    assert "| bert | forward | autofuse_default |" in (tmp_path / "results.md").read_text()


@pytest.mark.parametrize("model", ["bert", "vit"])
def test_tiny_encoder_training_step_matches_eager(tmp_path, model):
    """BERT's masked-LM step and ViT's classification step: loss and gradients as eager's."""
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed")
    from benchmarks.models import main
    assert main(["--device", "cpu", "--tiny", "--out", str(tmp_path), "--models", model, "--modes", "train",
                 "--variants", "eager,autofuse_default", "--strict"]) == 0
    (run,) = json.loads((tmp_path / "results.json").read_text())["runs"]
    af = run["variants"]["autofuse_default"]
    assert "error_text" not in af, af
    assert af["graphs_eager"] == 0 and af["autofuse_kernels"] > 0
    assert af["error"] < 1e-4 and af["grad_error"] < 1e-4, af


def test_tiny_decoder_optimizer_step_runs_and_matches_eager(tmp_path):
    """The optimizer mode: a compiled AdamW step over a tiny decoder's parameters, every update
    generated, its parameters' change equal to eager's."""
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed")
    from benchmarks.models import main
    assert main(["--device", "cpu", "--tiny", "--out", str(tmp_path), "--models", "llama", "--modes", "optimizer",
                 "--variants", "eager,autofuse_default", "--strict"]) == 0
    (run,) = json.loads((tmp_path / "results.json").read_text())["runs"]
    af = run["variants"]["autofuse_default"]
    assert "error_text" not in af, af
    assert af["graphs_eager"] == 0 and af["autofuse_fallback_kernels"] == 0
    assert run["variants"]["eager"]["error"] == 0 and af["error"] < 1e-4


def test_plan_puts_max_autotune_last_and_trains_only_trainable_models():
    opts = parse(["--out", "x", "--models", "t5,resnet50", "--variants", "inductor_max_autotune,eager"])
    jobs = plan(opts)
    assert [j[2] for j in jobs] == ["eager"] * 3 + ["inductor_max_autotune"] * 3
    assert ("t5", "train", "eager") not in jobs and ("resnet50", "train", "eager") in jobs


def test_any_torchvision_classifier_is_named_by_its_builder_and_trains():
    opts = parse(["--out", "x", "--models", "torchvision:inception_v3", "--variants", "eager"])
    assert plan(opts) == [("torchvision:inception_v3", "forward", "eager"),
                          ("torchvision:inception_v3", "train", "eager")]
    with pytest.raises(SystemExit):
        parse(["--out", "x", "--models", "torchvision:"])


def test_markdown_shows_failures_and_ratios():
    res = {"device": "d", "torch": "t", "triton": "tr", "date": "x", "command": "c", "not_run": ["vit forward eager"],
           "runs": [{"model": "gpt2", "mode": "forward", "variants": {
               "inductor": {"wall_ms": 2.0, "wall_ms_vs_inductor": 1.0, "error": 1e-3, "error_vs_inductor": 1.0},
               "autofuse_default": {"error_text": "LoweringError: get_attr | x"}}}]}
    md = markdown(res)
    assert "| gpt2 | forward | inductor | 2.00 (1.00) |" in md
    assert "✗ LoweringError: get_attr / x" in md
    assert "Not run (time budget): vit forward eager" in md


def test_a_variant_timed_in_its_own_rounds_takes_its_ratios_from_those_rounds():
    """max-autotune is timed beside torch.compile default in later rounds: its wall and host ratios use
    torch.compile's times from those rounds, its GPU and compile ratios the main row's."""
    res = {"runs": [{"model": "bert", "mode": "forward", "variants": {
        "inductor": {"wall_ms": 6.0, "host_ms": 6.0, "gpu_ms": 3.0, "compile_s": 10.0},
        "inductor_max_autotune": {"wall_ms": 4.5, "host_ms": 4.4, "gpu_ms": 4.0, "compile_s": 60.0,
                                  "beside": {"inductor": {"wall_ms": 4.0, "host_ms": 4.0}}}}}]}
    annotate(res)
    ma = res["runs"][0]["variants"]["inductor_max_autotune"]
    assert ma["wall_ms_vs_inductor"] == pytest.approx(1.125) and ma["host_ms_vs_inductor"] == pytest.approx(1.1)
    assert ma["gpu_ms_vs_inductor"] == pytest.approx(4 / 3) and ma["compile_s_vs_inductor"] == pytest.approx(6.0)


def test_tiny_generation_through_the_compiled_forward_gives_eagers_tokens(tmp_path):
    """The generate mode: greedy tokens with a static cache, autofuse's forward compiled strict, the
    same tokens as eager bf16 (both checked against the f32 model's)."""
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed")
    from benchmarks.models import main
    assert main(["--device", "cpu", "--tiny", "--out", str(tmp_path), "--models", "gpt2,bert", "--modes", "generate",
                 "--variants", "eager,autofuse_default", "--strict"]) == 0
    (run,) = json.loads((tmp_path / "results.json").read_text())["runs"]   # bert has no generate mode
    assert run["model"] == "gpt2" and run["mode"] == "generate"
    eager, af = run["variants"]["eager"], run["variants"]["autofuse_default"]
    assert "error_text" not in af, af
    assert af["graphs_eager"] == 0 and af["autofuse_kernels"] > 0
    assert af["autofuse_graphs"] == 2   # the prompt's and one decoding step's: the static cache keeps sizes
    assert af["error"] == eager["error"] < 0.5


def test_tiny_decoding_with_the_default_cache_compiles_each_graph_once(tmp_path):
    """The decode mode: transformers' growing cache, the forward compiled with Dynamo's automatic
    dynamic sizes: eager's tokens and no graph left to eager (test_regions.py checks that the step
    over a symbolic cache length compiles once)."""
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed")
    from benchmarks.models import main
    assert main(["--device", "cpu", "--tiny", "--out", str(tmp_path), "--models", "gpt2", "--modes", "decode",
                 "--variants", "eager,autofuse_default", "--strict"]) == 0
    (run,) = json.loads((tmp_path / "results.json").read_text())["runs"]
    eager, af = run["variants"]["eager"], run["variants"]["autofuse_default"]
    assert "error_text" not in af, af
    assert af["graphs_eager"] == 0 and af["autofuse_kernels"] > 0 and af["error"] == eager["error"] < 0.5


@pytest.mark.parametrize("model", ["llama", "gemma2"])
def test_the_attention_option_sets_the_models_implementation(tmp_path, model):
    """--attention eager runs a transformers model with eager attention, whichever implementation
    this transformers release would pick (LLaMA's is SDPA), and decoding under it gives eager's
    tokens."""
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed")
    from benchmarks.models import Job, main
    assert Job(model, "decode", tiny=True, device="cpu", attention="eager").base.config._attn_implementation == "eager"
    assert main(["--device", "cpu", "--tiny", "--out", str(tmp_path), "--models", model, "--modes", "decode",
                 "--variants", "eager,autofuse_default", "--strict", "--attention", "eager"]) == 0
    (run,) = json.loads((tmp_path / "results.json").read_text())["runs"]
    eager, af = run["variants"]["eager"], run["variants"]["autofuse_default"]
    assert "error_text" not in af, af
    assert af["graphs_eager"] == 0 and af["error"] == eager["error"] < 0.5


def test_any_transformers_class_runs_from_its_config_defaults(tmp_path):
    """`transformers:<class>`: a family the benchmark does not name, built from its config class's
    defaults (tiny: shrunk), forward and a masked-LM training step, both against eager."""
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed")
    from benchmarks.models import main
    assert main(["--device", "cpu", "--tiny", "--out", str(tmp_path), "--models",
                 "transformers:DebertaV2Model,transformers:RobertaForMaskedLM", "--modes", "forward,train",
                 "--variants", "eager,autofuse_default", "--strict"]) == 0
    runs = {(r["model"], r["mode"]): r for r in json.loads((tmp_path / "results.json").read_text())["runs"]}
    # a base model has no loss: no training step for it
    assert set(runs) == {("transformers:DebertaV2Model", "forward"), ("transformers:RobertaForMaskedLM", "forward"),
                         ("transformers:RobertaForMaskedLM", "train")}
    for (model, mode), run in runs.items():
        af = run["variants"]["autofuse_default"]
        assert "error_text" not in af, (model, af)
        assert af["graphs_eager"] == 0 and af["autofuse_kernels"] > 0
        if mode == "train":
            assert af["error"] < 1e-4 and af["grad_error"] < 1e-4, af
        else:
            assert af["error"] < max(3 * run["variants"]["eager"]["error"], 2e-2), af


def test_unknown_transformers_class_is_one_clear_error():
    from benchmarks.any_transformers import build_any
    transformers = pytest.importorskip("transformers")
    with pytest.raises(ValueError, match="no model class 'NoSuchModel'"):
        build_any("transformers:NoSuchModel", True, False, "cpu", None, transformers)


def test_weights_initialized_to_one_value_are_untied():
    """AFMoE's router starts at zeros: built by the benchmark it ranks experts without ties, so a
    compiled top-k picks the experts eager picks."""
    from benchmarks.any_transformers import build_any
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "AfmoeModel"):
        pytest.skip("this transformers has no AfmoeModel")
    model, inputs = build_any("transformers:AfmoeModel", True, False, "cpu", torch.Generator().manual_seed(0),
                              transformers)
    gate = model.layers[-1].mlp.router.gate.weight
    assert gate.std() > 0.01
    assert (model.norm.weight == 1).all()      # vectors (norm weights, biases) stay as initialized


@pytest.mark.parametrize("cls, keys", [
    ("PatchTSTModel", {"past_values"}),
    ("TimeSeriesTransformerModel", {"past_values", "past_time_features", "past_observed_mask", "future_values",
                                    "future_time_features"}),
    ("Speech2TextModel", {"input_features", "decoder_input_ids"}),
    ("VivitModel", {"pixel_values"}),
])
def test_time_series_speech_and_video_get_their_inputs(cls, keys):
    """Past values (a window over channels, or values with lags, time features and the future's time
    features; a prediction length where the config leaves none), Speech2Text's [batch, frames,
    features] and a video's [batch, frames, channels, height, width]: each model runs eagerly on what
    the builder gives it."""
    from benchmarks.any_transformers import build_any
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, cls):
        pytest.skip(f"this transformers has no {cls}")
    model, inputs = build_any("transformers:" + cls, True, False, "cpu", torch.Generator().manual_seed(0), transformers)
    assert set(inputs) == keys
    with torch.no_grad():
        out = model.eval()(**inputs)
    assert torch.isfinite(out[0]).all()


@pytest.mark.parametrize("cls, agrees", [
    ("SwinModel", lambda cfg, inputs: cfg.window_size == 2 and inputs["pixel_values"].shape[-1] == 64),
    ("DeepseekV3Model", lambda cfg, inputs: cfg.head_dim == cfg.qk_rope_head_dim
                                            and cfg.num_key_value_heads == cfg.num_attention_heads),
    ("Qwen2VLTextModel", lambda cfg, inputs: sum(cfg.rope_parameters["mrope_section"])
                                             == cfg.hidden_size // cfg.num_attention_heads // 2),
    ("HunYuanDenseV1Model", lambda cfg, inputs: cfg.head_dim == cfg.hidden_size // cfg.num_attention_heads),
    ("ConvNextModel", lambda cfg, inputs: cfg.patch_size == 4),
    ("Mamba2Model", lambda cfg, inputs: cfg.num_heads * cfg.head_dim == cfg.expand * cfg.hidden_size),
    ("SiglipModel", lambda cfg, inputs: set(inputs) == {"input_ids", "pixel_values"}
                                        and int(inputs["input_ids"].max()) < cfg.text_config.vocab_size == 500),
])
def test_tiny_configs_keep_fields_that_must_agree(cls, agrees):
    """Shrinking widths alone breaks models whose fields depend on each other: Swin's window must fit
    every stage's map (its position table is sized by it), latent attention's rotary part is its
    head_dim, multimodal rotary's sections split the rotary half of a head, a head size left unset
    is read as set, ConvNeXt's stride-2 stages need more than its 32-pixel image over a patch of 8,
    Mamba-2's heads times their size make its inner width, two towers (SigLIP) are shrunk each and
    get tokens and images. Each class is built tiny and runs eagerly."""
    from benchmarks.any_transformers import build_any
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, cls):
        pytest.skip(f"this transformers has no {cls}")
    model, inputs = build_any("transformers:" + cls, True, False, "cpu", torch.Generator().manual_seed(0), transformers)
    assert agrees(model.config, inputs)
    with torch.no_grad():
        out = model.eval()(**inputs)
    assert torch.isfinite(out[0]).all()
