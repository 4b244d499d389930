"""SASS instruction counts of kernels compiled for sm_90 on this machine (no GPU): the numbers behind
this project's instruction-count claims, from one command.

    python -m benchmarks.sass_count

Counts the whole kernel and each loop body (a backward branch) of:
  - benchmarks/online_probe.py's logsumexp kernels: per-element lanes against chunks with FFMA +
    ex2.ftz (XBLOCK 1, RBLOCK 2048, 8 warps: 8 elements per thread per loop step);
  - cross-entropy's generated online kernel at the same config, in lane form (chunk width forced to
    1) and in chunk form (what codegen emits);
  - rmsnorm's generated persistent kernel (XBLOCK 1, RBLOCK 4096, 8 warps) as emitted (sizes divide:
    constant masks) and with its masks restored as compares; and where its global loads fall around
    the reduction's CTA barrier, as emitted and with early_loads (codegen/early_loads.py);
  - the seed example's looped kernel (XBLOCK 1, RBLOCK 1024, 8 warps, cache hints) with its loop's
    trip count a literal (as emitted) and read from `rnumel` (as emitted before).
Kernels are compiled as the JIT would specialize them on the GPU: every pointer 16-byte aligned and
every size a multiple of 16 (`tt.divisibility`), which is what lets Triton vectorize the loads.
"""
from __future__ import annotations

import collections
import os
import re
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

LOOP_RE = re.compile(r"^\.L_x_(\d+):")
INSTR_RE = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)")


def sass(module_source: str, kernel_fn: str, signature: dict[str, str], constexprs: dict[str, int],
         num_warps: int, num_stages: int = 1) -> str:
    """nvdisasm of the kernel compiled for sm_90 (costmodel.compiled's target and module loading)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from costmodel.compiled import ARCH, _jit_function, _not_interpreted
    fn = _jit_function(module_source, kernel_fn)
    sig = {**signature, **{k: "constexpr" for k in constexprs}}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(signature))}
    with _not_interpreted():
        k = triton.compile(ASTSource(fn, sig, constexprs, attrs), target=GPUTarget("cuda", ARCH, 32),
                           options={"num_warps": num_warps, "num_stages": num_stages})
    nvdisasm = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
    with tempfile.TemporaryDirectory(prefix="autofuse-sass-") as d:
        cubin = Path(d) / "k.cubin"
        cubin.write_bytes(k.asm["cubin"])
        return subprocess.run([str(nvdisasm), "-c", str(cubin)], capture_output=True, text=True, check=True).stdout


def counts(text: str) -> tuple[int, list[tuple[int, dict[str, int]]]]:
    """(instructions in the kernel, [(instructions, opcode counts) of each loop body])."""
    lines = text.splitlines()
    instrs = [(int(m.group(1), 16), m.group(2)) for m in map(INSTR_RE.match, lines) if m]
    labels: dict[str, int] = {}
    for i, line in enumerate(lines):
        m = LOOP_RE.match(line)
        if m:
            nxt = next((INSTR_RE.match(x) for x in lines[i + 1:] if INSTR_RE.match(x)), None)
            if nxt:
                labels[m.group(1)] = int(nxt.group(1), 16)
    loops = []
    for line in lines:
        m, b = INSTR_RE.match(line), re.search(r"BRA `\(\.L_x_(\d+)\)", line)
        if m and b and labels.get(b.group(1), 1 << 60) < int(m.group(1), 16):
            lo, hi = labels[b.group(1)], int(m.group(1), 16)
            body = [op for addr, op in instrs if lo <= addr <= hi]
            loops.append((len(body), dict(collections.Counter(body).most_common())))
    return len(instrs), loops


def generated(case_name: str, config: dict[str, Any], patch: Callable[[], Any] | None = None) -> list[dict[str, Any]]:
    """Kernel records (source, signature, config) of a benchmark case's default plan with `config` on
    every reduction kernel, generated on the CPU at a small scale (the code per element is the same)."""
    import torch  # noqa: F401
    from autofuse.capture.trace import trace_aten
    from autofuse.compiler import compile_graph
    from autofuse.options import CompileOptions
    from autofuse.search.kernels import kernel_record
    from benchmarks.cases import CASES
    case = next(c for c in CASES if c.name == case_name)
    fn, args = case.build("cpu", 1 / 256)
    opts = CompileOptions(strict=True, use_db=False)
    gm = trace_aten(fn, args)
    plan = compile_graph(gm, args, opts).plan
    plan = replace(plan, kernels=tuple(replace(k, config=replace(k.config, **config)) if k.config is not None and
                                       k.config.RBLOCK > 1 else k for k in plan.kernels))
    with (patch() if patch else _nothing()):
        art = compile_graph(gm, args, opts.with_(plan=plan))
    prog, records, k = art.program, [], 0
    env = prog.new_env(args)
    for step in prog.steps:
        if hasattr(step, "_launch"):
            records.append(kernel_record(art.kernels[k], step, env, "", "", {}))
            k += 1
        step.run(env)
    return records


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


class _lanes:
    """Codegen with the online chunk width forced to 1 (the per-element lane form)."""

    def __enter__(self) -> None:
        from autofuse.codegen import triton_kernel
        self._saved = triton_kernel.chunk_width
        triton_kernel.chunk_width = lambda *a: 1

    def __exit__(self, *exc: Any) -> None:
        from autofuse.codegen import triton_kernel
        triton_kernel.chunk_width = self._saved


def record_sass(rec: dict[str, Any], source: str | None = None) -> str:
    from costmodel.compiled import gpu_module_source
    c = rec["config"]
    consts = {"XBLOCK": c["XBLOCK"], "RBLOCK": c["RBLOCK"]} if "RBLOCK" in rec["source"] else {"XBLOCK": c["XBLOCK"]}
    return sass(gpu_module_source(source or rec["source"], "KERNEL"), "KERNEL", rec["signature"], consts,
                c.get("num_warps", 4), c.get("num_stages", 1))


def unmasked(source: str) -> str:
    """The source with constant masks restored as compares (what codegen emitted before they were dropped)."""
    return (source.replace("xmask = tl.full([XBLOCK, 1], True, tl.int1)", "xmask = xindex < xnumel")
            .replace("xmask = tl.full([XBLOCK], True, tl.int1)", "xmask = xindex < xnumel")
            .replace("rmask = tl.full([1, RBLOCK], True, tl.int1)", "rmask = rindex < rnumel"))


def loads_around_barrier(text: str) -> tuple[int, int]:
    """(global loads before the kernel's first CTA barrier, global loads after it)."""
    ops = [m.group(2) for m in map(INSTR_RE.match, text.splitlines()) if m]
    bar = next((i for i, op in enumerate(ops) if op.startswith("BAR")), len(ops))
    return (sum(op.startswith("LDG") for op in ops[:bar]), sum(op.startswith("LDG") for op in ops[bar:]))


def line(label: str, text: str) -> str:
    total, loops = counts(text)
    loop = "; ".join(f"loop {n} ({', '.join(f'{k} {v}' for k, v in list(ops.items())[:8])})" for n, ops in loops)
    return f"{label:58s} {total:4d} instructions" + (f"; {loop}" if loop else "")


def main() -> int:
    from benchmarks import online_probe
    probe = Path(online_probe.__file__).read_text()
    sig = {"x_ptr": "*bf16", "m_ptr": "*fp32", "s_ptr": "*fp32", "rows": "i32", "cols": "i32"}
    for name, fn, v, mode in [("lanes", "lse_lane", 1, 0), ("chunks, tl.exp", "lse_chunk", 8, 0),
                              ("chunks, FFMA + ex2.ftz", "lse_chunk", 8, 1)]:
        consts = {"XBLOCK": 1, "RBLOCK": 2048, "V": v, "MODE": mode}
        print(line(f"online_probe {name} (r2048 w8)", sass(probe, fn, sig, consts, 8)), flush=True)
    ce = {"XBLOCK": 1, "RBLOCK": 2048, "num_warps": 8}
    print(line("cross-entropy online kernel, lanes (r2048 w8)",
               record_sass(generated("cross_entropy_bf16_8192x32000", ce, _lanes)[0])), flush=True)
    print(line("cross-entropy online kernel, chunks (r2048 w8)",
               record_sass(generated("cross_entropy_bf16_8192x32000", ce)[0])), flush=True)
    rms = generated("rmsnorm_bf16_32768x4096", {"XBLOCK": 1, "RBLOCK": 4096, "num_warps": 8})[0]
    print(line("rmsnorm kernel, masks as compares (r4096 w8)", record_sass(rms, unmasked(rms["source"]))), flush=True)
    print(line("rmsnorm kernel, constant masks (r4096 w8)", record_sass(rms)), flush=True)
    early = generated("rmsnorm_bf16_32768x4096", {"XBLOCK": 1, "RBLOCK": 4096, "num_warps": 8, "early_loads": True})[0]
    for label, rec in (("as emitted", rms), ("early_loads", early)):
        before, after = loads_around_barrier(record_sass(rec))
        print(f"rmsnorm kernel, {label}: {before} global loads before the reduction's barrier, {after} after",
              flush=True)
    seed = generated("seed_f32_16384x4096", {"XBLOCK": 1, "RBLOCK": 1024, "num_warps": 8, "persistent": False,
                                             "cache_hints": True})[0]
    for label, src in (("literal trip count", seed["source"]), ("trip count from rnumel", runtime_bound(seed["source"]))):
        text = record_sass(seed, src)
        print(line(f"seed looped kernel, {label} (r1024 w8)", text) + f"; {ldg_count(text)} LDG", flush=True)
    return 0


def runtime_bound(source: str) -> str:
    """The source with its looped reduction's bound read from the `rnumel` argument (codegen before
    literal trip counts; benchmarks/trip_probe.py times both)."""
    return re.sub(r"range\(0, \d+, RBLOCK\)", "range(0, rnumel, RBLOCK)", source)


def ldg_count(text: str) -> int:
    """Global loads in a kernel's SASS."""
    return sum(m.group(2).startswith("LDG") for m in map(INSTR_RE.match, text.splitlines()) if m)


if __name__ == "__main__":
    raise SystemExit(main())
