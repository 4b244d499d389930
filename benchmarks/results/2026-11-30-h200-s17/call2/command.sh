#!/bin/bash
# session 17, call 2 (nvidia-h200): the full benchmark after streaming stores (pointwise cache_hints),
# one-step rows as a candidate family, paired confirmation of close finalists, rotating round order.
source .whl/prelude.sh || exit 1
mkdir -p $OUT/final
timeout 540 python3 -m benchmarks.run --reps 50 --rounds 7 --tune-trials 8 --tune-budget 30 --out $OUT/final > $OUT/final/log.txt 2>&1
echo "rc $?"
rm -f $OUT/final/tuning.db*
tail -60 $OUT/final/log.txt | grep -A14 "^| case | MB"
grep "Host time per call" $OUT/final/log.txt
python3 -m benchmarks.summary $OUT/final/results.json | tail -15
