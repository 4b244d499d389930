#!/bin/bash
# session 22: the noise ceiling of the ranking metrics on the held-out set that retrain scores (all 11 exports of
# c9b5c42, split seed 0: 41 graphs, 363 groups), twins merged, under the run-to-run sigma measured in session 12,
# and the shipped model (cm8-gbr+rank-9a4dca7023) on the same groups. CPU machine, repository root.
cat $(ls costmodel/data/*.jsonl.gz | grep -v s22) > /tmp/all11.jsonl.gz
python -m benchmarks.costmodel_noise --data /tmp/all11.jsonl.gz --sims 100 \
    --repeats benchmarks/results/2026-11-29-h200-s12/noise/a.jsonl.gz benchmarks/results/2026-11-29-h200-s12/noise/b.jsonl.gz \
    --model costmodel/pretrained/cuda-nvidia-h200-sm90.pkl
