#!/bin/bash
# session 14, call 5 (nvidia-h200): rmsnorm and layernorm with one-step looped rows in the search
source .whl/prelude.sh || exit 1
mkdir -p $OUT/rows
timeout 235 python3 -m benchmarks.run --cases rmsnorm_bf16_32768x4096 layernorm_bf16_32768x4096 --reps 50 --rounds 5 --tune-trials 8 --tune-budget 30 --out $OUT/rows > $OUT/rows/log.txt 2>&1
echo "rc $?"
rm -f $OUT/rows/tuning.db*
grep -A4 "^| case | MB" $OUT/rows/log.txt
grep "tuned\|default" $OUT/rows/log.txt | grep -v "^ " | head
