#!/bin/bash
# session 16, call 5 (nvidia-h200, tree 5618201 + docs): the search and launcher tests on the GPU
# after loop-free configs lost their second num_stages value.
source .whl/prelude.sh && mkdir -p $OUT && timeout 170 python3 -m pytest -q -n 8 tests/test_search.py tests/test_launcher.py -p no:cacheprovider --device cuda > $OUT/gpu_tests.txt 2>&1; tail -3 $OUT/gpu_tests.txt
