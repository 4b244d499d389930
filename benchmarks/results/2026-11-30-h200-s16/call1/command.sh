#!/bin/bash
# session 16, call 1 (nvidia-h200, tree 3f1a859's stream_probe): cache modifiers and grid-stride
# programs on SwiGLU, RMSNorm and the seed example at 16384x4096, against Inductor in the same run.
# Run as: source .whl/prelude.sh && bash command.sh
set -x
nvidia-smi --query-gpu=name,driver_version --format=csv
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)"
mkdir -p $OUT/probe; python3 -m benchmarks.stream_probe --out $OUT/probe --reps 50 --rounds 7 2>&1 | tee $OUT/probe/log.txt
