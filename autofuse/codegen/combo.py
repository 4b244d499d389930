"""One launch for several independent pointwise kernels (a "combo" kernel).

Note: a compiled optimizer step updates every parameter in a kernel of its own, and most of a
convolution network's parameters are small: ResNet-50's 161 tensors would cost 161 launches of
5-15 µs of host time each, while their GPU work takes a few µs. Inductor runs foreach updates as
one kernel over all the tensors; here consecutive independent pointwise kernels of at most
COMBO_MAX_NUMEL elements share one launch. Each part keeps its generated body as a @triton.jit
function taking its program id; the combo kernel gives each part a range of program ids. The
limit: combining GPT-2's AdamW updates (tensors of 1-4 M elements) cut its GPU time from 1.55 to
1.42 ms (each kernel's ramp-up and tail gone), a limit of 2^24 or none gave the same, and LLaMA's
(tensors of up to 65 M elements) stayed at 3.40 ms with any limit
(benchmarks/results/2026-12-03-h200-compiled-optimizer/). Above 2^24 elements a kernel runs tens
of µs, and a combo would only give every part the largest part's registers.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

COMBO_MAX_NUMEL = 1 << 24
COMBO_MAX_PARTS = 16
COMBO_MAX_ARGS = 96


@dataclass(frozen=True)
class ComboPart:
    fn_name: str      # the part's kernel function in `source`
    source: str       # the part's whole module source (prelude + kernel)
    nargs: int        # its tensor arguments
    numel: int
    xblock: int

    @property
    def programs(self) -> int:
        return (self.numel + self.xblock - 1) // self.xblock


def combinable(source: str, fn_name: str) -> bool:
    """Does the kernel find its block from program id 0 alone (no 2-D grid, no split)?"""
    body = split_kernel(source, fn_name)[1]
    return body is not None and body.count("tl.program_id(0)") == 1 and "tl.program_id(1)" not in body \
        and "tl.num_programs" not in body


def split_kernel(source: str, fn_name: str) -> tuple[str, str | None]:
    """(what the module defines before the kernel: the prelude and helpers, which parts share; the
    kernel's own text, None when the source does not define it)."""
    i = source.rfind(f"@triton.jit\ndef {fn_name}(")
    return (source[:i], source[i:]) if i >= 0 else (source, None)


def combo_source(parts: list[ComboPart], prelude: str) -> tuple[str, str]:
    """(function name, module source) of the kernel running `parts` one after another in program-id
    ranges; its arguments are the parts' tensors in order, then the unused (xnumel, XBLOCK) that
    every generated pointwise launch passes. At least two parts."""
    assert len(parts) >= 2
    defs: dict[str, str] = {}   # part body text -> its function name (identical parts share one)
    calls, params = [], []
    start = 0
    for k, p in enumerate(parts):
        text = split_kernel(p.source, p.fn_name)[1]
        assert text is not None
        fname = defs.get(text)
        if fname is None:
            fname = f"_part{len(defs)}"
            defs[text] = fname
        args = [f"a{k}_{i}" for i in range(p.nargs)]
        params += args
        end = start + p.programs
        cond = f"pid < {end}"
        call = f"{fname}(pid - {start}, {', '.join(args)}, {p.numel}, XBLOCK={p.xblock})"
        calls.append((cond, call))
        start = end
    parts_src = []
    for text, fname in defs.items():
        renamed = re.sub(r"^@triton\.jit\ndef \w+\(", f"@triton.jit\ndef {fname}(_pid, ", text, count=1)
        parts_src.append(renamed.replace("tl.program_id(0)", "_pid").rstrip() + "\n")
    lines = []
    for i, (cond, call) in enumerate(calls):
        head = "else" if i == len(calls) - 1 else f"{'if' if i == 0 else 'elif'} {cond}"
        lines += [f"    {head}:", f"        {call}"]
    digest = hashlib.sha256("".join(parts_src).encode() + repr(calls).encode()).hexdigest()[:12]
    name = f"triton_poi_combo_{len(parts)}_{digest}"
    kernel = (f"@triton.jit\ndef {name}({', '.join(params)}, xnumel, XBLOCK: tl.constexpr):\n"
              "    pid = tl.program_id(0)\n" + "\n".join(lines) + "\n")
    return name, prelude.rstrip() + "\n\n\n" + "\n\n".join(parts_src) + "\n\n" + kernel
