#!/bin/bash
# session 15: the pair ranker's size, scored on held-out graphs of the new-codegen exports (this
# session's three collections), trained on their other graphs plus the three older exports.
# Run on the CPU machine from the repository root.
cat costmodel/data/h200-2026-11-30-s15.jsonl.gz costmodel/data/h200-2026-11-30-s15b.jsonl.gz \
    costmodel/data/h200-2026-11-30-s15c.jsonl.gz > /tmp/s15-all.jsonl.gz
python -m benchmarks.costmodel_variants --data /tmp/s15-all.jsonl.gz \
    --extra costmodel/data/h200-2026-11-29.jsonl.gz costmodel/data/h200-2026-11-30-s1.jsonl.gz \
    costmodel/data/h200-2026-11-30-s2.jsonl.gz --only "all exports" --seeds 0 1 2 \
    --out benchmarks/results/2026-11-30-h200-s15/costmodel/ranker_size.json
# Run at da3f4e7, where the shipped ranker (RANKER_PARAMS) was 600 trees x 63 leaves: "ranker as
# shipped" in ranker_size.txt is that one, the other row the 300 x 31 of earlier sessions.
