"""Resident blocks per SM from registers, warps and shared memory (the CUDA occupancy calculator).

Defaults are sm_90 (H100/H200): 64K registers, 2048 threads (64 warps), 32 blocks and 228 KB of
shared memory per SM, 1 KB reserved per block, registers allocated per warp in units of 256.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SMLimits:
    registers: int = 65536
    warps: int = 64
    blocks: int = 32
    shared_bytes: int = 228 * 1024
    shared_reserved_per_block: int = 1024
    register_unit: int = 256
    warp_size: int = 32


SM90 = SMLimits()


def blocks_per_sm(num_warps: int, registers: float, shared_bytes: float, limits: SMLimits = SM90) -> float:
    """Resident blocks of this kernel per SM; NaN if registers or shared memory are unknown."""
    if num_warps <= 0 or math.isnan(registers) or math.isnan(shared_bytes):
        return float("nan")
    by_warps = limits.warps // num_warps
    regs_per_warp = math.ceil(max(registers, 1) * limits.warp_size / limits.register_unit) * limits.register_unit
    by_regs = (limits.registers // regs_per_warp) // num_warps
    by_shared = limits.shared_bytes // (int(shared_bytes) + limits.shared_reserved_per_block)
    return float(max(0, min(limits.blocks, by_warps, by_regs, by_shared)))


def nominal_blocks_per_sm(num_warps: int, limits: SMLimits = SM90) -> float:
    """Resident blocks if only the thread limit counted (known without compiling)."""
    return float(max(1, min(limits.blocks, limits.warps // max(num_warps, 1))))
