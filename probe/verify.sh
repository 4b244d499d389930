source .whl/prelude.sh || exit 1
timeout 110 python3 -m pytest -q -n 14 --device cuda -p no:cacheprovider tests/test_convolution.py tests/test_scans.py tests/test_reduction_shapes.py tests/test_runtime_wrapper.py tests/test_models.py > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc $?"; grep -E "^FAILED|^ERROR" $OUT/gpu_tests.txt | head -20; tail -1 $OUT/gpu_tests.txt
