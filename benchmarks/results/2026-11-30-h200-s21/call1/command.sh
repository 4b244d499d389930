#!/bin/bash
# session 21, call 1 (nvidia-h200): the clean search-quality re-run owed by session 20, part 1.
# Same model (cm8-gbr+rank-9a4dca7023) and --max-candidates 160 as s20 call 3, now with GroupContextPredictor's
# per-group cache (e81bbdf), and 3 cases instead of 5 in about the same budget, so the references keep their trials.
# Prediction (written before the run): model-only searches take about a third of their s20 time (layernorm 51 s -> ~17 s);
# the references run >= 8 trials; softmax, rmsnorm and layernorm meet all three claims (model-only <= 1.10,
# guided 8 <= 1.05, guided 32 <= 1.01).
source .whl/prelude.sh || exit 1
mkdir -p $OUT/search_quality
timeout 570 python3 -m benchmarks.search_quality --out $OUT/search_quality --budget 520 --max-candidates 160 \
  --cases softmax_f32_16384x4096 rmsnorm_bf16_32768x4096 layernorm_bf16_32768x4096 \
  > $OUT/search_quality/sq.log 2>&1
echo "search_quality rc $?"
find $OUT/search_quality -name "*.db*" -delete
rm -rf $OUT/search_quality/dbs
cat $OUT/search_quality/results.md
