#!/bin/bash
# session 21, call 3 (nvidia-h200): search quality, part 3: layernorm (its guided 32 missed 1% in call 1 with the
# ranking alone, 1.013 after all 32 trials) and bias+GELU, with the ranking-alone and the refine-24 guided searches.
# At 6ef3cd5, as call 2.
# Prediction (before the run): layernorm's guided 32 refine 24 <= 1.01 (the reference's looped 4096 / 4 warps / cache
# hints config is one refine step from the guided searches' persistent 4096 / 4 warps / early loads); bias+GELU meets all.
source .whl/prelude.sh || exit 1
mkdir -p $OUT/search_quality
timeout 530 python3 -m benchmarks.search_quality --out $OUT/search_quality --budget 470 --max-candidates 160 \
  --guided-refine 0 24 --cases bias_gelu_tanh_bf16_16384x8192 layernorm_bf16_32768x4096 > $OUT/search_quality/sq.log 2>&1
echo "search_quality rc $?"
find $OUT/search_quality -name "*.db*" -delete
rm -rf $OUT/search_quality/dbs
grep -v "^|" $OUT/search_quality/sq.log | tail -20
cat $OUT/search_quality/results.md
