# GPU: the model benchmark, the broad corpus and the GPU tests of the merged tree.
source .whl/prelude.sh || exit 1
W=/tmp/work; mkdir -p $W
timeout 270 python3 -m benchmarks.models --out $W/models --variants eager,inductor,autofuse_default --time-budget 250 > $W/models.log 2>&1
echo "models rc $?"
timeout 250 python3 -m benchmarks.programs --out $W/programs --variants eager,inductor,autofuse_default --time-budget 235 > $W/programs.log 2>&1
echo "programs rc $?"
timeout 60 python3 -m pytest -v -n 14 --device cuda -p no:cacheprovider tests/test_convolution.py tests/test_scans.py tests/test_reduction_shapes.py tests/test_runtime_wrapper.py tests/test_models.py > $W/gpu_tests.txt 2>&1
echo "gpu tests rc $?"; grep -E "FAILED|ERROR" $W/gpu_tests.txt | head -20; tail -2 $W/gpu_tests.txt
cp $W/models/results.json $OUT/models.json; cp $W/models/results.md $OUT/models.md; cp $W/models/results.png $OUT/models.png
cp $W/programs/results.json $OUT/programs.json; cp $W/programs/results.md $OUT/programs.md; cp $W/programs/results.png $OUT/programs.png
cat $W/models.log $W/programs.log > $OUT/bench.log; cp $W/gpu_tests.txt $OUT/
head -40 $OUT/models.md
