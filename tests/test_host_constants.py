"""Constants a model computes on the host and moves to the GPU (Swin v2's shifted-window mask in
transformers) are computed once at compile time: no CPU op, no copy to the GPU at each call."""
import pytest
import torch

from autofuse.capture import host_constants
from autofuse.capture.host_constants import fold_host_constants
from tests.helpers import assert_close, rand


def shifted_window_mask(x):
    """The mask built on the CPU from sizes, then moved to x's device (transformers' Swin v2)."""
    h = torch.arange(8)
    region = (h >= 8 - 4).long() + (h >= 8 - 2).long()
    ids = (region[:, None] * 3 + region[None, :]).to(x.dtype).view(-1)
    mask = ids[None, :] - ids[:, None]
    mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
    return x + mask.to(x.device)


def aten_graph(fn, *args):
    """fn's functional ATen graph (AOTAutograd's inference graph)."""
    from torch._dynamo.backends.common import aot_autograd
    graphs = []

    def inference(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    torch._dynamo.reset()
    torch.compile(fn, backend=aot_autograd(fw_compiler=inference, inference_compiler=inference),
                  fullgraph=True)(*args)
    return graphs[0]


def test_a_mask_made_on_the_host_and_moved_is_one_constant(monkeypatch):
    """The fold on the ATen graph, with the CPU standing in for the GPU: the ops computing the mask
    become one attribute of the graph, in the recorded layout."""
    monkeypatch.setattr(host_constants, "DEVICES", ("cpu",))
    gm = aten_graph(shifted_window_mask, rand((64, 64), device="cpu"))
    assert fold_host_constants(gm) == 1
    ops = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert [str(n.target) for n in ops] == ["aten.add.Tensor"]
    attr = next(n for n in gm.graph.nodes if n.op == "get_attr")
    value = getattr(gm, attr.target)
    assert value.shape == (64, 64) and value.stride() == attr.meta["val"].stride()


def test_graphs_on_the_cpu_alone_are_left_as_they_are():
    gm = aten_graph(shifted_window_mask, rand((64, 64), device="cpu"))
    before = len(gm.graph.nodes)
    assert fold_host_constants(gm) == 0 and len(gm.graph.nodes) == before


def test_a_value_read_from_an_input_drawn_or_returned_is_not_folded(monkeypatch):
    """Only values the same at every call fold, and not one the caller gets (it may write to it)."""
    monkeypatch.setattr(host_constants, "DEVICES", ("cpu",))

    def fn(x, idx):
        return x + idx.float() * 2 + torch.rand(4), torch.arange(4) * 2
    gm = aten_graph(fn, rand((4,), device="cpu"), torch.arange(4))
    assert fold_host_constants(gm) == 0


def test_the_folded_constant_reaches_the_compiled_program(monkeypatch):
    """Through AOTAutograd and the compiler, on the CPU with the CPU standing in for the GPU: the
    program reads the constant (no kernel computes the mask) and matches eager."""
    import autofuse
    from autofuse.api import Recorder
    monkeypatch.setattr(host_constants, "DEVICES", ("cpu",))
    x = rand((64, 64), device="cpu")
    rec = Recorder()
    torch._dynamo.reset()
    out = autofuse.compile(shifted_window_mask, strict=True, recorder=rec, use_db=False)(x)
    assert_close(out, shifted_window_mask(x))
    kernels = [k for _, _, art in rec.graphs for k in art.kernels]
    assert len(kernels) == 1 and "arange" not in kernels[0].name, [k.name for k in kernels]


def test_a_compiled_model_with_a_host_mask_matches_eager_and_runs_no_host_kernel(device):
    if device != "cuda":
        pytest.skip("a host computation moved to the GPU needs a GPU")
    import autofuse
    from autofuse.api import Recorder
    x = rand((64, 64), device=device)
    rec = Recorder()
    torch._dynamo.reset()
    out = autofuse.compile(shifted_window_mask, strict=True, recorder=rec, use_db=False)(x)
    assert_close(out, shifted_window_mask(x))
    kernels = [k for _, _, art in rec.graphs for k in art.kernels]
    assert all("arange" not in k.name for k in kernels), [k.name for k in kernels]


def test_host_ops_reading_an_input_run_with_aten_in_a_gpu_graph(device):
    """A CPU value made from a CPU input cannot be computed once; in a graph of GPU work its ops run
    with ATen, not as kernels in Triton's CPU interpreter."""
    if device != "cuda":
        pytest.skip("a graph of GPU work needs a GPU")
    import warnings

    import autofuse

    def fn(x, idx):
        return x * (idx.float().cumsum(0) * 2).to(x.device)
    x, idx = rand((33,), device=device), torch.arange(33)
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = autofuse.compile(fn, strict=True, use_db=False)(x, idx)
    assert_close(out, fn(x, idx))
    assert not [w for w in caught if "interpreter" in str(w.message)]


def test_swin_v2_with_its_masks_folded_matches_eager(monkeypatch):
    """transformers' Swin v2 (tiny, two shifted-window blocks a stage): its masks and position
    tables fold, and the compiled model matches eager (the CPU standing in for the GPU)."""
    tf = pytest.importorskip("transformers")
    import autofuse
    folded = []
    monkeypatch.setattr(host_constants, "DEVICES", ("cpu",))
    real = host_constants.fold_host_constants
    monkeypatch.setattr("autofuse.capture.backend.fold_host_constants", lambda gm: folded.append(real(gm)))
    cfg = tf.Swinv2Config(image_size=32, patch_size=4, embed_dim=16, depths=[2, 2], num_heads=[2, 2], window_size=4)
    model = tf.Swinv2Model(cfg).eval()
    x = rand((2, 3, 32, 32), device="cpu")
    torch._dynamo.reset()
    with torch.no_grad():
        out = autofuse.compile(model, strict=True, use_db=False)(pixel_values=x).last_hidden_state
        assert_close(out, model(pixel_values=x).last_hidden_state)
    assert sum(folded) >= 1


def causal_block_mask_attention(q, k, v):
    """flex attention under a causal block mask built in the forward (sums, sorts, index_put)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, q.shape[2], k.shape[2],
                             device=q.device, BLOCK_SIZE=16)
    return flex_attention(q, k, v, block_mask=mask)


def test_a_block_mask_built_on_the_device_is_computed_once(monkeypatch):
    """A constant the device computes through kernels of their own (the block mask's sums and
    sorts) becomes attributes of the graph: no op computing the mask is left."""
    monkeypatch.setattr(host_constants, "DEVICES", ("cpu",))
    monkeypatch.setattr(host_constants, "HOST", "none")
    q, k, v = (rand((2, 3, 40, 16), device="cpu") for _ in range(3))
    gm = aten_graph(causal_block_mask_attention, q, k, v)
    assert fold_host_constants(gm) == 8
    ops = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert [str(n.target) for n in ops] == ["flex_attention", "<built-in function getitem>"]


def test_a_compiled_block_mask_program_reads_the_folded_mask_and_matches_eager(monkeypatch, device):
    """On the CPU the CPU stands in for the GPU (and no device for the host)."""
    import autofuse
    from autofuse.api import Recorder
    if device == "cpu":
        monkeypatch.setattr(host_constants, "DEVICES", ("cpu",))
        monkeypatch.setattr(host_constants, "HOST", "none")
    q, k, v = (rand((2, 3, 40, 16), device=device) for _ in range(3))
    rec = Recorder()
    torch._dynamo.reset()
    out = autofuse.compile(causal_block_mask_attention, strict=True, recorder=rec, use_db=False)(q, k, v)
    assert_close(out, causal_block_mask_attention(q, k, v))
    kernels = [k.name for _, _, art in rec.graphs for k in art.kernels]
    assert len(kernels) == 1, kernels      # the attention alone


def test_device_constants_of_pointwise_ops_or_too_large_stay_computed(monkeypatch):
    """A causal mask of comparisons costs nothing where it is read (index arithmetic) and stays; a
    reduction's constant larger than MAX_DEVICE_BYTES stays too (the CPU stands in for the GPU, and
    no device for the host)."""
    monkeypatch.setattr(host_constants, "DEVICES", ("cpu",))
    monkeypatch.setattr(host_constants, "HOST", "none")

    def pointwise(x):
        n = x.shape[-1]
        i = torch.arange(n, device=x.device)
        return x.masked_fill(i[:, None] < i[None, :], 0.0)

    def reduced(x):
        return x + torch.ones(x.shape[0], 8, x.shape[1], device=x.device).sum(1)
    assert fold_host_constants(aten_graph(pointwise, rand((64, 64), device="cpu"))) == 0
    assert fold_host_constants(aten_graph(reduced, rand((64, 64), device="cpu"))) == 1
    monkeypatch.setattr(host_constants, "MAX_DEVICE_BYTES", 64 * 64 * 4 - 1)
    assert fold_host_constants(aten_graph(reduced, rand((64, 64), device="cpu"))) == 0
