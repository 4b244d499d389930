"""Which graphs hand their convolutions channels-last operands by default: Inductor's layout rule.

Note: cuDNN computes 2-D and 3-D convolutions on recent GPUs in NHWC; NCHW operands cost it
transposes in and out, channels-last operands cost one copy of each graph input and an epilogue
that writes eager's layout back (a 2-D tiled kernel). Whether that pays depends on the
convolutions, and the default follows Inductor's decision (`decide_layout_opt`), the floor a
torch.compile user knows; the search tries both layouts.
- Each convolution is classed by its weight [out, in/groups, *kernel]: "grouped" (groups > 1 with
  more than one input channel per group; depthwise convolutions are not), "small" (≤ 64 channels
  in and out), "in_out" (out ≤ in/2 with a kernel wider than 1), else "default".
- A graph with fewer than one convolution per 300 nodes keeps the given layout (a transformer with
  a patch-embedding convolution).
- Inference: channels-last when the convolutions' multiply-adds, each weighted by its class's
  average channels-last time ratio (Inductor's torchbench measurements: grouped 1.358, small
  0.783, in_out 0.725, default 0.823), total no more than unweighted.
- Training: given layout if any convolution is grouped or in_out, or all are small.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch

CONV_CLASSES = ("grouped", "small", "in_out", "default")


@dataclass(frozen=True)
class ConvSite:
    """One convolution of a graph: its weight's shape, groups, and multiply-adds."""

    weight: tuple[int, ...]   # [out, in / groups, *kernel] ([in, out / groups, *kernel] if transposed)
    groups: int
    macs: float

    @property
    def kind(self) -> str:
        out_ch, in_ch, *kernel = self.weight
        if self.groups > 1 and in_ch > 1:
            return "grouped"
        if out_ch <= 64 and in_ch <= 64:
            return "small"
        if out_ch * 2 <= in_ch and kernel and kernel[0] > 1:
            return "in_out"
        return "default"


def conv_sites(gm: torch.fx.GraphModule) -> list[ConvSite]:
    """The 2-D and 3-D convolutions of an ATen graph (shapes from the nodes' fake values)."""
    sites = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target is not torch.ops.aten.convolution.default:
            continue
        w = _val(n.args[1])
        x = _val(n.args[0])
        out = n.meta.get("val")
        if w is None or w.dim() not in (4, 5):
            continue
        transposed = bool(n.args[6]) if len(n.args) > 6 else False
        per_output = math.prod(int(s) for s in w.shape[1:])
        driver = x if transposed else out   # each element of it takes one window of the weight
        macs = float(driver.numel() * per_output) if isinstance(driver, torch.Tensor) else 1.0
        sites.append(ConvSite(tuple(int(s) for s in w.shape), int(n.args[8]) if len(n.args) > 8 else 1, macs))
    return sites


def is_training_graph(gm: torch.fx.GraphModule) -> bool:
    """A forward or backward graph of a training step (AOTAutograd names its inputs primals_* and
    tangents_*; an inference graph's are arg*)."""
    return any(n.op == "placeholder" and n.name.startswith(("primals_", "tangents_")) for n in gm.graph.nodes)


def channels_last_pays(sites: Sequence[ConvSite], graph_nodes: int, training: bool,
                       time_ratio: Mapping[str, float], max_nodes_per_conv: int) -> bool:
    """Inductor's layout decision for a graph with these convolutions (see the note above)."""
    if not sites or graph_nodes >= max_nodes_per_conv * len(sites):
        return False
    kinds = [s.kind for s in sites]
    if training:
        return not ("grouped" in kinds or "in_out" in kinds or all(k == "small" for k in kinds))
    total = sum(s.macs for s in sites)
    weighted = sum(s.macs * time_ratio.get(s.kind, 1.0) for s in sites)
    return weighted <= total


def _val(a: Any) -> torch.Tensor | None:
    v = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
    return v if isinstance(v, torch.Tensor) else None
