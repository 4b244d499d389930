#!/usr/bin/env bash
# Every kind of generated kernel compiled for sm_90 under an older Triton release as well: the one
# torch 2.11's CUDA build ships (3.6). The test command installs the newest Triton, whose language
# accepts code 3.6 rejects (there a jit helper's result is never a compile-time constant), and the
# interpreter accepts both. Runs tests/test_precompile.py with that Triton installed in a throwaway
# folder put in front of the environment's packages.
set -euo pipefail
cd "$(dirname "$0")/.."
TRITON_COMPAT="${TRITON_COMPAT:-3.6.0}"
TARGET=$(mktemp -d /tmp/autofuse-triton-compat.XXXXXX)
trap 'rm -rf "$TARGET"' EXIT
python -m pip install -q --no-deps --target "$TARGET" "triton==$TRITON_COMPAT"
PYTHONPATH="$TARGET${PYTHONPATH:+:$PYTHONPATH}" python -c \
  "import triton; print('Triton', triton.__version__, 'for the sm_90 compile check')"
PYTHONPATH="$TARGET${PYTHONPATH:+:$PYTHONPATH}" python -m pytest -q -p no:cacheprovider tests/test_precompile.py
