#!/bin/bash
# session 17, call 4 (nvidia-h200): cost-model data on the benchmark suite at full scale (online
# softmax kernels over 32000-wide rows were 143 rows of 25k, and the shipped model put cross-entropy's
# online kernel at ~600 µs against ~125 measured: call 3's model-only search), with the gather byte fix.
source .whl/prelude.sh || exit 1
timeout 420 python3 -m benchmarks.collect --out $OUT/c --programs 0 --suite --seed 18 --budget 330 --device cuda --top-k 8 --explore 0.5 > $OUT/collect.log 2>&1
echo "collect rc $?"
tail -15 $OUT/collect.log
rm -f $OUT/c/measurements.db*
ls -la $OUT/c
