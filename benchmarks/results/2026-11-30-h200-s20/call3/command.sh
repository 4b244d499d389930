#!/bin/bash
# session 20, call 3 (nvidia-h200): issue 7's search quality with the model retrained on the loss data
# (calls 1-2), the same 5 cases and budget as session 19's call 2; the model ranks up to 160 configs per kernel (was 48).
source .whl/prelude.sh || exit 1
mkdir -p $OUT/search_quality
timeout 560 python3 -m benchmarks.search_quality --out $OUT/search_quality --budget 480 --max-candidates 160 \
  --cases softmax_f32_16384x4096 rmsnorm_bf16_32768x4096 layernorm_bf16_32768x4096 bias_gelu_tanh_bf16_16384x8192 cross_entropy_bf16_8192x32000 \
  > $OUT/search_quality/sq.log 2>&1
echo "search_quality rc $?"
find $OUT/search_quality -name "*.db*" -delete
rm -rf $OUT/search_quality/dbs
cat $OUT/search_quality/results.md
