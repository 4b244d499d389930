"""A LLaMA-style decoder as a model file: 8 layers, hidden 2048, grouped-query attention (16 query
heads, 4 key/value heads), RMSNorm, rotary embeddings, SwiGLU; bf16 inference on 4 x 512 tokens.

    autofuse tune examples/llama_decoder.py            # tunes each distinct graph and kernel once
    autofuse tune examples/llama_decoder.py --resume   # continues an interrupted tune

Built from a `transformers` config with random weights (`pip install -e '.[models]'`); the same
model and input shapes as the `llama` model of `benchmarks/models.py`, so the model benchmark's
`autofuse_tuned` variant finds these plans in the DB.
"""
import torch
import transformers

config = transformers.LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=8,
                                  num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                                  max_position_embeddings=2048, use_cache=False)
torch.manual_seed(0)
model = transformers.LlamaForCausalLM(config).to(torch.bfloat16).eval()


def example_inputs():
    g = torch.Generator().manual_seed(0)
    return [torch.randint(0, config.vocab_size, (4, 512), generator=g)]
