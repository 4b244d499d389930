#!/bin/bash
# session 19, call 4 (nvidia-h200): tests/test_search_quality.py on the GPU again, after call 3's
# failure of test_model_only_search_is_not_cut_by_its_budget (its guided half depended on the host's speed).
source .whl/prelude.sh || exit 1
timeout 200 python3 -m pytest -q tests/test_search_quality.py --device cuda -p no:cacheprovider > $OUT/test_search_quality.txt 2>&1
echo "test_search_quality rc $?"; tail -2 $OUT/test_search_quality.txt
