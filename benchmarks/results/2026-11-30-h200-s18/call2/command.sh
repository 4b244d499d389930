#!/bin/bash
# session 18, call 2 (nvidia-h200): the full benchmark with the search change (num_stages not searched,
# refine 24, close runner-ups timed end to end), 9 rotating rounds; the tuning DB kept.
source .whl/prelude.sh || exit 1
mkdir -p $OUT/bench
timeout 560 python3 -m benchmarks.run --reps 50 --rounds 9 --tune-trials 8 --tune-budget 30 --out $OUT/bench > $OUT/bench/log.txt 2>&1
echo "bench rc $?"
grep -A14 "^| case | MB" $OUT/bench/log.txt | head -16
python3 -m benchmarks.summary $OUT/bench/results.json 2>&1 | tail -25
ls -la $OUT/bench
