#!/bin/bash
# session 20, call 4 (nvidia-h200): the GPU tests of the search with the newly shipped model
# (cm8-gbr+rank-9a4dca7023) and search_quality's --max-candidates.
source .whl/prelude.sh || exit 1
timeout 110 python3 -m pytest -q tests/test_search_quality.py --device cuda > $OUT/test_search_quality.txt 2>&1
echo "test_search_quality rc $?"; tail -3 $OUT/test_search_quality.txt
timeout 150 python3 -m pytest -q tests/test_search.py --device cuda > $OUT/test_search.txt 2>&1
echo "test_search rc $?"; tail -3 $OUT/test_search.txt
