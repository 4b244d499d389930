#!/bin/bash
# session 20, call 1 (nvidia-h200): measurements of classification-loss programs (benchmarks/losses.py),
# whose gathers and 1-program loss reductions the corpus lacks; a wide kernel search (top-k 16, half random).
source .whl/prelude.sh || exit 1
mkdir -p $OUT/losses
timeout 540 python3 -m benchmarks.collect --out $OUT/losses --programs 0 --losses 48 --seed 0 \
  --trials 4 --top-k 16 --explore 0.5 --budget 470 > $OUT/losses/collect.log 2>&1
echo "collect rc $?"
rm -f $OUT/losses/measurements.db*
tail -60 $OUT/losses/collect.log
