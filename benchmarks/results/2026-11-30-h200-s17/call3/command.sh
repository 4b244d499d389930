#!/bin/bash
# session 17, call 3 (nvidia-h200): Inductor's generated code for the seed 16384x4096 case (default
# and max-autotune, to compare with ours on the CPU), then issue 7's search-quality evidence with the
# shipped model cm5 on the current codegen (benchmarks.search_quality, 5 cases).
source .whl/prelude.sh || exit 1
mkdir -p $OUT/inductor $OUT/search_quality
timeout 60 python3 - > $OUT/inductor/log.txt 2>&1 <<'PY'
import os, torch
from torch._inductor.utils import run_and_get_code
from benchmarks.cases import CASES
case = next(c for c in CASES if c.name == "seed_f32_16384x4096")
fn, args = case.build("cuda", 1.0)
for mode in ("default", "max-autotune-no-cudagraphs"):
    torch._dynamo.reset()
    _, code = run_and_get_code(torch.compile(fn, mode=mode), *args)
    open(os.path.join(os.environ["OUT"], "inductor", f"seed_f32_16384x4096.{mode}.py"), "w").write("\n# ----\n".join(code))
print("ok")
PY
echo "inductor rc $?"; tail -2 $OUT/inductor/log.txt
timeout 500 python3 -m benchmarks.search_quality --out $OUT/search_quality --budget 420 \
  --cases softmax_f32_16384x4096 rmsnorm_bf16_32768x4096 layernorm_bf16_32768x4096 bias_gelu_tanh_bf16_16384x8192 cross_entropy_bf16_8192x32000 \
  > $OUT/search_quality/sq.log 2>&1
echo "search_quality rc $?"
find $OUT/search_quality -name "*.db*" -delete
cat $OUT/search_quality/results.md
