#!/bin/bash
# session 22, call 1 (nvidia-h200): search quality with the tuner's refine on the two cases session 21 ran
# with the ranking alone (softmax, rmsnorm). At c9b5c42 (session 21's end), model cm8-gbr+rank-9a4dca7023.
# Prediction (before the run): both refine variants meet their claims on both cases (guided 8 refine 24 <= 1.05,
# guided 32 refine 24 <= 1.01), at or below the ranking-alone values of session 21 (softmax 0.992 / 0.994,
# rmsnorm 1.002 / 1.002) within +-0.5%; model only about as in session 21 (softmax ~1.01, rmsnorm ~1.06).
source .whl/prelude.sh || exit 1
mkdir -p $OUT/search_quality
timeout 560 python3 -m benchmarks.search_quality --out $OUT/search_quality --budget 500 --max-candidates 160 \
  --guided-refine 0 24 --cases softmax_f32_16384x4096 rmsnorm_bf16_32768x4096 > $OUT/search_quality/sq.log 2>&1
echo "search_quality rc $?"
find $OUT/search_quality -name "*.db*" -delete
rm -rf $OUT/search_quality/dbs
grep -v "^|" $OUT/search_quality/sq.log | tail -20
cat $OUT/search_quality/results.md
