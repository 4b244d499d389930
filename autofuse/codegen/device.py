"""Device facts the default launch configs depend on (the SM count), read once per device.

Why: a split reduction needs enough programs to fill every SM, and a GPU's SM count is a fact of
the device, not a constant. A device without CUDA properties (the CPU, where kernels run in
Triton's interpreter) gets `REFERENCE`, the GPU the project measures on, so a plan drafted on the
CPU groups kernels as the GPU's default plan does.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch


@dataclass(frozen=True)
class DeviceFacts:
    """`sm_count`: streaming multiprocessors, each running several programs at once."""

    name: str
    sm_count: int


REFERENCE = DeviceFacts("NVIDIA H200 (reference)", 132)


@lru_cache(maxsize=None)
def _cuda_facts(index: int) -> DeviceFacts:
    p = torch.cuda.get_device_properties(index)
    return DeviceFacts(p.name, int(p.multi_processor_count))


def device_facts(device: torch.device | str | None) -> DeviceFacts:
    """The facts of `device`: read from CUDA (cached per device index), else `REFERENCE`."""
    if device is None:
        return REFERENCE
    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return REFERENCE
    return _cuda_facts(device.index if device.index is not None else torch.cuda.current_device())
