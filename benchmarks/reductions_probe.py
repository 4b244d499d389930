"""Reductions where autofuse's default plan trailed torch.compile's: whole-tensor norms and scalar
losses (split reductions), layer norm over [C, H, W], GroupNorm / InstanceNorm, argmax, sums over a
middle dim, a written-out tanh GELU — eager, torch.compile default and autofuse's default plan side
by side on the GPU, each checked against eager before it is timed.

    python3 -m benchmarks.reductions_probe [--reps 50] [--rounds 5] [--out FILE.json] [--cases NAME ...]

Prints, per case: median ms of each variant over interleaved rounds, autofuse's speed over
torch.compile (>1: faster), and the default plan's reduction configs (split, RBLOCK, warps).
"""
from __future__ import annotations

import argparse
import json
import statistics
from typing import Any, Callable

import torch
import torch.nn.functional as F

from .run import close, time_interleaved


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * torch.pow(x, 3))))


def _cases(device: str) -> dict[str, tuple[Callable[..., Any], Callable[[], tuple]]]:
    def r(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*shape, device=device, dtype=dtype)

    def pos(*shape: int) -> torch.Tensor:
        return torch.rand(*shape, device=device) + 0.1

    return {
        "frobenius_norm_112x64x512x512": (lambda x: x / torch.norm(x, p="fro"), lambda: (r(112, 64, 512, 512),)),
        "l2_norm_2^30": (lambda x: torch.linalg.vector_norm(x), lambda: (r(1 << 30),)),
        "mse_32768x32768": (lambda a, b: torch.mean((a - b) ** 2), lambda: (r(32768, 32768), r(32768, 32768))),
        "huber_32768x32768": (lambda a, b: F.smooth_l1_loss(a, b), lambda: (r(32768, 32768), r(32768, 32768))),
        "kl_div_16384x32768": (lambda a, b: F.kl_div(torch.log(a), b, reduction="batchmean"),
                               lambda: (pos(16384, 32768), pos(16384, 32768))),
        "hinge_32768x32768": (lambda a, b: torch.mean(torch.clamp(1 - a * b, min=0)),
                              lambda: (r(32768, 32768), r(32768, 1))),
        "layernorm_chw_128x64x32x32": (lambda x: F.layer_norm(x, x.shape[1:]), lambda: (r(128, 64, 32, 32),)),
        "groupnorm_16x64x128x128_g8": (lambda x: F.group_norm(x, 8), lambda: (r(16, 64, 128, 128),)),
        "instancenorm_64x64x128x128": (lambda x: F.instance_norm(x), lambda: (r(64, 64, 128, 128),)),
        "argmax_4096x8192": (lambda x: x.argmax(1), lambda: (r(4096, 8192),)),
        "sum_middle_128x4096x256": (lambda x: x.sum(1), lambda: (r(128, 4096, 256),)),
        "mean_middle_128x4096x256": (lambda x: x.mean(1), lambda: (r(128, 4096, 256),)),
        "gelu_tanh_written_16384x8192": (_gelu_tanh, lambda: (r(16384, 8192),)),
    }


def main(argv: list[str] | None = None) -> int:
    import autofuse
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default=None)
    p.add_argument("--cases", nargs="*", default=None)
    a = p.parse_args(argv)
    cases = _cases("cuda")
    results = {}
    for name in a.cases or list(cases):
        fn, make = cases[name]
        args = make()
        torch._dynamo.reset()
        fns = {"eager": fn, "inductor": torch.compile(fn), "autofuse": autofuse.compile(fn, strategy="inductor")}
        expected = fn(*args)
        wrong = [n for n, f in fns.items() if not close(f(*args), expected)]
        if wrong:
            print(f"{name}: differs from eager: {wrong}", flush=True)
            fns = {n: f for n, f in fns.items() if n not in wrong}
        samples = time_interleaved(fns, [args], a.reps, a.rounds)
        ms = {n: statistics.median(s) for n, s in samples.items()}
        report = autofuse.explain(fn, args)
        configs = [str(k.config) for k in report.kernels if k.kind == "reduction"]
        speed = ms["inductor"] / ms["autofuse"] if "autofuse" in ms and "inductor" in ms else None
        results[name] = {"ms": ms, "autofuse_over_inductor": speed, "reduction_configs": configs,
                         "kernels": len(report.kernels)}
        cells = "  ".join(f"{n} {t:.3f}" for n, t in ms.items())
        print(f"{name}: {cells} ms  autofuse {speed and round(speed, 2)}x inductor  {configs}", flush=True)
        del args, expected
        torch.cuda.empty_cache()
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cases": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
