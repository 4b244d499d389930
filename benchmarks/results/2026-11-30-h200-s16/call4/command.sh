#!/bin/bash
# session 16, call 4 (nvidia-h200): the full benchmark again, each timing round queued behind a GPU
# sleep (benchmarks/run.py time_samples: queue_ahead), so no variant is host-bound in its samples.
source .whl/prelude.sh || exit 1
mkdir -p $OUT/final
timeout 440 python3 -m benchmarks.run --reps 50 --rounds 5 --tune-trials 8 --tune-budget 30 --out $OUT/final > $OUT/final/log.txt 2>&1
echo "rc $?"
rm -f $OUT/final/tuning.db*
tail -60 $OUT/final/log.txt | grep -A14 "^| case | MB"
grep "Host time per call" $OUT/final/log.txt
