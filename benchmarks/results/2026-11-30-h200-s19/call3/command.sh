#!/bin/bash
# session 19, call 3 (nvidia-h200): the search and search-quality tests on the GPU at HEAD
# (GroupContextPredictor in the tuner; the model-only search uncut), fake timer, CUDA tensors.
source .whl/prelude.sh || exit 1
timeout 250 python3 -m pytest -q tests/test_search.py --device cuda -p no:cacheprovider > $OUT/test_search.txt 2>&1
echo "test_search rc $?"; tail -2 $OUT/test_search.txt
timeout 200 python3 -m pytest -q tests/test_search_quality.py --device cuda -p no:cacheprovider > $OUT/test_search_quality.txt 2>&1
echo "test_search_quality rc $?"; tail -2 $OUT/test_search_quality.txt
