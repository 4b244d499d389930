#!/bin/bash
# session 14, call 3 (nvidia-h200): trip_probe on the cases call 2's crash left out, then the full
# benchmark with literal trip counts in every looped reduction
source .whl/prelude.sh || exit 1
mkdir -p $OUT/trip_probe $OUT/final
timeout 170 python3 -m benchmarks.trip_probe --out $OUT/trip_probe --cases seed_f32_16384x4096 rmsnorm_bf16_32768x4096 residual_layernorm_bf16_32768x4096 > $OUT/trip_probe/log.txt 2>&1
echo "probe rc $?"
grep -v Warning $OUT/trip_probe/log.txt | grep -E "^(##|\||runtime /)" | head -80
timeout 400 python3 -m benchmarks.run --reps 50 --rounds 5 --tune-trials 8 --tune-budget 30 --out $OUT/final > $OUT/final/log.txt 2>&1
echo "rc $?"
rm -f $OUT/final/tuning.db*
tail -60 $OUT/final/log.txt | grep -A14 "^| case | MB"
grep "Host time per call" $OUT/final/log.txt
