#!/bin/bash
# session 16: the noise ceiling of the ranking metrics on the new-codegen exports (sessions 15-16),
# twins merged (costmodel.model.usable), under the run-to-run sigma measured in session 12, and the
# shipped model (cm5-gbr+rank-e1268d194f) on the same held-out graphs. CPU machine, repository root.
cat costmodel/data/h200-2026-11-30-s15.jsonl.gz costmodel/data/h200-2026-11-30-s15b.jsonl.gz \
    costmodel/data/h200-2026-11-30-s15c.jsonl.gz costmodel/data/h200-2026-11-30-s16.jsonl.gz > /tmp/new-all.jsonl.gz
python -m benchmarks.costmodel_noise --data /tmp/new-all.jsonl.gz --sims 100 \
    --repeats benchmarks/results/2026-11-29-h200-s12/noise/a.jsonl.gz benchmarks/results/2026-11-29-h200-s12/noise/b.jsonl.gz \
    --model costmodel/pretrained/cuda-nvidia-h200-sm90.pkl
