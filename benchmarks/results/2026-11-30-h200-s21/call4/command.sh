#!/bin/bash
# session 21, call 4 (nvidia-h200): the GPU tests of the search at 4f2ac41 (the default ranked with a kernel's other
# candidates, the pair classifier on all cores for large batches, 160 candidates where a learned model ranks).
source .whl/prelude.sh || exit 1
timeout 110 python3 -m pytest -q -x tests/test_search_quality.py --device cuda > $OUT/test_search_quality.txt 2>&1
echo "test_search_quality rc $?"; tail -3 $OUT/test_search_quality.txt
timeout 150 python3 -m pytest -q tests/test_search.py --device cuda > $OUT/test_search.txt 2>&1
echo "test_search rc $?"; tail -3 $OUT/test_search.txt
