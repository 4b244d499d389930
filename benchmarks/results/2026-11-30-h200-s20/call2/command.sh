#!/bin/bash
# session 20, call 2 (nvidia-h200): more classification-loss programs (benchmarks/losses.py, seed 3: its
# first programs reduce 370-262144 rows by mean or sum), 2 trials each so that more programs fit.
source .whl/prelude.sh || exit 1
mkdir -p $OUT/losses
timeout 420 python3 -m benchmarks.collect --out $OUT/losses --programs 0 --losses 48 --seed 3 \
  --trials 2 --top-k 16 --explore 0.5 --budget 330 > $OUT/losses/collect.log 2>&1
echo "collect rc $?"
rm -f $OUT/losses/measurements.db*
tail -60 $OUT/losses/collect.log
