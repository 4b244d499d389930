#!/bin/bash
# session 14, call 1 (nvidia-h200, nothing else on the host): the full benchmark at the final code of
# session 13 plus interleaved timing rounds (default looped cache hints, cm4 guiding, refine)
source .whl/prelude.sh || exit 1
mkdir -p $OUT/final
timeout 570 python3 -m benchmarks.run --reps 50 --rounds 5 --tune-trials 8 --tune-budget 30 --out $OUT/final > $OUT/final/log.txt 2>&1
echo "rc $?"
rm -f $OUT/final/tuning.db*
tail -60 $OUT/final/log.txt | grep -A14 "^| case | MB"
grep "Host time per call" $OUT/final/log.txt
