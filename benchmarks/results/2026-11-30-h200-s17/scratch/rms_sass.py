# PYTHONPATH=. python benchmarks/results/2026-11-30-h200-s17/scratch/rms_sass.py > .../rms_sass.txt (CPU, sm_90 compile)
"""Our rmsnorm kernel at max-autotune's config against stream_probe's hand-written one: SASS diff."""
import collections, re, sys
from pathlib import Path
from benchmarks.sass_count import generated, record_sass, sass, INSTR_RE, counts

cfg = {"XBLOCK": 2, "RBLOCK": 4096, "num_warps": 16, "persistent": False, "cache_hints": True}
rec = generated("rmsnorm_bf16_32768x4096", cfg)[0]
ours = record_sass(rec)
probe = Path("benchmarks/stream_probe.py").read_text()
sig = {"x_ptr": "*bf16", "w_ptr": "*bf16", "o_ptr": "*bf16"}
import triton, subprocess, tempfile
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from costmodel.compiled import _not_interpreted
with _not_interpreted():
    import benchmarks.stream_probe as sp
    consts = {"ROWS": 32768, "N": 4096, "XBLOCK": 2, "RBLOCK": 4096, "ST_CS": False, "STRIDE": False}
    k = triton.compile(ASTSource(sp._rmsnorm, {**sig, **{c: "constexpr" for c in consts}}, consts, {(i,): [["tt.divisibility", 16]] for i in range(3)}),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": 16, "num_stages": 1})
nvdisasm = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
with tempfile.TemporaryDirectory() as d:
    (Path(d) / "k.cubin").write_bytes(k.asm["cubin"])
    hand = subprocess.run([str(nvdisasm), "-c", str(Path(d) / "k.cubin")], capture_output=True, text=True, check=True).stdout
def hist(t):
    return collections.Counter(m.group(2) for m in map(INSTR_RE.match, t.splitlines()) if m)
ho, hh = hist(ours), hist(hand)
print("ours", sum(ho.values()), "hand", sum(hh.values()))
for k in sorted(set(ho) | set(hh)):
    if ho[k] != hh[k]:
        print(f"{k:12s} ours {ho[k]:4d} hand {hh[k]:4d}")
here = Path(__file__).parent
(here / "ours.sass").write_text(ours); (here / "hand.sass").write_text(hand)

