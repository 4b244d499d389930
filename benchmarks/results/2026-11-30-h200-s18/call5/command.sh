#!/bin/bash
# session 18, call 5 (nvidia-h200): the search tests on the GPU (num_stages out of the space, the
# close runner-ups timed as finalists), with the fake timer and CUDA tensors.
source .whl/prelude.sh || exit 1
timeout 240 python3 -m pytest -q -x tests/test_search.py --device cuda -p no:cacheprovider 2>&1 | tail -4
