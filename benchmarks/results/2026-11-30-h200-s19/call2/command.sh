#!/bin/bash
# session 19, call 2 (nvidia-h200): issue 7's search quality again with cm8-gbr+rank-064ad11eec, now
# with GroupContextPredictor (a config predicted alone gets its time among its kernel's candidates)
# and the model-only search exempt from the budget; budget 480 s (call 1: 380 s).
source .whl/prelude.sh || exit 1
mkdir -p $OUT/search_quality
timeout 560 python3 -m benchmarks.search_quality --out $OUT/search_quality --budget 480 \
  --cases softmax_f32_16384x4096 rmsnorm_bf16_32768x4096 layernorm_bf16_32768x4096 bias_gelu_tanh_bf16_16384x8192 cross_entropy_bf16_8192x32000 \
  > $OUT/search_quality/sq.log 2>&1
echo "search_quality rc $?"
find $OUT/search_quality -name "*.db*" -delete
rm -rf $OUT/search_quality/dbs
cat $OUT/search_quality/results.md
