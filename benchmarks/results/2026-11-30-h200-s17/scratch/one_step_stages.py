"""Is a one-step looped row (RBLOCK = the row) the same machine code at num_stages 1, 2 and 3?"""
from benchmarks.sass_count import generated, record_sass
import re
for case in ("rmsnorm_bf16_32768x4096", "layernorm_bf16_32768x4096", "seed_f32_16384x4096"):
    for xb, w in ((1, 8), (2, 16)):
        texts = []
        for st in (1, 2, 3):
            rec = generated(case, {"XBLOCK": xb, "RBLOCK": 4096, "num_warps": w, "num_stages": st,
                                   "persistent": False, "cache_hints": True})[0]
            t = record_sass(rec)
            texts.append([l.split("*/", 1)[-1].strip() for l in t.splitlines() if re.match(r"^\s+/\*[0-9a-f]{4,}\*/", l)])
        print(case, xb, w, "instructions", [len(t) for t in texts], "same as stages 1:", [t == texts[0] for t in texts])
