"""Scratch (session 16): the CPU machine's sm_90 compile (costmodel/compiled.py, this machine's
Triton) against the GPU loader's own numbers recorded in call 2's collection (stats.gpu_compile,
Triton 3.6 on the H200), on a seeded sample of 150 measurements. Run from the repository root."""
import random
import sys
import numpy as np
from benchmarks.costmodel_noise import load
from costmodel.compiled import compiled_stats

rows = [r for r in load("costmodel/data/h200-2026-11-30-s16.jsonl.gz") if r["stats"].get("gpu_compile")]
random.Random(0).shuffle(rows)
pairs = []
for r in rows[:150]:
    st = compiled_stats(r["features"])
    g = r["stats"]["gpu_compile"]
    pairs.append((st.registers, g["registers"], st.spill_store_bytes + st.stack_bytes, g["local_bytes"], st.shared_bytes, g["shared_bytes"]))
p = np.array(pairs, dtype=float)
ok = np.isfinite(p[:, 0])
print(f"compiled here: {ok.sum()} of {len(p)}")
q = p[ok]
d = q[:, 0] - q[:, 1]
print(f"registers: equal {np.mean(d == 0):.3f}, within 8 {np.mean(np.abs(d) <= 8):.3f}, mean |diff| {np.abs(d).mean():.2f}, "
      f"corr {np.corrcoef(q[:, 0], q[:, 1])[0, 1]:.3f}")
print(f"local memory > 0: here {int((q[:, 2] > 0).sum())}, GPU {int((q[:, 3] > 0).sum())}, both {int(((q[:, 2] > 0) & (q[:, 3] > 0)).sum())}")
print(f"shared bytes equal: {np.mean(q[:, 4] == q[:, 5]):.3f}")
