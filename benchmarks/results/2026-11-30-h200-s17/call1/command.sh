#!/bin/bash
# session 17, call 1 (nvidia-h200): streaming (.cs) stores on pointwise kernels (cache_hints on a
# pointwise config) — the GPU tests of cache_hints, then benchmarks.store_probe (9 rotating rounds).
source .whl/prelude.sh || exit 1
mkdir -p $OUT/probe
timeout 150 python3 -m pytest -q tests/test_cache_hints.py --device cuda > $OUT/gpu_tests.txt 2>&1
echo "tests rc $?"; tail -3 $OUT/gpu_tests.txt
timeout 400 python3 -m benchmarks.store_probe --reps 50 --rounds 9 --out $OUT/probe > $OUT/probe/log.txt 2>&1
echo "probe rc $?"
grep -v -i "warn" $OUT/probe/log.txt | tail -60
