#!/bin/bash
# session 19, call 1 (nvidia-h200): issue 7's search-quality evidence with the schema-8 model
# cm8-gbr+rank-064ad11eec (op densities, access patterns), 5 suite cases; then the search tests on the
# GPU (owed since session 18's top-k fix).
source .whl/prelude.sh || exit 1
mkdir -p $OUT/search_quality
timeout 440 python3 -m benchmarks.search_quality --out $OUT/search_quality --budget 380 \
  --cases softmax_f32_16384x4096 rmsnorm_bf16_32768x4096 layernorm_bf16_32768x4096 bias_gelu_tanh_bf16_16384x8192 cross_entropy_bf16_8192x32000 \
  > $OUT/search_quality/sq.log 2>&1
echo "search_quality rc $?"
find $OUT/search_quality -name "*.db*" -delete
cat $OUT/search_quality/results.md
timeout 130 python3 -m pytest -q tests/test_search.py --device cuda -p no:cacheprovider > $OUT/test_search.txt 2>&1
echo "test_search rc $?"; tail -5 $OUT/test_search.txt
