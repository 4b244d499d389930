#!/bin/bash
# session 13, call 2 (nvidia-h200-x2): GPU 0 the rows probe; GPU 1 a cost-model collection (seed 2)
source .whl/prelude.sh || exit 1
mkdir -p $OUT/collect-s2 $OUT/rows_probe
( CUDA_VISIBLE_DEVICES=1 python3 -m benchmarks.collect --out $OUT/collect-s2 --programs 400 --seed 2 --budget 390 --device cuda --top-k 8 --explore 0.5 > $OUT/collect-s2/log.txt 2>&1; rm -f $OUT/collect-s2/measurements.db* ) &
CUDA_VISIBLE_DEVICES=0 timeout 430 python3 -m benchmarks.rows_probe --out $OUT/rows_probe > $OUT/rows_probe/log.txt 2>&1
tail -150 $OUT/rows_probe/log.txt | grep -v "^|" | tail -30
wait
tail -3 $OUT/collect-s2/log.txt
