#!/bin/bash
# session 15: the shipped model before this session (647bbdc), the one retrained on calls 1-2
# (f31faf1) and the one shipped last (retrained on all six exports, bigger ranker), on the held-out
# graphs of each export. Run on the CPU machine from the repository root.
git show 647bbdc:costmodel/pretrained/cuda-nvidia-h200-sm90.pkl > /tmp/cm-s14.pkl
git show f31faf1:costmodel/pretrained/cuda-nvidia-h200-sm90.pkl > /tmp/cm-s15a.pkl
python -m benchmarks.costmodel_compare costmodel/data/h200-2026-11-29.jsonl.gz costmodel/data/h200-2026-11-30-s1.jsonl.gz \
    costmodel/data/h200-2026-11-30-s2.jsonl.gz costmodel/data/h200-2026-11-30-s15.jsonl.gz \
    costmodel/data/h200-2026-11-30-s15b.jsonl.gz costmodel/data/h200-2026-11-30-s15c.jsonl.gz \
    --model s14=/tmp/cm-s14.pkl --model s15a=/tmp/cm-s15a.pkl \
    --model shipped=costmodel/pretrained/cuda-nvidia-h200-sm90.pkl \
    --out benchmarks/results/2026-11-30-h200-s15/costmodel/compare.json
