#!/bin/bash
# session 18, call 4 (nvidia-h200): the three cases where tuned and max-autotune are within 0.3%
# (rmsnorm and seed 16384 at max-autotune's own configs, SwiGLU) benchmarked again, tuned afresh,
# 15 rotating rounds: are the ties ties?
source .whl/prelude.sh || exit 1
mkdir -p $OUT/bench
timeout 380 python3 -m benchmarks.run --cases rmsnorm_bf16_32768x4096 seed_f32_16384x4096 swiglu_bf16_16384x11008 --reps 50 --rounds 15 --tune-trials 8 --tune-budget 30 --out $OUT/bench > $OUT/bench/log.txt 2>&1
echo "bench rc $?"
grep -A6 "^| case | MB" $OUT/bench/log.txt | head -7
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/bench/results.json"))
for c in d["cases"]:
    v = c["variants"]
    t = v["autofuse_tuned"]["round_ms"]
    line = [f"{c['case']}: tuned {v['autofuse_tuned']['ms']*1e3:.3f}"]
    for o in ("inductor", "inductor_max_autotune"):
        r = v[o]["round_ms"]
        line.append(f"{o} {v[o]['ms']*1e3:.3f} (tuned faster in {sum(a < b for a, b in zip(t, r))}/{len(t)} rounds, "
                    f"slower in {sum(a > b for a, b in zip(t, r))})")
    print("; ".join(line))
PY
gzip -9 $OUT/bench/tuning.db
