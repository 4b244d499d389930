#!/usr/bin/env bash
# Every kind of generated kernel compiled for sm_90 under an older Triton release as well: the one
# torch 2.11's CUDA build ships (3.6). The test command installs the newest Triton, whose language
# accepts code 3.6 rejects (there a jit helper's result is never a compile-time constant), and the
# interpreter accepts both. Runs tests/test_precompile.py in a throwaway virtual environment that
# sees this one's packages, with that Triton in front of them.
set -euo pipefail
cd "$(dirname "$0")/.."
TRITON_COMPAT="${TRITON_COMPAT:-3.6.0}"
VENV=$(mktemp -d /tmp/autofuse-triton-compat.XXXXXX)
trap 'rm -rf "$VENV"' EXIT
python -m venv --system-site-packages "$VENV"
"$VENV/bin/pip" install -q "triton==$TRITON_COMPAT"
"$VENV/bin/python" -c "import triton; print('Triton', triton.__version__, 'for the sm_90 compile check')"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/test_precompile.py
