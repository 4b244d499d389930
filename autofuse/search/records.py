"""What a kernel measurement is stored with: the kernel's record (source, config, sizes, argument
types, device) and the keys derived from it — `group_key` names a kernel whatever its config,
`kernel_key` one (source, config) variant."""
from __future__ import annotations

import hashlib
import json
from typing import Any, Sequence

import torch

RECORD_SCHEMA = 1


_TRITON_DTYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64",
                  torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
                  torch.uint8: "u8", torch.bool: "i1"}


def device_traits(device: torch.device, copy_bw: float | None) -> dict[str, Any]:
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        return {"name": p.name, "sm_count": p.multi_processor_count, "cc": [p.major, p.minor], "copy_bw": copy_bw}
    return {"name": "cpu", "sm_count": None, "cc": None, "copy_bw": None}


def _sha(*parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(json.dumps(p, sort_keys=True, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def arg_types(launch: Any, env: list) -> list[str]:
    """Triton types of the launch's non-constexpr arguments, in order (pointers, then sizes)."""
    types = ["*" + _TRITON_DTYPES.get(t.dtype, str(t.dtype)) if isinstance(t, torch.Tensor) else "i64"
             for t in (env[s] for s in launch.arg_slots)]
    if getattr(launch, "split", 1) > 1:  # a split reduction also takes its workspaces and counters
        types += ["*" + _TRITON_DTYPES.get(dt, str(dt)) for dt in getattr(launch, "workspace_dtypes", ())] + ["*i32"]
    if getattr(launch, "yblock", 0):  # a 2-D tiled kernel takes ynumel and xnumel (codegen/tiling.py)
        types.append("i32" if launch.ynumel <= 2**31 - 1 else "i64")
    types.append("i32" if launch.numel <= 2**31 - 1 else "i64")
    if launch.is_reduction:
        types.append("i32" if launch.rnumel <= 2**31 - 1 else "i64")
    return types


def _param_names(source: str, fn_name: str) -> list[str]:
    head = source.split(f"def {fn_name}(", 1)[1].split(")", 1)[0]
    return [p.split(":")[0].strip() for p in head.split(",") if "constexpr" not in p]


def kernel_record(info: Any, launch: Any, env: list, graph: str, group: str, device: dict[str, Any],
                  nodes: Sequence[str] = ()) -> dict[str, Any]:
    """The kernel's description: what a measurement is stored with and what the cost model reads."""
    src = info.anonymous_source()
    sig = dict(zip(_param_names(src, "KERNEL"), arg_types(launch, env)))
    cfg = info.config.to_json()
    return {"schema": RECORD_SCHEMA, "graph": graph, "group": group, "kind": info.kind, "numel": info.numel,
            "rnumel": info.rnumel, "config": cfg, "bytes_read": info.bytes_read, "bytes_written": info.bytes_written,
            "signature": sig, "kernel_fn": "KERNEL", "source": src, "nodes": list(nodes), "device": device}


def kernel_key(record: dict[str, Any]) -> str:
    return _sha(record["source"], record["config"], record["numel"], record["rnumel"], record["signature"])


def group_key(default_record: dict[str, Any]) -> str:
    """Config-independent identity of a kernel: its default-config code, sizes and dtypes."""
    return _sha(default_record["source"], default_record["numel"], default_record["rnumel"], default_record["signature"])

