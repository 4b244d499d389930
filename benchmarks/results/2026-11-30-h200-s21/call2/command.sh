#!/bin/bash
# session 21, call 2 (nvidia-h200): the clean search-quality re-run owed by session 20, part 2: cross-entropy alone,
# so its reference keeps its trials. At 6ef3cd5: a model-only search ranks each kernel's candidates once (the default
# with the rest) and the pair classifier predicts a search's ranking on all cores. New guided variants with the
# tuner's own refine (24 neighbours, model-ranked), beside the ranking-alone ones.
# Prediction (before the run): model-only search < 50 s (s20: 95 s); the reference runs >= 6 of 32 trials;
# model only <= 1.10; guided 8 <= 1.05 (both); guided 32 refine 0 misses 1% (s20: 1.032), guided 32 refine 24 meets it.
source .whl/prelude.sh || exit 1
mkdir -p $OUT/search_quality
timeout 575 python3 -m benchmarks.search_quality --out $OUT/search_quality --budget 540 --max-candidates 160 \
  --guided-refine 0 24 --cases cross_entropy_bf16_8192x32000 > $OUT/search_quality/sq.log 2>&1
echo "search_quality rc $?"
find $OUT/search_quality -name "*.db*" -delete
rm -rf $OUT/search_quality/dbs
grep -v "^|" $OUT/search_quality/sq.log | tail -20
cat $OUT/search_quality/results.md
