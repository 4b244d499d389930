#!/bin/bash
# session 18, call 1 (nvidia-h200): the seed 16384 and rmsnorm kernels under a wide config grid and at
# max-autotune's picks, next to both Inductor modes (benchmarks.config_probe, 7 rotating rounds).
source .whl/prelude.sh || exit 1
mkdir -p $OUT/probe
timeout 500 python3 -m benchmarks.config_probe --out $OUT/probe --reps 50 --rounds 7 > $OUT/probe/log.txt 2>&1
echo "probe rc $?"
grep -v "^| LaunchConfig\|^\s*$" $OUT/probe/log.txt | head -5
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/probe/config_probe.json"))
for case, v in d["cases"].items():
    rows = sorted((r for r in v["rows"] if "us" in r), key=lambda r: r["us"])
    print("\n##", case, "picks:", v["max_autotune_picks"])
    for r in rows[:14]:
        print(f"{r['us']:8.2f} {min(r['round_us']):8.2f}-{max(r['round_us']):8.2f}  {r['variant']}  {r.get('origin','')}")
    for r in rows:
        if r["variant"].startswith(("inductor", "autofuse")) or r.get("origin", "").startswith("max"):
            print(f"{r['us']:8.2f}  {r['variant']}  {r.get('origin','')}")
    errs = [r for r in v["rows"] if "error" in r]
    print(len(rows), "timed,", len(errs), "failed", [e["error"][:80] for e in errs[:3]])
PY
