#!/bin/bash
# GPU smoke of the merged tree: GPU tests, the model benchmark (3 models), 40 corpus programs.
source .whl/prelude.sh || exit 1
W=/tmp/work; mkdir -p $W
timeout 220 python3 -m pytest -q -x -n 8 tests --device cuda -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc $?"; tail -4 $OUT/gpu_tests.txt
timeout 180 python3 -m benchmarks.models --out $W/models --models gpt2,llama,bert --variants eager,inductor,autofuse_default --time-budget 160 > $OUT/models.log 2>&1
echo "models rc $?"; cp $W/models/results.md $OUT/models.md 2>/dev/null; cp $W/models/results.json $OUT/models.json 2>/dev/null
timeout 160 python3 -m benchmarks.programs --out $W/programs --variants eager,inductor,autofuse_default --max-programs 45 --time-budget 140 > $OUT/programs.log 2>&1
echo "programs rc $?"; cp $W/programs/results.md $OUT/programs.md 2>/dev/null; cp $W/programs/results.json $OUT/programs.json 2>/dev/null
cat $OUT/models.md 2>/dev/null | head -30
