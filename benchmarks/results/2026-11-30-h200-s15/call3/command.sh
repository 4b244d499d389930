#!/bin/bash
# session 15, call 3 (nvidia-h200): (a) rmsnorm's configs against max-autotune, with one-step rows
# (max-autotune's form) added to rows_probe; (b) the benchmark on rmsnorm and swiglu with the model
# retrained on this session's collections guiding the search.
source .whl/prelude.sh || exit 1
git rev-parse HEAD 2>/dev/null
mkdir -p $OUT/probe $OUT/bench
timeout 190 python3 -m benchmarks.rows_probe --cases rmsnorm_bf16_32768x4096 --out $OUT/probe > $OUT/probe/log.txt 2>&1
echo "probe rc $?"
grep -B2 -A12 "variants timed" $OUT/probe/log.txt | head -40
timeout 330 python3 -m benchmarks.run --cases rmsnorm_bf16_32768x4096 swiglu_bf16_16384x11008 --reps 50 --rounds 5 --tune-trials 8 --tune-budget 30 --out $OUT/bench > $OUT/bench/log.txt 2>&1
echo "bench rc $?"
rm -f $OUT/bench/tuning.db* $OUT/probe/*.max_autotune.py
grep -A4 "^| case | MB" $OUT/bench/log.txt
grep "graph inference\|autofuse tuned" $OUT/bench/log.txt
